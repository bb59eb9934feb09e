"""`harness pr-check BASE HEAD`: the two commits measured run by run, judged on paired ratios,
stored in asv, and rendered as Markdown for a pull-request comment.

The measuring is harness.ci.twocommits: one persistent worker per commit, runs alternating ABBA,
a time budget with the sequential stopping rule, each figure judged on the per-pair ratios
(harness.analyze.paired). Then each side's record is stored in asv's results for its commit
(`asv run --python=same --set-commit-hash`, the benchmarks reading the record instead of
running a session), so the dashboard and `asv compare` see every sample; asv's own table is
shown beside the paired verdict, not instead of it.

Exit status (the workflow maps it): 0 pass; 1 fail (a gated figure worse, a run failing at
head only, an output no longer byte-identical to base's); 3 inconclusive (this host could not
see the threshold on some gated figure: a neutral check, not a green one); 2 a problem to fix
(one line on stderr).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import msgspec

from harness.analyze.summary import check_waiting_lines
from harness.ci.ackfile import acks_for_check, acks_path
from harness.ci.asvtool import (
    AsvConfig,
    CompareRow,
    configured_suite,
    load_config,
    load_figures,
    parse_compare,
    run_asv,
)
from harness.ci.machine import MachineEntry
from harness.ci.twocommits import Comparison, compare_commits
from harness.ci.twocommits_summary import summary_json
from harness.collect.files import check_output, check_writable, marked, write_output
from harness.core.errors import UserError
from harness.core.schema import Record
from harness.render import prcomment
from harness.render.prinput import CheckMeta, Links

MARKER = prcomment.MARKER
PR_CHECK_KIND = "harness.pr-check"


def ensure_machine(machine_file: Path, machine: str | None) -> MachineEntry:
    """The machine entry asv will use; registers this host when the file has none."""
    from harness.ci.machine import register, resolve_machine

    entry = resolve_machine(machine_file, machine)
    if entry is None:
        entry, warnings, path = register(None, machine, machine_file)
        for w in warnings:
            print(f"harness: warning: {w}", file=sys.stderr)
        print(f"harness: registered this host as asv machine '{entry.machine}' in {path}", file=sys.stderr)
    return entry


def given_suite(given: str | None) -> Path | None:
    """The suite a check was given: --suite, else $HARNESS_ASV_SUITE; None when neither is set.
    One line when the file is not there (naming the variable when it came from there)."""
    if given:
        p = Path(given)
        if not p.is_file():
            raise UserError(f"{p}: suite file not found (pass --suite)")
        return p
    env = os.getenv("HARNESS_ASV_SUITE")
    if not env:
        return None
    p = Path(env)
    if not p.is_file():
        raise UserError(f"{p}: suite file not found (named by $HARNESS_ASV_SUITE; fix or unset it, "
                        "or pass --suite)")
    return p


def suite_file(conf: AsvConfig, given: str | None) -> Path:
    """The suite pr-check measures: --suite, else $HARNESS_ASV_SUITE, else asv.conf.json's
    "harness_suite" (the one the asv benchmarks run)."""
    return given_suite(given) or configured_suite(conf)


def check_outputs(output: str | None, json_out: str | None) -> None:
    """--output (Markdown) and --json, checked before anything is measured: writable, not a
    directory, not a record or other harness file, not a file pr-check did not write (an earlier
    --output, by its marker, or --json, by its kind, may be replaced), and not the same file."""
    if output:
        check_output(Path(output), "Markdown (--output)", writer="pr-check")
    if json_out:
        check_output(Path(json_out), "JSON (--json)", own_kind=PR_CHECK_KIND, writer="pr-check")
    if output and json_out and Path(output).resolve() == Path(json_out).resolve():
        raise UserError(f"{output}: --output and --json name the same file; pass two paths")


# --- asv: store both sides, read its comparison ------------------------------------------

def store_in_asv(conf: AsvConfig, machine_file: Path, machine: str, sha: str, record: str,
                 echo: bool = False) -> None:
    """asv's results for `sha` from a finished record (no second measurement)."""
    # Replaying a record starts no engine, so asv may fork each benchmark from one process that
    # imported them once, whatever the project's asv.conf.json says (an older one may say
    # "spawn": an interpreter per benchmark, 9 s against 2 s here, per side).
    launch = ["--launch-method=forkserver"] if hasattr(os, "fork") else []
    res = run_asv(["run", "--python=same", "--set-commit-hash", sha, "--machine", machine,
                   "--record-samples", "--show-stderr", *launch], conf, machine_file,
                  env={"HARNESS_ASV_RECORD": str(Path(record).resolve())}, echo=echo)
    stored = [f for f in load_figures(conf, machine, sha).values()
              if f.benchmark.endswith("track_ms_per_token") and f.samples]
    if not stored:
        tail = " | ".join(res.output.strip().splitlines()[-3:])
        raise UserError(f"asv stored no ms/token samples for {sha[:12]} (exit {res.returncode}): {tail}")


def asv_rows(conf: AsvConfig, machine_file: Path, machine: str, base: str, head: str,
             factor: float) -> tuple[list[CompareRow], str]:
    # --python=same: the environment pr-check stores both sides in; asv compare otherwise lists
    # each benchmark again for every other environment with results of either commit (asv run's
    # virtualenv), 110 lines of one comment.
    comp = run_asv(["compare", "--python=same", "--factor", f"{factor:.4g}", "--machine", machine, base, head],
                   conf, machine_file, echo=False)
    return measured_rows(parse_compare(comp.output)), comp.output


def measured_rows(rows: list[CompareRow]) -> list[CompareRow]:
    """Each benchmark once: where asv still printed several environments, the one pr-check
    measured in (asv's "existing" environment of this Python, `run --python=same`)."""
    envs = {r.env for r in rows if r.env}
    keep = next((e for e in sorted(envs) if "/existing" in e), None) if len(envs) > 1 else None
    return [r for r in rows if keep is None or r.env in (keep, None)]


def render_markdown(c: Comparison, meta: dict[str, Any], rows: list[CompareRow] | None = None,
                    asv_table: str = "", links: Links | None = None, asv_factor: float | None = None) -> str:
    """The PR comment (harness.render.prcomment owns every word of it)."""
    return prcomment.comment(c, CheckMeta.of(meta), rows or [], asv_table, links, asv_factor)


# --- links: where a reader goes next, set once in asv.conf.json or per check -------------

REPORT_URL_KEY = "harness_report_url"
DASHBOARD_URL_KEY = "harness_dashboard_url"
URL_FIELDS = ("base", "head", "machine")    # what a configured link may name: {head} etc.


def link(given: str | None, conf: AsvConfig, key: str, option: str) -> str | None:
    """The option's URL, else asv.conf.json's `key`; checked before anything is measured, so a
    misspelt {field} says so in one line instead of after the check."""
    url = given if given is not None else conf.data.get(key)
    where = option if given is not None else f"{conf.path}: key '{key}'"
    if url is None or url == "":
        return None
    if not isinstance(url, str):
        raise UserError(f"{where} must be a URL string, got {url!r}")
    try:
        url.format(**{k: k for k in URL_FIELDS})
    except (KeyError, IndexError, ValueError) as e:
        raise UserError(f"{where}: {url!r} names {e}; a link may name only "
                        + ", ".join("{" + k + "}" for k in URL_FIELDS)) from None
    return url


def check_links(conf: AsvConfig, report_url: str | None, dashboard_url: str | None) -> Links:
    """The links as configured, their {base}/{head}/{machine} not yet filled in."""
    return Links(link(report_url, conf, REPORT_URL_KEY, "--report-url"),
                 link(dashboard_url, conf, DASHBOARD_URL_KEY, "--dashboard-url"))


def filled(links: Links, base: str, head: str, machine: str) -> Links:
    """Each link with the check's full commits and machine in place of {base}, {head}, {machine}."""
    def fill(u: str | None) -> str | None:
        return None if u is None else u.format(base=base, head=head, machine=machine)
    return Links(fill(links.report_url), fill(links.dashboard_url))


@dataclass(frozen=True)
class SideLoad:
    """One side's measured runs: how many, and how many failed, were contended, or timed out
    waiting for a quiet host (the comment's "Load and time")."""
    runs: int
    failed: int
    contended: int
    quiet_wait_timeouts: int


def side_records(paths: Mapping[str, str]) -> dict[str, Record]:
    """Each side's record of the check just made (whole, this version: the check wrote it last),
    read typed."""
    out = {}
    for side, p in paths.items():
        try:
            out[side] = msgspec.json.decode(Path(p).read_bytes(), type=Record)
        except (OSError, msgspec.DecodeError) as e:
            raise UserError(f"{p}: cannot read the check's {side} record ({e}); was it moved or "
                            "edited while the check ran?") from None
    return out


def load_notes(records: Mapping[str, Record]) -> dict[str, SideLoad]:
    """Per side: measured runs, failed, contended, quiet-wait timeouts."""
    out = {}
    for side, rec in records.items():
        runs = [r for r in rec.runs if not r.warmup]
        out[side] = SideLoad(runs=len(runs), failed=sum(not r.is_ok for r in runs),
                             contended=sum("contended" in r.marks for r in runs),
                             quiet_wait_timeouts=sum("quiet_wait_timeout" in r.marks for r in runs))
    return out


# --- the command -------------------------------------------------------------------------

def load_check_suite(path: Path, budget_s: float | None, threshold: float | None,
                     alpha: float | None = None) -> Any:
    from harness.collect.host.info import collect_host
    from harness.collect.host.specs import resolve_host_settings
    from harness.collect.suite import load_suite, with_settings

    suite = resolve_host_settings(load_suite(path), collect_host())
    if budget_s is not None and budget_s <= 0:
        raise UserError(f"--budget-s must be positive, got {budget_s:g}")
    if threshold is not None and not 0.0 < threshold < 1.0:
        raise UserError(f"--threshold must be between 0 and 1 (0.10 means 10%), got {threshold:g}")
    if alpha is not None and not 0.0 < alpha <= 0.5:
        raise UserError(f"--alpha must be in (0, 0.5] (0.05 means a 5% false-alarm level), got {alpha:g}")
    s = suite.settings
    return with_settings(suite, budget_s=s.budget_s if budget_s is None else budget_s,
                         threshold=s.threshold if threshold is None else threshold,
                         alpha=s.alpha if alpha is None else alpha)


def pr_check(base: str, head: str, config: str | None = None, machine: str | None = None,
             machine_file: str | None = None, suite: str | None = None, budget_s: float | None = None,
             threshold: float | None = None, baselines: str | None = None, output: str | None = None,
             json_out: str | None = None, asv: bool = True, echo: bool = True, alpha: float | None = None,
             report_url: str | None = None, dashboard_url: str | None = None) -> int:
    from rich.console import Console

    from harness.ci.machine import default_machine_file
    from harness.collect.baselines import BaselineStore

    check_outputs(output, json_out)
    conf = load_config(config)
    links = check_links(conf, report_url, dashboard_url)
    mf = Path(machine_file).expanduser() if machine_file else default_machine_file()
    the_suite = load_check_suite(suite_file(conf, suite), budget_s, threshold, alpha)
    store = BaselineStore.load(Path(baselines)) if baselines else None
    made = ensure_machine(mf, machine) if asv else None
    mname = made.machine if made else machine or "local"
    entry = made.to_dict() if made else {"machine": mname}
    if asv:   # where asv will store both sides, checked before either is measured
        check_writable(conf.results_dir / mname / "results.json", "asv results")
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = conf.root / ".asv" / "pr-check" / f"{base.replace('/', '_')[:20]}-{head.replace('/', '_')[:20]}-{stamp}"
    console = Console(stderr=True) if echo else None
    cmp = compare_commits(conf.root, base, head, the_suite, work, store=store, console=console,
                          command=["harness", "pr-check", base, head])
    acks, covered = acks_for_check(conf.root, acks_path(conf), cmp.base, cmp.head)
    cmp.apply_acks(acks, covered)
    rows: list[CompareRow] = []
    table = ""
    if asv:
        for side, sha in (("base", cmp.base), ("head", cmp.head)):
            store_in_asv(conf, mf, mname, sha, cmp.records[side])
        rows, table = asv_rows(conf, mf, mname, cmp.base, cmp.head, 1.0 + the_suite.settings.threshold)
    records = side_records(cmp.records)
    args = [base, head] + (["--machine", machine] if machine else []) + (["--suite", suite] if suite else [])
    args += [f"--budget-s {budget_s:g}"] if budget_s is not None else []
    args += [f"--threshold {threshold:g}"] if threshold is not None else []
    args += [f"--alpha {alpha:g}"] if alpha is not None else []
    args += [f"--report-url '{report_url}'"] if report_url is not None else []
    args += [f"--dashboard-url '{dashboard_url}'"] if dashboard_url is not None else []
    meta = {"machine": mname, "host": entry, "command": "harness pr-check " + " ".join(args),
            "duration_s": cmp.duration_s,
            "load": {side: asdict(n) for side, n in load_notes(records).items()},
            "waiting": check_waiting_lines(records, cmp.duration_s)}
    factor = 1.0 + the_suite.settings.threshold
    md = render_markdown(cmp, meta, rows, table, filled(links, cmp.base, cmp.head, mname), factor)
    print(md, end="", flush=True)
    if output:
        write_output(Path(output), marked(md, "pr-check"), "Markdown (--output)")
    summary = {**summary_json(cmp), "kind": PR_CHECK_KIND, "machine": mname,
               "asv": [r.__dict__ for r in rows]}
    if json_out:
        write_output(Path(json_out), json.dumps(summary, indent=1, sort_keys=True, default=str) + "\n",
                     "JSON (--json)")
    print(json.dumps({k: summary[k] for k in ("kind", "base", "head", "machine", "exit_status", "headline",
                                               "duration_s", "rounds", "stopped")}, sort_keys=True), flush=True)
    return cmp.exit_status
