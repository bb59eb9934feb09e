"""`harness report`: a record (and optionally a second one) -> analyses -> a jinja2 Markdown record.

This module turns analyses into a template context of sentences and `mdtable.Table`s; the
templates (harness/templates/*.md.j2, or a file of the same name in ./reports/templates/,
which wins) only lay them out. It reads records and model headers and runs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from harness.analyze.facts import Facts
from harness.analyze.verdict import Judgement
from harness.core.errors import UserError
from harness.render import mdtable
from harness.render.comparesec import compare_section
from harness.render.drafter_sec import drafter_includes, drafter_split_sections, shape_sections
from harness.render.finding import arms_note, arms_verdict_table
from harness.render.mdtable import Table
from harness.render.roundsec import (
    cost_section,
    profile_sections,
    scaling_section,
    split_includes,
    split_sections,
    split_table,
)
from harness.render.sections import (
    acceptance_section,
    arms_table,
    columns_note,
    identity_table,
    memory_note,
    probe_readings,
    sequential_paragraphs,
    setup_brief,
    setup_table,
)
from harness.render.verdicts import (
    flags_table,
    headline,
    left_out_table,
    limits,
    override_table,
    reproducing,
    shipping_status,
)

if TYPE_CHECKING:   # imported where used: `harness --help` need not load it
    import jinja2

TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"
USER_TEMPLATES = Path("reports") / "templates"
# --- context, rendering, index -----------------------------------------------------------

def build_context(fx: Facts, j: Judgement, compare: tuple[str, Facts] | None = None,
                  figures: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """A record's template context from its analyses (`fx`, and `j`: each arm's verdict);
    `compare`: a second record's path and analyses beside it; `figures`: the (title, link) of each
    figure written beside the report."""
    path = fx.path
    cmp_sec = compare_section(fx, compare[1]) if compare else None
    arms, arm_notes = arms_table(fx)
    ident, ident_notes = identity_table(fx)
    cost = cost_section(fx)
    head, short = headline(fx, j, cmp_sec)
    setup = setup_table(fx, cmp_sec.shipping if cmp_sec else None)
    left_out = left_out_table(fx)
    return {
        "title": f"{fx.suite.name} on {fx.host_name()}, {fx.date()}",
        "record_path": path, "created": fx.record.created, "host": fx.host_short(),
        "headline": head, "finding": head, "short_headline": short, "shipping_status": shipping_status(fx),
        "verdicts": arms_verdict_table(j), "verdicts_note": arms_note(j, len(fx.prompts)),
        "figures": [{"title": t, "link": link} for t, link in figures or []],
        "setup": setup, "setup_brief": setup_brief(setup), "probe_readings": probe_readings(fx),
        "arms": arms, "arm_notes": arm_notes, "columns_note": columns_note(fx), "memory_note": memory_note(fx), "overrides": override_table(fx),
        "split": split_table(fx),
        "splits": split_sections(fx), "split_includes": split_includes(fx), "profiles": profile_sections(fx),
        "drafter_splits": drafter_split_sections(fx), "drafter_includes": drafter_includes(fx),
        "shapes": shape_sections(fx),
        "scaling": scaling_section(fx), "cost": cost,
        "identity": ident, "identity_notes": ident_notes,
        "acceptance": acceptance_section(fx), "compare": cmp_sec, "sequential": sequential_paragraphs(fx),
        "thrown": left_out, "left_out": left_out, "flags": flags_table(fx),
        "limits": limits(fx, cost), "reproducing": reproducing(fx, compare[0] if compare else None),
    }


def environment(user_dir: Path | None = None) -> jinja2.Environment:
    import jinja2
    loader = jinja2.ChoiceLoader([jinja2.FileSystemLoader(str(user_dir or USER_TEMPLATES)),
                                  jinja2.FileSystemLoader(str(TEMPLATES_DIR))])
    env = jinja2.Environment(loader=loader, autoescape=False, trim_blocks=True, lstrip_blocks=True,
                             keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["table"] = mdtable.render
    return env


def render(context: dict[str, Any], template: str = "record", user_dir: Path | None = None) -> str:
    import jinja2
    name = template if template.endswith(".j2") else f"{template}.md.j2"
    try:
        tpl = environment(user_dir).get_template(name)
    except jinja2.TemplateNotFound:
        raise UserError(f"template {name!r} not found in {user_dir or USER_TEMPLATES}/ or {TEMPLATES_DIR}/") from None
    except jinja2.TemplateSyntaxError as e:
        raise UserError(f"template {e.filename or name}:{e.lineno}: {e.message}") from None
    try:
        return tpl.render(**context)
    except jinja2.UndefinedError as e:
        raise UserError(f"template {name}: {e.message}") from None


class _IndexFields(msgspec.Struct, kw_only=True):
    """What the index shows of a record's context (build_context's; the rest is the report's)."""
    created: str
    host: str
    short_headline: str
    shipping_status: str


def index_context(entries: list[tuple[str, str | None, dict[str, Any]]], reports_dir: str) -> dict[str, Any]:
    """The index of a reports directory: entries are (JSON name, its rendered .md name or None,
    the record's context), newest first."""
    rows = []
    for json_name, md_name, ctx in entries:
        link = (f"[{md_name}]({md_name}) ([JSON]({json_name}))" if md_name
                else f"[{json_name}]({json_name}) (not rendered)")
        rows.append((link, msgspec.convert(ctx, _IndexFields)))
    rows.sort(key=lambda r: _when(r[1].created), reverse=True)
    t = Table(["date", "record", "host", "headline", "shipping status"])
    for link, e in rows:
        t.add(e.created[:10], link, e.host, e.short_headline, e.shipping_status)
    return {"table": t, "count": len(rows), "reports_dir": reports_dir}


def _when(created: str) -> float:
    import datetime as dt
    try:
        return dt.datetime.fromisoformat(created).timestamp()
    except (TypeError, ValueError):
        return 0.0    # undated records sort last
