"""A record's figures as SVG text: what a reader looks at instead of the per-run tables.

matplotlib draws them (well kept, draws without a display, and writes SVG whose text stays
text): small files that GitHub and any browser show, and diff as text. Every figure is drawn
under fixed rcParams with a fixed hash salt and no date, so one record always gives the same
bytes. A figure the record has no data for is left out, never drawn empty. The caller writes
each Figure as NAME.svg and links it; nothing here touches a file.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harness.analyze.figuredata import FIRST_USE, REPEAT, CompareFigureData, FigureData, RunSeries, SplitBar

if TYPE_CHECKING:   # matplotlib is imported when a figure is drawn: the CLI starts without it
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as MplFigure
    from matplotlib.typing import RcKeyType

WIDTH_IN = 7.5        # about a page's text width: readable at 100% in a browser and on GitHub
# Colours (matplotlib's tab10, colour-blind friendlier order first): an arm keeps its colour in
# every figure of a record; phases get their own palette so the two never read as one key.
ARM_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
               "#7f7f7f", "#bcbd22", "#17becf")
PHASE_COLOURS = ("#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3",
                 "#8c8c8c", "#ccb974", "#64b5cd")
KIND_COLOURS = {FIRST_USE: "#d62728", REPEAT: "#1f77b4"}
TITLE_SIZE = 11                  # a figure's title (suptitle), in points
RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",            # text stays text: small, selectable, searchable
    "svg.hashsalt": "harness",   # clip-path ids from this salt, not from a random one
    "svg.id": "figure",
    "font.family": "sans-serif",
    "font.sans-serif": ["DejaVu Sans", "Arial", "Helvetica"],
    "font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "legend.fontsize": 9,
    "xtick.labelsize": 9, "ytick.labelsize": 9, "figure.titlesize": TITLE_SIZE,
    "axes.grid": True, "grid.alpha": 0.3, "grid.linewidth": 0.6,
    "axes.spines.top": False, "axes.spines.right": False,
    "figure.dpi": 100, "savefig.dpi": 100, "path.simplify": True,
    "lines.linewidth": 1.2, "lines.markersize": 4,
}


@dataclass(frozen=True)
class Figure:
    name: str    # file stem, e.g. "ms-per-token-by-run" (the caller writes NAME.svg)
    title: str   # one line, used as the Markdown image's caption/alt
    svg: str     # the SVG document text


# --- drawing helpers --------------------------------------------------------------------------

@contextmanager
def canvas(height_in: float, rows: int = 1, cols: int = 1, **kw: Any) -> Iterator[tuple[MplFigure, Any]]:
    """A figure under the fixed style, and its axes (an array when rows x cols > 1)."""
    import matplotlib
    from matplotlib.figure import Figure as MplFigure
    with matplotlib.rc_context(RC):
        fig = MplFigure(figsize=(WIDTH_IN, height_in), layout="constrained")
        yield fig, fig.subplots(rows, cols, squeeze=False, **kw)


def to_svg(fig: MplFigure) -> str:
    """The figure's SVG text, the same bytes every time (no date, salted ids)."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    FigureCanvasSVG(fig)
    buf = io.StringIO()
    with matplotlib.rc_context(RC):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()


def titled(fig: MplFigure, title: str, note: str = "") -> None:
    """A bold title and, under it, what the figure includes in a smaller line."""
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=TITLE_SIZE)


def colour_of(arms: Sequence[str], arm: str) -> str:
    i = list(arms).index(arm) if arm in arms else len(arms)
    return ARM_COLOURS[i % len(ARM_COLOURS)]


def row_label(arm: str, prompt: str, prompts: int) -> str:
    """An arm on a prompt; just the arm when the record ran one prompt."""
    return arm if prompts <= 1 else f"{arm} · {prompt}"


def legend_below(fig: MplFigure, handles: list[Any], labels: list[str], cols: int = 3) -> None:
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncols=min(cols, len(labels)), frameon=False)


def hide_unused(axes: Any, used: int) -> None:
    for ax in list(axes.flat)[used:]:
        ax.set_visible(False)


# --- 1. ms/token per run in session order -----------------------------------------------------

# Marked runs are drawn as a line's markers (one <use> each), not a scatter (a clip group each):
# an SVG of hundreds of runs stays small.
FAILED_STYLE: dict[str, Any] = dict(marker="x", markersize=6, color="#b00020", markeredgewidth=1.2)
FAILED_ID = "failed-runs"
MARK_STYLE: dict[str, dict[str, Any]] = {
    "contended": dict(marker="o", markersize=9, markerfacecolor="none", markeredgecolor="black",
                      markeredgewidth=1.1),
    "quiet": dict(marker="v", markersize=6, markerfacecolor="none", markeredgecolor="#444444", markeredgewidth=1.0),
    "failed": FAILED_STYLE,
}
MARK_LABEL = {"contended": "contended run (a foreign process was busy)",
              "quiet": "quiet-wait timeout (ran on a busy host)",
              "failed": "failed run (no figure; at the axis)"}
MARK_ID = {"contended": "contended-runs", "quiet": "quiet-timeout-runs", "failed": FAILED_ID}
MANY_RUNS = 150       # past this many runs in a panel, lines carry no marker of their own


# Past MANY_RUNS, marks are ticks along the bottom (one path for all of a kind), not one marker each.
RUG = {"contended": (0.0, 0.05, "black"), "quiet": (0.05, 0.09, "#888888")}


def _rug(ax: Axes, xs: list[int], where: tuple[float, float, str], gid: str) -> None:
    lo, hi, colour = where
    px = [v for x in xs for v in (x, x, float("nan"))]
    py = [v for _ in xs for v in (lo, hi, float("nan"))]
    ax.plot(px, py, color=colour, linewidth=1.0, transform=ax.get_xaxis_transform(), zorder=4, gid=gid)


def _marks(ax: Axes, series: Sequence[RunSeries], panel: int) -> list[str]:
    """Overlay the marked runs of one panel; the marks drawn, for the legend."""
    pts = [p for s in series for p in s.points]
    which = {"contended": [(p.index, p.ms_per_token) for p in pts if p.contended and not p.failed],
             "quiet": [(p.index, p.ms_per_token) for p in pts if p.quiet_timeout and not p.failed]}
    drawn = []
    many = len(pts) > MANY_RUNS
    for mark, xy in which.items():
        if xy and many:
            _rug(ax, [x for x, _ in xy], RUG[mark], f"{MARK_ID[mark]}-{panel}")
            drawn.append(f"{mark}-rug")
        elif xy:
            ax.plot(*zip(*xy), linestyle="none", zorder=4, gid=f"{MARK_ID[mark]}-{panel}", **MARK_STYLE[mark])
            drawn.append(mark)
    failed = [p.index for p in pts if p.failed]
    if failed:   # no figure to place it at: on the x axis, at its place in the session
        ax.plot(failed, [0.03] * len(failed), linestyle="none", zorder=4, transform=ax.get_xaxis_transform(),
                clip_on=False, gid=f"{FAILED_ID}-{panel}", **FAILED_STYLE)
        drawn.append("failed")
    return drawn


def _mark_handles(drawn: set[str]) -> tuple[list[Any], list[str]]:
    from matplotlib.lines import Line2D
    handles, labels = [], []
    for k in MARK_STYLE:
        if k in drawn:
            handles.append(Line2D([], [], linestyle="none", **MARK_STYLE[k]))
            labels.append(MARK_LABEL[k])
        if f"{k}-rug" in drawn:
            handles.append(Line2D([], [], linestyle="none", marker="|", markersize=8, color=RUG[k][2]))
            labels.append(MARK_LABEL[k].replace(" (", ", tick at the bottom (", 1))
    return handles, labels


def runs_figure(fd: FigureData) -> Figure | None:
    if not any(p for s in fd.runs for p in s.points):
        return None
    from matplotlib.lines import Line2D
    prompts = [p for p in fd.prompts if any(s.prompt == p for s in fd.runs)]
    with canvas(1.0 + 2.2 * len(prompts) + 0.4, len(prompts), 1, sharex=True) as (fig, axes):
        drawn: set[str] = set()
        arms_seen: list[str] = []
        for i, (prompt, ax) in enumerate(zip(prompts, axes[:, 0])):
            series = [s for s in fd.runs if s.prompt == prompt]
            marker = "o" if sum(len(s.points) for s in series) <= MANY_RUNS else ""
            for s in series:
                ok = [(p.index, p.ms_per_token) for p in s.points if not p.failed]
                if ok:
                    ax.plot(*zip(*ok), marker=marker, color=colour_of(fd.arms, s.arm), label=s.arm)
                arms_seen += [s.arm] if s.arm not in arms_seen else []
            drawn |= set(_marks(ax, series, i))
            ax.set_ylabel("ms/token")
            if len(prompts) > 1:
                ax.set_title(f"prompt: {prompt}", loc="left")
        axes[-1, 0].set_xlabel("run in session order (the record's run index)")
        few = all(sum(len(s.points) for s in fd.runs if s.prompt == p) <= MANY_RUNS for p in prompts)
        handles = [Line2D([], [], color=colour_of(fd.arms, a), marker="o" if few else "") for a in arms_seen]
        mh, ml = _mark_handles(drawn)
        legend_below(fig, handles + mh, arms_seen + ml)
        warm = f"{fd.warmups} warm-up runs excluded" if fd.warmups else "no warm-up runs"
        titled(fig, "ms/token of each measured run, in session order",
               f"one line per arm (lower is faster); {warm}")
        svg = to_svg(fig)
    circled = ("; contended runs circled" if "contended" in drawn else
               "; contended runs ticked at the bottom" if "contended-rug" in drawn else "")
    return Figure("ms-per-token-by-run", "ms/token of each measured run in session order, per arm "
                  f"(measured runs, warm-ups excluded{circled})", svg)


# --- 2. verify ms by KV length ----------------------------------------------------------------

def kv_figure(fd: FigureData) -> Figure | None:
    arms = list(dict.fromkeys(c.arm for c in fd.kv))
    if not arms:
        return None
    from matplotlib.lines import Line2D
    cols = 1 if len(arms) == 1 else 2
    rows = (len(arms) + cols - 1) // cols
    with canvas(1.1 + 2.1 * rows + 0.3, rows, cols, sharex=True, sharey=True) as (fig, axes):
        for ax, arm in zip(axes.flat, arms):
            curves = [c for c in fd.kv if c.arm == arm]
            for c in curves:
                ax.plot([k + fd.kv_bin / 2 for k in c.kv], c.ms, marker="o" if c.kind == FIRST_USE else ".", markersize=3,
                        linestyle="--" if c.kind == FIRST_USE else "-", color=KIND_COLOURS[c.kind])
            n = {c.kind: c.rounds for c in curves}
            ax.set_title(f"{arm} (T={curves[0].width})\n{n.get(FIRST_USE, 0)} first-use, "
                         f"{n.get(REPEAT, 0)} repeat rounds", loc="left", fontsize=9)
        hide_unused(axes, len(arms))
        for ax in axes[:, 0]:
            ax.set_ylabel("verify ms per round")
        for ax in axes[-1, :]:
            ax.set_xlabel("KV length (tokens)")
        for ax in axes[-2, len(arms) % cols:] if rows > 1 and len(arms) % cols else []:
            ax.xaxis.set_tick_params(labelbottom=True)
            ax.set_xlabel("KV length (tokens)")
        kinds = {c.kind for c in fd.kv}
        keys = [(Line2D([], [], color=KIND_COLOURS[FIRST_USE], linestyle="--", marker="o", markersize=3),
                 "first use (a KV length this width had not run)", FIRST_USE),
                (Line2D([], [], color=KIND_COLOURS[REPEAT], marker="."), "repeat of a shape run before", REPEAT)]
        legend_below(fig, [h for h, _, k in keys if k in kinds], [lab for _, lab, k in keys if k in kinds], 2)
        titled(fig, "Verify forward ms by KV length: first use of a shape vs repeat",
               f"median per {fd.kv_bin}-token KV bin; every completed run, warm-ups included; prompts pooled")
        svg = to_svg(fig)
    return Figure("verify-ms-by-kv-length", "Verify forward ms by KV length, first use vs repeat "
                  "(every completed run, warm-ups included)", svg)


# --- 3. acceptance by draft position ----------------------------------------------------------

def acceptance_figure(fd: FigureData) -> Figure | None:
    if not fd.acceptance:
        return None
    from matplotlib.ticker import PercentFormatter
    k = max(len(a.proposed) for a in fd.acceptance)
    n = len(fd.acceptance)
    width = min(0.45, 0.1 * n)   # arms side by side at a position, not on top
    with canvas(3.8, 1, 1) as (fig, axes):
        ax = axes[0, 0]
        for i, a in enumerate(fd.acceptance):
            dx = (i - (n - 1) / 2) * (width / max(n - 1, 1))
            have = [(j + 1 + dx, s, ci) for j, (s, ci) in enumerate(zip(a.share, a.ci)) if s is not None and ci]
            if not have:
                continue
            xs, ys, cis = zip(*have)
            err = [[y - lo for y, (lo, _) in zip(ys, cis)], [hi - y for y, (_, hi) in zip(ys, cis)]]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, color=colour_of(fd.arms, a.arm),
                        label=f"{a.arm} ({sum(a.proposed)} drafts)")
        ax.set_xticks(range(1, k + 1))
        ax.set_xlim(0.5, k + 0.5)
        ax.set_ylim(0, 1)
        ax.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        ax.set_xlabel("draft position in the round")
        ax.set_ylabel("drafts accepted")
        handles, labels = ax.get_legend_handles_labels()
        legend_below(fig, handles, labels, 2)
        titled(fig, "Share of drafts accepted, by draft position",
               f"speculative arms, {fd.acceptance_runs}; bars: 95% Wilson intervals")
        svg = to_svg(fig)
    return Figure("acceptance-by-position", f"Share of drafts accepted by draft position, per arm "
                  f"({fd.acceptance_runs}; 95% intervals)", svg)


# --- 4. round split as stacked bars -----------------------------------------------------------

def _split_panel(ax: Axes, bars: list[SplitBar], fd: FigureData, colours: dict[str, str]) -> None:
    labels = [row_label(b.arm, b.prompt, len(fd.prompts)) + (" (profile mode)" if b.profile else "")
              + (" (decoded classic)" if b.unit == "token" and b.block > 1 else "") for b in bars]
    ys = list(range(len(bars)))[::-1]
    for y, b in zip(ys, bars):
        left = 0.0
        for s in b.segments:
            ax.barh(y, s.ms, left=left, color=colours[s.phase], height=0.7, edgecolor="white", linewidth=0.5)
            left += s.ms
        if b.unattributed_ms > 0.005 * b.total_ms:
            ax.barh(y, b.unattributed_ms, left=left, color="#dddddd", height=0.7, hatch="//",
                    edgecolor="#999999", linewidth=0.5)
        ax.text(max(left, b.total_ms), y, f" {b.total_ms:.3g}", va="center", fontsize=8)
    ax.set_yticks(ys, labels)
    ax.grid(axis="y", visible=False)
    ax.margins(x=0.12)


def split_figure(fd: FigureData) -> Figure | None:
    if not fd.splits:
        return None
    from matplotlib.patches import Patch
    units = [u for u in ("round", "token") if any(b.unit == u for b in fd.splits)]
    groups = [[b for b in fd.splits if b.unit == u] for u in units]
    colours = {p: PHASE_COLOURS[i % len(PHASE_COLOURS)] for i, (p, _) in enumerate(fd.phases)}
    heights = [max(len(g), 2) * 0.32 + 0.7 for g in groups]
    with canvas(1.3 + sum(heights) + 0.3, len(units), 1, height_ratios=heights) as (fig, axes):
        for ax, unit, bars in zip(axes[:, 0], units, groups):
            _split_panel(ax, bars, fd, colours)
            what = "speculative decode" if unit == "round" else "classic decode"
            ax.set_title(f"{what}: ms per {unit}", loc="left")
            ax.set_xlabel(f"ms per {unit}")
        used = {s.phase for b in fd.splits for s in b.segments}
        handles = [Patch(color=colours[p]) for p, _ in fd.phases if p in used]
        labels = [lab for p, lab in fd.phases if p in used]
        if any(b.unattributed_ms > 0.005 * b.total_ms for b in fd.splits):
            handles.append(Patch(facecolor="#dddddd", hatch="//", edgecolor="#999999"))
            labels.append("unattributed")
        legend_below(fig, handles, labels, 3)
        titled(fig, "Where the decode time goes: ms per round by phase",
               "the engine's own phases, summed over each arm's measured runs; the number is the total")
        svg = to_svg(fig)
    return Figure("round-split", "Round split: ms per round (per token for classic decode) by the engine's "
                  "phases, per arm (measured runs)", svg)


def record_figures(fd: FigureData) -> list[Figure]:
    """The figures this record has data for, in reading order."""
    out = [runs_figure(fd), split_figure(fd), acceptance_figure(fd), kv_figure(fd)]
    return [f for f in out if f is not None]


def compare_figures(cd: CompareFigureData) -> list[Figure]:
    """Before/after figures of two records (harness.render.figcompare draws them)."""
    from harness.render import figcompare
    return figcompare.compare_figures(cd)
