"""Records rendered to Markdown files: one record (and a second beside it), a reports
directory's index, and the records a nightly run left without Markdown. The reading and
writing happen here; harness.render.report only turns a loaded record into text."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from typing import Any

from harness.ci.acks import DEFAULT as ACKS_DEFAULT
from harness.ci.acks import acks_for_check
from harness.collect.files import marked, written_by
from harness.collect.host.profiles import match_profile
from harness.collect.models import model_files
from harness.collect.record import Record
from harness.core.errors import UserError
from harness.render.facts import Inputs
from harness.render.report import build_context, index_context, render
from harness.render.reportcost import ModelTables


def load_record(path: str) -> dict[str, Any]:
    """A record as the report reads it: kind, version (migrated) and shape checked."""
    rec = Record.load(path).data
    for key in ("settings", "arms", "prompts", "pairings"):
        if key not in rec["suite"]:
            raise UserError(f"{path}: record's suite has no {key!r} field")
    return rec


def context_for(path: str, compare_path: str | None = None) -> dict[str, Any]:
    """The template context of the record at path, with a second record beside it."""
    data = load_record(path)
    compare = None
    if compare_path:
        other = load_record(compare_path)
        inputs = dataclasses.replace(inputs_for(other), acks=acks_between(data, other))
        compare = (compare_path, other, inputs)
    return build_context(path, data, inputs_for(data), compare)


def acks_between(a: dict[str, Any], b: dict[str, Any]) -> tuple[tuple[str, str, str, str], ...]:
    """The acknowledgements (benchmarks/acknowledgements.toml of b's repository, where it still
    exists here) covering a commit after a's and up to b's."""
    ra, rb = (x.get("host", {}).get("repo") or {} for x in (a, b))
    repo = Path(rb.get("path") or "")
    if not (ra.get("commit") and rb.get("commit") and ra["commit"] != rb["commit"] and (repo / ".git").exists()):
        return ()
    try:
        acks, covered = acks_for_check(repo, repo / ACKS_DEFAULT, ra["commit"], rb["commit"])
    except UserError:
        return ()
    return tuple((x.commits_spec, x.figure, x.arm, x.reason) for x in acks if x.commits.intersection(covered))


def inputs_for(data: dict[str, Any]) -> Inputs:
    """What the renderer needs beyond the record: the host profile (the record's own since schema
    3; matched here for an older record) and each pairing's tensor tables (the record's own since
    schema 4; read here from the model directories for an older record)."""
    host = data.get("host") or {}
    profile = host["profile"] if "profile" in host else match_profile(host)
    stored = data["models"] if "models" in data else model_files(data["suite"])
    models: ModelTables = {pairing: {role: (m["directory"], m["tensors"] if m.get("tensors") is not None
                                            else m.get("error") or "no tensor table")
                                     for role, m in roles.items()}
                           for pairing, roles in stored.items()}
    return Inputs(profile=profile, models=models)


def index_text(reports_dir: Path, template: str = "index") -> tuple[str, list[str]]:
    """The index of every record in reports_dir, and a line per record that could not be read."""
    entries, skipped = [], []
    for p in sorted(reports_dir.glob("*.json")):
        try:
            ctx = context_for(str(p))
        except UserError as e:
            skipped.append(str(e))
            continue
        md = p.with_suffix(".md")
        entries.append((p.name, md.name if md.exists() else None, ctx))
    return render(index_context(entries, str(reports_dir)), template), skipped


def render_missing(records_dir: Path) -> int:
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
            md.write_text(marked(render(context_for(str(rec)), "record"), "report"), encoding="utf-8")
            n += 1
        except UserError as e:
            print(f"harness: report of {rec.name} failed: {e}", file=sys.stderr)
    text, _ = index_text(records_dir)
    readme = records_dir / "README.md"
    first = text.split("\n", 1)[0]
    if readme.is_file() and not written_by(readme, "report --index", earlier=lambda old: old.split("\n", 1)[0] == first):
        print(f"harness: kept {readme}: not written by harness report --index", file=sys.stderr)
        return n
    readme.write_text(marked(text, "report --index"), encoding="utf-8")
    return n
