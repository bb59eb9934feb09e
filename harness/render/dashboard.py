"""The harness's dashboard pages, from typed data (harness.analyze.series): an index of every
host's arms with the latest verdict, a page per host with each arm's series, its change points
and alerts, and a page per record and per alert (their Markdown as HTML).

Renders only: harness.ci.site finds the files, builds the data and writes the pages. Every
word that judges an arm is harness.render.verdictwords'. Templates live in
harness/templates/dashboard/ (a directory of the same names passed as user_dir overrides them);
the style is inline, there is no script: the pages work offline and show no console errors.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from harness.analyze import spoiled
from harness.analyze.series import ArmSeries, Change, Commit, HostView, SiteData
from harness.analyze.verdict import ArmVerdict
from harness.render.svgchart import SPARK, series_svg
from harness.render.verdictwords import cell, code, label, phrase

if TYPE_CHECKING:   # imported where used: `harness --help` need not load them
    import jinja2
    from markupsafe import Markup

TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "dashboard"

# Run marks that make a commit's figures unfit to publish or compare (shown as flags).
FLAG_MARKS = ("contended", "unstable", "1 run", "failed", "quiet timeout", "quick", "no cooldown",
              *spoiled.REASONS)   # a run set aside for its host: backup, battery, thermal, gpu-busy


def environment(user_dir: Path | None = None) -> jinja2.Environment:
    import jinja2

    dirs = [str(d) for d in (user_dir, TEMPLATES) if d is not None]
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(dirs), autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.globals.update(badge=badge, flags=flags, label=label, cell=cell, code=code, phrase=phrase, pct=_pct)
    return env


def _pct(x: float | None) -> str:
    return "" if x is None else f"{x:+.1%}" if abs(x) < 0.0995 else f"{x:+.0%}"


def badge(v: ArmVerdict) -> Markup:
    """The verdict's one word (verdictwords.code) in a coloured badge, its cell as the tooltip."""
    from markupsafe import Markup, escape

    return Markup(f'<span class="badge v-{escape(v.outcome.replace(" ", "-"))}" title="{escape(cell(v))}">'
                  f"{escape(code(v))}</span>")


def flags(v: ArmVerdict) -> list[str]:
    """The run flags a reader needs beside the figures: do not publish first, then the marks."""
    return (["do not publish"] if v.do_not_publish else []) + [m for m in v.marks if m in FLAG_MARKS]


def markdown_html(text: str) -> str:
    """Markdown (a record's report, an alert) as HTML: CommonMark with tables; the reports' own
    <details> blocks pass through."""
    from markdown_it import MarkdownIt

    # render() is typed Any (a renderer may be swapped); the default one gives HTML text.
    return str(MarkdownIt("commonmark", {"html": True}).enable("table").render(text))


def _svg(s: ArmSeries, prefix: str, spark: bool = False) -> Markup:
    from markupsafe import Markup

    return Markup(series_svg(s, prefix, SPARK) if spark else series_svg(s, prefix))


def index_page(site: SiteData, user_dir: Path | None = None) -> str:
    env = environment(user_dir)
    return env.get_template("index.html.j2").render(site=site, svg=_svg, root="")


def host_page(site: SiteData, host: HostView, user_dir: Path | None = None) -> str:
    env = environment(user_dir)
    return env.get_template("host.html.j2").render(site=site, host=host, svg=_svg, root="../")


def record_page(host: HostView, commit: Commit, body_html: str, user_dir: Path | None = None) -> str:
    from markupsafe import Markup

    env = environment(user_dir)
    return env.get_template("page.html.j2").render(
        title=f"{host.name}: {commit.sha[:8]}", host=host, commit=commit, body=Markup(body_html), root="../../")


def alert_page(host: HostView, change: Change, body_html: str, user_dir: Path | None = None) -> str:
    from markupsafe import Markup

    env = environment(user_dir)
    return env.get_template("page.html.j2").render(
        title=f"{host.name}: {change.title}", host=host, change=change, body=Markup(body_html), root="../../")


def asv_link(site: SiteData) -> str:
    """asv's own graph of ms/token (its index where the benchmark's name is not known)."""
    return site.asv_index + (f"#{site.asv_benchmark}" if site.asv_benchmark else "")
