"""Records rendered to Markdown files: one record (and a second beside it), a reports
directory's index, and the records a nightly run left without Markdown. The reading and
writing happen here; harness.render.reportcontext only turns a loaded record into text."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import msgspec

from harness.analyze.facts import Facts, Inputs
from harness.ci.ackfile import DEFAULT as ACKS_DEFAULT
from harness.ci.ackfile import acks_for_check
from harness.collect.files import check_directory, marked, write_output, written_by
from harness.collect.record import read_record
from harness.core.errors import UserError
from harness.core.recordsections import ModelFiles
from harness.core.runs import as_record
from harness.core.schema import Record
from harness.render.reportcontext import build_context, index_context, render
from harness.render.reportcost import ModelTables

REPORT_WRITER = "report"   # the writer a report's and its figures' markers name


@dataclass(frozen=True)
class Backfill:
    """What a record from before schema 3 (its host spec) or schema 4 (its tensor tables)
    lacks, read now by collection's readers; the command's composition root passes them in, so
    reporting reads no host spec or model file itself. Without one, such a record is rendered
    with no host spec and no tensor tables."""

    # The record's host section -> the lab host spec it matches (None: none does).
    host_spec: Callable[[dict[str, Any]], dict[str, Any] | None]
    # The record's suite section -> {pairing: {role: {"directory", "tensors", "error"?}}}.
    models: Callable[[dict[str, Any]], dict[str, Any]]


def load_record(path: str, backfill: Backfill | None = None) -> tuple[Record, Inputs]:
    """A record as the report reads it, typed: kind, version (migrated) and shape checked (its
    suite section's settings, arms, prompts and pairings too), and what the report needs beside
    it (inputs_for: an older record's host spec and tensor tables from `backfill`)."""
    data = read_record(Path(path))
    return as_record(data), inputs_for(data, backfill)


class _Sections(msgspec.Struct, kw_only=True):
    """What an older record may lack, as the file gives it: the host spec it matched (the
    record's own since schema 3, unset before) and each pairing's model files (since schema 4)."""
    host: dict[str, Any] | None = None
    models: dict[str, dict[str, ModelFiles]] | msgspec.UnsetType = msgspec.UNSET
    suite: dict[str, Any] = {}


class _Host(msgspec.Struct, kw_only=True):
    spec: dict[str, Any] | None | msgspec.UnsetType = msgspec.UNSET
    mlx: dict[str, Any] | None = None


def _load(path: str, compare_path: str | None, backfill: Backfill | None
          ) -> tuple[Record, Inputs, tuple[str, Record, Inputs] | None]:
    rec, inputs = load_record(path, backfill)
    compare = None
    if compare_path:
        other, other_inputs = load_record(compare_path, backfill)
        compare = (compare_path, other, dataclasses.replace(other_inputs, acks=acks_between(rec, other)))
    return rec, inputs, compare


def context_for(path: str, compare_path: str | None = None, backfill: Backfill | None = None) -> dict[str, Any]:
    """The template context of the record at path, with a second record beside it (no figures:
    they need a place beside the Markdown, report_files)."""
    rec, inputs, compare = _load(path, compare_path, backfill)
    return _context(path, rec, inputs, compare)


def report_files(path: str, compare_path: str | None, md: Path, backfill: Backfill | None = None
                 ) -> tuple[dict[str, Any], list[tuple[Path, str]]]:
    """The context of a report to be written at `md`, and its figures: (path, SVG text) in the
    folder named after the report (reports/STEM.md -> reports/STEM/NAME.svg), linked from it."""
    rec, inputs, compare = _load(path, compare_path, backfill)
    figs = figures_for(rec, compare[1] if compare else None)
    folder = md.parent / md.stem
    files = [(folder / f"{fig.name}.svg", fig.svg) for fig in figs]
    links = [(fig.title, f"{quote(md.stem)}/{quote(fig.name)}.svg") for fig in figs]
    return _context(path, rec, inputs, compare, links), files


def _context(path: str, rec: Record, inputs: Inputs, compare: tuple[str, Record, Inputs] | None,
             links: list[tuple[str, str]] | None = None) -> dict[str, Any]:
    """The analyses a report renders, made here (the renderer computes nothing), then its context."""
    from harness.analyze.verdict import judge
    other = (compare[0], Facts(*compare)) if compare else None
    return build_context(Facts(path, rec, inputs), judge(rec), other, links)


def figures_for(data: Record, after: Record | None = None) -> list[Any]:
    """A record's figures (harness.render.figures.Figure), or a comparison's (data before, `after`
    after); none where this harness has no figure module."""
    try:
        from harness.analyze.figuredata import compare_figure_data, record_figure_data
        from harness.render.figures import compare_figures, record_figures
    except ImportError:
        return []
    if after is not None:
        cd = compare_figure_data(data, after)
        # No arm has runs on either side: nothing to draw.
        return list(compare_figures(cd)) if cd is not None else []
    return list(record_figures(record_figure_data(data)))


def check_figures(files: list[tuple[Path, str]]) -> None:
    """One line before anything is written (nothing is made here) when a figure's folder cannot be
    made or a figure would replace something the harness did not write."""
    for p, _ in files:
        check_directory(p.parent, "figure folder")
        if p.exists() and not (p.is_file() and written_by(p, REPORT_WRITER)):
            raise UserError(f"{p}: not written by harness {REPORT_WRITER}; writing the figure there would "
                            "replace it; pass another --out or remove it")


def write_figures(files: list[tuple[Path, str]]) -> None:
    """Each figure written atomically with the report's marker (an XML comment after the SVG's
    root, so the next rendering knows the file as its own); an earlier rendering's figures that
    are no longer made are removed, files the harness did not write are kept."""
    for p, svg in files:
        p.parent.mkdir(parents=True, exist_ok=True)
        write_output(p, marked(svg, REPORT_WRITER), "figure")
    keep = {p for p, _ in files}
    for folder in {p.parent for p in keep}:
        for old in folder.glob("*.svg"):
            if old not in keep and written_by(old, REPORT_WRITER):
                old.unlink()


def acks_between(a: Record, b: Record) -> tuple[tuple[str, str, str, str], ...]:
    """The acknowledgements (benchmarks/acknowledgements.toml of b's repository, where it still
    exists here) covering a commit after a's and up to b's."""
    ra, rb = a.host.repo, b.host.repo
    repo = Path(rb.path)
    if not (ra.commit and rb.commit and ra.commit != rb.commit and (repo / ".git").exists()):
        return ()
    try:
        acks, covered = acks_for_check(repo, repo / ACKS_DEFAULT, ra.commit, rb.commit)
    except UserError:
        return ()
    return tuple((x.commits_spec, x.figure, x.arm, x.reason) for x in acks if x.commits.intersection(covered))


def inputs_for(data: dict[str, Any], backfill: Backfill | None = None) -> Inputs:
    """What the renderer needs beyond the record: the host spec (the record's own since schema
    3) and each pairing's tensor tables (the record's own since schema 4); an older record's from
    `backfill`, or none; whether its host section has an MLX section."""
    rec = msgspec.convert(data, _Sections)
    host = msgspec.convert(rec.host or {}, _Host)
    spec = host.spec if host.spec is not msgspec.UNSET else backfill.host_spec(rec.host or {}) if backfill else None
    stored = rec.models if rec.models is not msgspec.UNSET else \
        msgspec.convert(backfill.models(rec.suite), dict[str, dict[str, ModelFiles]]) if backfill else {}
    models: ModelTables = {pairing: {role: (m.directory, m.tensors if m.tensors is not None
                                            else m.error or "no tensor table")
                                     for role, m in roles.items()}
                           for pairing, roles in stored.items()}
    return Inputs(host_spec=spec, models=models, mlx_collected=bool(host.mlx))


def index_text(reports_dir: Path, template: str = "index", backfill: Backfill | None = None) -> tuple[str, list[str]]:
    """The index of every record in reports_dir, and a line per record that could not be read."""
    entries, skipped = [], []
    for p in sorted(reports_dir.glob("*.json")):
        try:
            ctx = context_for(str(p), backfill=backfill)
        except UserError as e:
            skipped.append(str(e))
            continue
        md = p.with_suffix(".md")
        entries.append((p.name, md.name if md.exists() else None, ctx))
    return render(index_context(entries, str(reports_dir)), template), skipped


def render_missing(records_dir: Path, backfill: Backfill | None = None) -> int:
    """Markdown beside each record that has none, then the index; returns how many were written.
    A record that cannot be rendered is named on stderr and left as it is, and so is a README.md
    the index did not write (its marker, or its first line the index's)."""
    if not records_dir.is_dir():
        return 0
    n = 0
    for rec in sorted(records_dir.glob("*.json")):
        md = rec.with_suffix(".md")
        if md.exists():
            continue
        try:
            ctx, figs = report_files(str(rec), None, md, backfill)
            check_figures(figs)
            write_figures(figs)
            md.write_text(marked(render(ctx, "record"), REPORT_WRITER), encoding="utf-8")
            n += 1
        except UserError as e:
            print(f"harness: report of {rec.name} failed: {e}", file=sys.stderr)
    text, _ = index_text(records_dir, backfill=backfill)
    readme = records_dir / "README.md"
    first = text.split("\n", 1)[0]
    if readme.is_file() and not written_by(readme, "report --index", earlier=lambda old: old.split("\n", 1)[0] == first):
        print(f"harness: kept {readme}: not written by harness report --index", file=sys.stderr)
        return n
    readme.write_text(marked(text, "report --index"), encoding="utf-8")
    return n
