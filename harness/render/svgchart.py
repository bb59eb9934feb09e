"""One arm's ms/token series as an inline SVG: a point per commit (linked to its record), the
nightly's change points as vertical rules, declined and contended commits marked.

Plain SVG written here, no chart library: the dashboard works offline and a test can read
every mark from the DOM. A declined point decoded classic; it is drawn as a hollow grey square
on a dashed grey line so that it never reads as a speculative figure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from html import escape

from harness.analyze.series import ArmSeries, Change, SeriesPoint
from harness.render.verdictwords import cell, phrase


@dataclass(frozen=True)
class Frame:
    """The chart's size in pixels and its margins (left holds the axis labels)."""

    width: int = 860
    height: int = 190
    left: int = 64
    right: int = 16
    top: int = 14
    bottom: int = 30
    labels: bool = True          # axis labels and commit ids (off for the index's sparklines)


SPARK = Frame(width=220, height=46, left=9, right=9, top=8, bottom=8, labels=False)


def _ms(x: float) -> str:
    return f"{x:.3g} ms" if x < 100 else f"{x:.0f} ms"


def _y_range(values: list[float]) -> tuple[float, float]:
    lo, hi = min(values), max(values)
    if hi - lo < 1e-9 * max(1.0, hi):
        lo, hi = lo * 0.95, hi * 1.05 + 1e-9
    pad = (hi - lo) * 0.08
    return max(0.0, lo - pad), hi + pad


def _x_of(n: int, f: Frame) -> list[float]:
    span = f.width - f.left - f.right
    if n == 1:
        return [f.left + span / 2]
    return [f.left + span * i / (n - 1) for i in range(n)]


def _point_title(s: ArmSeries, p: SeriesPoint) -> str:
    return (f"{s.arm} at {p.commit[:8]}: {_ms(p.ms_per_token)}/token, median of {p.runs} runs; "
            f"{s.arm} {phrase(p.verdict)}")


def _point(s: ArmSeries, p: SeriesPoint, x: float, y: float, href: str) -> str:
    title = f"<title>{escape(_point_title(s, p))}</title>"
    if p.declined:
        mark = (f'<rect class="pt declined" x="{x - 4:.1f}" y="{y - 4:.1f}" width="8" height="8" '
                f'fill="#fff" stroke="#888" stroke-width="1.6"/>')
    else:
        ring = ' stroke="#d97706" stroke-width="2.4"' if p.contended else ' stroke="#fff" stroke-width="1"'
        mark = f'<circle class="pt" cx="{x:.1f}" cy="{y:.1f}" r="4.2" fill="#2563eb"{ring}/>'
    return (f'<a href="{escape(href)}" data-commit="{escape(p.commit)}" data-verdict="{escape(cell(p.verdict))}">'
            f"{title}{mark}</a>")


def _change_rule(c: Change, xs: dict[str, float], f: Frame) -> str:
    """A vertical rule between the last commit before the change and the first after it."""
    if c.first_after not in xs:
        return ""
    x = xs[c.first_after]
    if c.last_before in xs:
        x = (xs[c.last_before] + x) / 2
    colour = "#9ca3af" if c.acknowledged else ("#dc2626" if c.direction == "regression" else "#16a34a")
    dash = ' stroke-dasharray="4 3"' if c.acknowledged else ""
    what = f"{c.title}" + (f" (acknowledged: {c.acknowledged})" if c.acknowledged else "")
    return (f'<line class="change" x1="{x:.1f}" x2="{x:.1f}" y1="{f.top}" y2="{f.height - f.bottom}" '
            f'stroke="{colour}" stroke-width="2"{dash}><title>{escape(what)}</title></line>')


def series_svg(s: ArmSeries, href_prefix: str = "", f: Frame = Frame()) -> str:
    """The arm's series, oldest commit on the left; every point links to href_prefix + its page."""
    pts = s.points
    if len(pts) == 1 and f.labels:
        f = replace(f, height=96)   # one commit: a row of its own, not a tall empty frame
    lo, hi = _y_range([p.ms_per_token for p in pts])
    xs = _x_of(len(pts), f)
    plot_h = f.height - f.top - f.bottom

    def y_of(v: float) -> float:
        return f.top + plot_h * (1 - (v - lo) / (hi - lo))

    out = [f'<svg class="series{" declined" if s.declined else ""}" xmlns="http://www.w3.org/2000/svg" '
           f'viewBox="0 0 {f.width} {f.height}" width="{f.width}" height="{f.height}" role="img" '
           f'aria-label="{escape(s.arm)} ms/token per commit">']
    out.append(f'<rect x="{f.left}" y="{f.top}" width="{f.width - f.left - f.right}" height="{plot_h}" '
               'fill="#f8fafc" stroke="#e5e7eb"/>')
    if f.labels:
        for v in (lo, (lo + hi) / 2, hi):
            y = y_of(v)
            out.append(f'<line x1="{f.left}" x2="{f.width - f.right}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e7eb"/>')
            out.append(f'<text x="{f.left - 6}" y="{y + 4:.1f}" text-anchor="end" class="axis">{_ms(v)}</text>')
        step = max(1, len(pts) // 8)
        for i in range(0, len(pts), step):
            # The first and last ids are anchored inward so that neither is cut at the edge.
            anchor = "middle" if len(pts) == 1 else "start" if i == 0 else "end" if i == len(pts) - 1 else "middle"
            out.append(f'<text x="{xs[i]:.1f}" y="{f.height - 10}" text-anchor="{anchor}" class="axis">'
                       f"{escape(pts[i].commit[:7])}</text>")
    byc = {p.commit: x for p, x in zip(pts, xs)}
    out.extend(r for r in (_change_rule(c, byc, f) for c in s.changes) if r)
    if len(pts) > 1:
        line = " ".join(f"{x:.1f},{y_of(p.ms_per_token):.1f}" for p, x in zip(pts, xs))
        style = 'stroke="#9ca3af" stroke-dasharray="5 4"' if s.declined else 'stroke="#2563eb"'
        out.append(f'<polyline points="{line}" fill="none" {style} stroke-width="1.6"/>')
    out.extend(_point(s, p, x, y_of(p.ms_per_token), href_prefix + p.page) for p, x in zip(pts, xs))
    if s.declined and f.labels:
        out.append(f'<text x="{f.left + 10}" y="{f.top + 18}" class="declined-note">'
                   f"{escape(s.arm)} {escape(phrase(s.latest))}</text>")
    out.append("</svg>")
    return "".join(out)
