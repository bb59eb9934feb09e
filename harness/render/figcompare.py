"""Before/after figures of two records: each figure's median with the min-max of its runs.

One dot plot per figure: a row per arm and prompt, the before and after medians side by side
with bars from the fastest to the slowest run, so a change reads as two bars that part (or do
not). The round components share rows, one panel per component, so a phase that moved stands out
beside those that did not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from harness.analyze.figuredata import ArmChange, BeforeAfter, CompareFigureData, ComparePanel, Interval
from harness.render.figures import Figure, canvas, hide_unused, legend_below, row_label, titled, to_svg

if TYPE_CHECKING:
    from matplotlib.axes import Axes

BEFORE, AFTER = "#7f7f7f", "#d62728"    # grey then red: the after side is the one read
SIDE_OFFSET = 0.17                      # rows' before/after dots sit this far above and below
PANEL_COLS = 3


def _side(ax: Axes, ys: list[float], cells: list[Interval | None], colour: str, marker: str) -> None:
    have = [(y, c) for y, c in zip(ys, cells) if c is not None]
    if not have:
        return
    y, c = zip(*have)
    med = [x.median for x in c]
    err = [[x.median - x.lo for x in c], [x.hi - x.median for x in c]]
    ax.errorbar(med, y, xerr=err, fmt=marker, color=colour, capsize=2.5, markersize=5, linewidth=1.2)


def _dots(ax: Axes, rows: list[tuple[str, str]], cells: dict[tuple[str, str], BeforeAfter],
          labels: bool, prompts: int) -> None:
    ys = [float(i) for i in range(len(rows))][::-1]
    got = [cells.get(k) for k in rows]
    _side(ax, [y + SIDE_OFFSET for y in ys], [g.before if g else None for g in got], BEFORE, "o")
    _side(ax, [y - SIDE_OFFSET for y in ys], [g.after if g else None for g in got], AFTER, "s")
    if labels:   # axes that share y share these ticks: set them once, on the first
        ax.set_yticks(ys, [row_label(a, p, prompts) for a, p in rows])
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.grid(axis="y", visible=False)
    ax.margins(x=0.1)


def _legend(fig: Any, cd: CompareFigureData) -> None:
    from matplotlib.lines import Line2D
    handles = [Line2D([], [], color=BEFORE, marker="o"), Line2D([], [], color=AFTER, marker="s")]
    legend_below(fig, handles, [f"before: {cd.before}", f"after: {cd.after}"], 1)


def _prompts(rows: list[tuple[str, str]]) -> int:
    return len({p for _, p in rows})


def ms_figure(cd: CompareFigureData) -> Figure | None:
    panel = cd.ms_per_token
    if panel is None or not panel.rows:
        return None
    rows = [(r.arm, r.prompt) for r in panel.rows]
    with canvas(1.6 + 0.42 * len(rows) + 0.3, 1, 1) as (fig, axes):
        ax = axes[0, 0]
        _dots(ax, rows, {(r.arm, r.prompt): r for r in panel.rows}, True, _prompts(rows))
        ax.set_xlabel("ms/token (lower is faster)")
        _legend(fig, cd)
        titled(fig, "ms/token before and after, per arm and prompt",
               "dot: median of the measured runs; bar: fastest to slowest run")
        svg = to_svg(fig)
    return Figure("compare-ms-per-token", "ms/token before and after, per arm and prompt "
                  "(median of measured runs, bars min-max)", svg)


def components_figure(cd: CompareFigureData, unit: str) -> Figure | None:
    panels: list[ComparePanel] = [p for p in cd.components if p.unit == unit and p.rows]
    if not panels:
        return None
    rows = list(dict.fromkeys((r.arm, r.prompt) for p in panels for r in p.rows))
    cols = min(PANEL_COLS, len(panels))
    grid = (len(panels) + cols - 1) // cols
    height = 0.9 + 0.3 * len(rows)
    with canvas(1.5 + grid * height + 0.3, grid, cols, sharey=True) as (fig, axes):
        for i, (ax, p) in enumerate(zip(axes.flat, panels)):
            _dots(ax, rows, {(r.arm, r.prompt): r for r in p.rows}, i == 0, _prompts(rows))
            ax.set_title(p.name, loc="left", fontsize=9)
            ax.set_xlabel(f"ms per {unit}", fontsize=8)
        hide_unused(axes, len(panels))
        _legend(fig, cd)
        what = "speculative rounds" if unit == "round" else "classic decode steps"
        titled(fig, f"Round components before and after: {what}, ms per {unit}",
               "components both records have; dot: median of the measured runs; bar: fastest to slowest run")
        svg = to_svg(fig)
    stem = "compare-round-split" if unit == "round" else "compare-token-split"
    return Figure(stem, f"Round components before and after, ms per {unit} ({what}; "
                  "median of measured runs, bars min-max)", svg)


VERDICT_COLOURS = {"slower": "#d62728", "faster": "#2ca02c"}   # anything else: grey


def _change_row(ax: Axes, y: float, c: ArmChange) -> None:
    colour = VERDICT_COLOURS.get(c.verdict, "#7f7f7f")
    x = 100 * c.change
    if c.lo is not None and c.hi is not None:
        ax.errorbar([x], [y], xerr=[[x - 100 * c.lo], [100 * c.hi - x]], fmt="o", color=colour,
                    capsize=3, markersize=5, linewidth=1.4)
    else:   # too few pairs for an interval: the point alone, hollow
        ax.plot([x], [y], "o", color=colour, markerfacecolor="none", markersize=6)


def change_figure(cd: CompareFigureData) -> Figure | None:
    """Each arm's paired ms/token change with its interval, against no change and the band the
    check had to be able to see: a change reads as an interval clear of zero."""
    if not cd.changes:
        return None
    ys = [float(i) for i in range(len(cd.changes))][::-1]
    with canvas(1.6 + 0.36 * len(ys) + 0.3, 1, 1) as (fig, axes):
        ax = axes[0, 0]
        t = 100 * cd.threshold
        ax.axvspan(-t, t, color="#7f7f7f", alpha=0.12, linewidth=0)
        ax.axvline(0.0, color="#444444", linewidth=0.8)
        for y, c in zip(ys, cd.changes):
            _change_row(ax, y, c)
        ax.set_yticks(ys, [f"{c.arm} ({c.verdict})" for c in cd.changes])
        ax.set_ylim(-0.6, len(ys) - 0.4)
        ax.grid(axis="y", visible=False)
        ax.set_xlabel("ms/token change, after against before (%; above 0: slower)")
        titled(fig, "ms/token change per arm, after against before",
               f"paired by prompt and repetition; bars: 95% interval\nband: ±{t:g}%, the change "
               "the check had to see; hollow dot: too few pairs for an interval")
        svg = to_svg(fig)
    return Figure("compare-ms-per-token-change", "ms/token change per arm, after against before "
                  "(paired, 95% intervals; band: the threshold)", svg)


def compare_figures(cd: CompareFigureData) -> list[Figure]:
    out = [change_figure(cd), ms_figure(cd), components_figure(cd, "round"), components_figure(cd, "token")]
    return [f for f in out if f is not None]
