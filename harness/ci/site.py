"""The harness's pages of the published dashboard (html/harness/), beside asv's: the files read
here, the data built by harness.analyze.series, the HTML by harness.render.dashboard.

Where the files are:
  records   the harness records the asv benchmarks kept, one per commit and environment
            (harness.ci.asvsession: $HARNESS_ASV_RECORDS, default .asv/records, flat), or a
            results repository's records/<machine>/ (the nightly's layout)
  alerts    the nightly's alerts/<machine>/: state.json (every alert filed), changes.json (every
            step of the last night, acknowledged ones included), <id>.md
  acks      benchmarks/acknowledgements.toml (harness.ci.ackfile), resolved in the asv repository

    html/harness/index.html               every host's arms, latest verdicts, sparklines
    html/harness/hosts/<host>.html        each arm's series, change points, records
    html/harness/records/<host>/<r>.html  a record's report
    html/harness/alerts/<host>/<id>.html  an alert
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from harness.analyze import acks as ackmod
from harness.analyze.series import Change, Commit, HostView, SiteData, changes_of, commit_view, host_series, slug
from harness.ci.reportfiles import Backfill
from harness.core.errors import UserError
from harness.core.schema import Record
from harness.render import dashboard as pages

SITE_DIR = "harness"
CHANGES_FILE = "changes.json"
# asv's index gets one link to the harness's pages, after its navigation bar's brand.
LINK_MARK = "<!-- harness-dashboard-link -->"
DEFAULT_HOST = "this host"


@dataclass(frozen=True)
class Sources:
    """Where the site's inputs are; None: not there."""

    records: Path | None          # a records directory (flat, or one directory per machine)
    alerts: Path | None           # the alerts directory (one directory per machine)
    repo: Path | None = None      # the git repository the commits and acknowledgements are in
    acks: tuple[ackmod.Ack, ...] = ()
    results: Path | None = None   # asv's results directory: which machine measured a commit
    user_templates: Path | None = None
    backfill: Backfill | None = None   # what a record before schema 3 or 4 lacks (harness.ci.reportfiles)


def record_files(root: Path | None, results: Path | None) -> dict[str, list[Path]]:
    """Record files per machine: root/<machine>/*.json, and root/*.json (the machine whose asv
    results hold that commit, else the one machine with results, else DEFAULT_HOST)."""
    out: dict[str, list[Path]] = {}
    if root is None or not root.is_dir():
        return out
    for d in sorted(p for p in root.iterdir() if p.is_dir()):
        files = sorted(d.glob("*.json"))
        if files:
            out[d.name] = files
    machines = sorted(p.name for p in results.iterdir() if p.is_dir()) if results and results.is_dir() else []
    for f in sorted(root.glob("*.json")):
        prefix = f.name.split("-", 1)[0][:8]
        having = [m for m in machines if any((results / m).glob(f"{prefix}*-*.json"))] if results else []
        host = having[0] if having else machines[0] if len(machines) == 1 else DEFAULT_HOST
        out.setdefault(host, []).append(f)
    return out


def _load(path: Path) -> Record:
    from harness.ci.reportfiles import load_record

    return load_record(str(path))[0]


def _report_markdown(path: Path, backfill: Backfill | None) -> str:
    """The record's report: the Markdown beside it where there is one, else rendered now."""
    md = path.with_suffix(".md")
    if md.is_file():
        return md.read_text(encoding="utf-8")
    from harness.ci.reportfiles import context_for
    from harness.render.reportcontext import render

    return render(context_for(str(path), backfill=backfill), "record")


_LOCAL_REF = re.compile(r'(?:src|href)="(?!https?:|#|/|data:|mailto:)([^"#?]+)')


def _copy_local_refs(html: str, src_dir: Path, dst_dir: Path) -> str:
    """Files a report links beside itself (its figures) copied beside its page; a link to a
    file that is not there is unlinked, so the page has no broken image or link."""
    def fix(m: re.Match[str]) -> str:
        ref = m.group(1)
        src, dst = (src_dir / ref).resolve(), dst_dir / ref
        if src.is_file() and src_dir.resolve() in src.parents:
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, dst)
            return m.group(0)
        if dst.is_file():   # drawn beside the page (_draw_figures)
            return m.group(0)
        return m.group(0).replace(ref, "#missing-" + re.sub(r"[^A-Za-z0-9._-]", "-", ref))
    return _LOCAL_REF.sub(fix, html)


def _git_range(repo: Path | None, a: str, b: str) -> list[str]:
    if repo is None:
        return [b]
    r = subprocess.run(["git", "rev-list", f"{a}..{b}"], cwd=repo, capture_output=True, text=True)
    return r.stdout.split() if r.returncode == 0 and r.stdout.strip() else [b]


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


class _Span(msgspec.Struct):
    """The commit range of an alert (state.json) or of a step of the last night (changes.json)."""
    last_before: str
    first_after: str


class _Filed(msgspec.Struct):
    alerts: list[_Span] = []


class _Night(msgspec.Struct):
    steps: list[dict[str, Any]] = []


def host_changes(src: Sources, machine: str) -> tuple[list[Change], dict[str, Path]]:
    """The nightly's changes of a machine, acknowledgements applied, and each alert's Markdown."""
    d = src.alerts / machine if src.alerts else None
    if d is None or not d.is_dir():
        return [], {}
    state = _read_json(d / "state.json") or {"alerts": []}
    steps = msgspec.convert(_read_json(d / CHANGES_FILE) or {}, _Night).steps
    files = {p.stem: p for p in d.glob("*.md")}
    spans = [*msgspec.convert(state, _Filed).alerts, *msgspec.convert(steps, list[_Span])]
    pairs = {(x.last_before, x.first_after) for x in spans}
    ranges = {p: _git_range(src.repo, *p) for p in pairs}
    pages_of = {i: f"alerts/{slug(machine)}/{i}.html" for i in files}
    return changes_of(state, steps, list(src.acks), ranges, pages_of), files


def build_site(html_dir: Path, src: Sources, asv_benchmark: str | None = None) -> Path:
    """Write html_dir/harness/ (replacing what an earlier publish wrote there); returns its index."""
    site_dir = html_dir / SITE_DIR
    if site_dir.exists():
        shutil.rmtree(site_dir)
    (site_dir / "hosts").mkdir(parents=True)
    hosts, errors, bodies = [], [], []
    for machine, files in record_files(src.records, src.results).items():
        loaded: list[tuple[Commit, Record]] = []
        for f in files:
            try:
                data = _load(f)
            except UserError as e:
                errors.append(str(e))
                continue
            page = f"records/{slug(machine)}/{f.stem}.html"
            loaded.append((commit_view(data, f.name, page), data))
            bodies.append((machine, f, page))
        changes, alert_md = host_changes(src, machine)
        if loaded:
            hosts.append((host_series(machine, loaded, tuple(changes)), alert_md))
    hosts.sort(key=lambda ha: ha[0].commits[0].when, reverse=True)   # the host measured last first
    site = SiteData(tuple(h for h, _ in hosts), asv_benchmark=asv_benchmark, errors=tuple(errors))
    by_name = {h.name: h for h in site.hosts}
    shown = {c.page for h in site.hosts for c in h.commits}
    for machine, f, page in bodies:
        if page in shown:
            _write_record(site_dir, by_name[machine], f, page, src)
    for host, alert_md in hosts:
        for ch in host.changes:
            if ch.alert_file and ch.alert_id in alert_md:
                body = pages.markdown_html(alert_md[ch.alert_id].read_text(encoding="utf-8"))
                _write(site_dir / ch.alert_file, pages.alert_page(host, ch, body, src.user_templates))
        _write(site_dir / "hosts" / f"{host.slug}.html", pages.host_page(site, host, src.user_templates))
    _write(site_dir / "index.html", pages.index_page(site, src.user_templates))
    return site_dir / "index.html"


def _write_record(site_dir: Path, host: HostView, f: Path, page: str, src: Sources) -> None:
    commit = next(c for c in host.commits if c.page == page)
    try:
        md = _report_markdown(f, src.backfill)
    except UserError as e:
        md = f"The report of this record could not be rendered: {e}"
    out = site_dir / page
    out.parent.mkdir(parents=True, exist_ok=True)
    html = pages.markdown_html(md)
    if any(not (f.parent / ref).is_file() for ref in _LOCAL_REF.findall(html)):
        _draw_figures(f, out.parent, src.backfill)
    body = _copy_local_refs(html, f.parent, out.parent)
    _write(out, pages.record_page(host, commit, body, src.user_templates))


def _draw_figures(f: Path, page_dir: Path, backfill: Backfill | None) -> None:
    """The record's figures drawn beside its page, where its report links figures the record's
    folder lacks (a report written to stdout, or copied without its figure folder)."""
    from harness.ci.reportfiles import report_files, write_figures
    try:
        _, files = report_files(str(f), None, page_dir / f"{f.stem}.md", backfill)
    except UserError:
        return
    write_figures(files)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def link_from_asv(html_dir: Path) -> bool:
    """One link from asv's index (its navigation bar) to the harness's pages; False when asv's
    index is not there or already has it."""
    index = html_dir / "index.html"
    if not index.is_file():
        return False
    text = index.read_text(encoding="utf-8")
    if LINK_MARK in text:
        return False
    item = (f'{LINK_MARK}<li><a id="harness-dashboard-link" href="{SITE_DIR}/index.html">'
            "Harness verdicts</a></li>")
    # In asv's navigation bar, after its Regressions tab; at the top of the page otherwise.
    new, n = re.subn(r'(<li id="nav-li-regressions">.*?</li>)', lambda m: m.group(1) + item, text, count=1)
    if not n:
        new, n = re.subn(r"(<body[^>]*>)", lambda m: m.group(1) + f"<ul>{item}</ul>", text, count=1)
    if not n:
        return False
    index.write_text(new, encoding="utf-8")
    return True


def ms_benchmark(results_dir: Path) -> str | None:
    """asv's name of the ms/token benchmark ("bench_x.Decode.track_ms_per_token")."""
    data = _read_json(results_dir / "benchmarks.json") or {}
    return next((k for k in sorted(data) if k.endswith(".Decode.track_ms_per_token")), None)


def warn(msg: str) -> None:
    print(f"harness: warning: {msg}", file=sys.stderr)


def write_changes(alerts_dir: Path, history: dict[str, Any]) -> None:
    """The night's steps (harness.ci.history.History.to_dict) beside the alert state, for the
    dashboard: acknowledged steps are never alerted, so the state alone does not list them."""
    from harness.collect.files import write_json_atomic

    alerts_dir.mkdir(parents=True, exist_ok=True)
    write_json_atomic(alerts_dir / CHANGES_FILE, history)
