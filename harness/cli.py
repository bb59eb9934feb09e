"""`harness run | check | baseline record | project`, plus extension points for later commands.

The CLI is the composition root: it loads the suite, builds the plan, opens the record and
baselines, and hands the runner an `annotate` hook built from labels and identity, so the
runner itself never reaches downstream. It prints the summary table, then one JSON line.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import importlib
import json
import re
import signal
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from rich.console import Console
from rich.table import Table

from harness.errors import UserError

# Commands other modules add: each module exposes `add_cli(subparsers)`, which registers its
# parser with set_defaults(func=callable(args) -> int). Absent modules get a placeholder.
EXTENSIONS: dict[str, str] = {
    "report": "harness.report",
    "host": "harness.hosts",
    "pr-check": "harness.prcheck",
    "compare-commits": "harness.commits",
    "nightly": "harness.nightly",
    "dashboard": "harness.dashboard",
    "init": "harness.init",
    "schema": "harness.schema",
}


# --- names and paths -----------------------------------------------------------------

def host_name(host: dict[str, Any] | None = None) -> str:
    """The matching host profile's name (hosts/*.json), else "local"."""
    try:
        from harness.hosts import match_profile
        profile = match_profile(host if host is not None else _host())
    except (ImportError, UserError):
        return "local"
    return _slug(profile["name"]) if profile else "local"


_HOST_CACHE: dict[str, Any] = {}
_ARGV: list[str] = []   # this invocation's arguments, for the record's "command"


def _host() -> dict[str, Any]:
    """collect_host() once per process: the record and the default paths share it."""
    if "host" not in _HOST_CACHE:
        from harness.hostinfo import collect_host
        _HOST_CACHE["host"] = collect_host()   # the repository under test: asv's, else the cwd's
    return _HOST_CACHE["host"]


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-") or "local"


def default_record_path(suite_name: str, kind: str = "") -> Path:
    # Date and time, so a second session on the same day does not collide with the first.
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    suffix = f"-{kind}" if kind else ""
    return Path("records") / f"{stamp}-{_slug(suite_name)}-{host_name()}{suffix}.json"


def default_baselines_path() -> Path:
    return Path("baselines") / f"{host_name()}.json"


# --- session -------------------------------------------------------------------------

def _console_out() -> Console:
    c = Console()
    return c if c.is_terminal else Console(width=200, soft_wrap=False)


def _annotator(store: Any, settings: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    from harness.identity import annotate_identity
    from harness.labels import annotate_label

    def annotate(run: dict[str, Any]) -> dict[str, Any]:
        return annotate_identity(annotate_label(run), store, settings)
    return annotate


def _execute(record: Any, suite: Any, store: Any) -> None:
    """Run the plan; with a budget, keep adding rounds (repetitions) under the sequential rule.

    A resumed session finishes the repetitions its record had planned and adds none."""
    from harness import runner, sequential
    from harness.comparisons import judge_vs_classic, vs_classic
    from harness.paired import Design
    from harness.plan import build_plan
    s = suite.settings
    annotate = _annotator(store, record.data["suite"]["settings"])
    # The record keeps the repetitions planned so far (the minimum, then each added round), so a
    # resumed session knows what to finish.
    resumed = "planned_repetitions" in record.data
    record.data.setdefault("planned_repetitions", s.repetitions)
    min_reps = int(record.data["planned_repetitions"])
    budget = None if resumed else s.budget_s
    max_reps = max(min_reps, s.max_repetitions or (10_000 if budget else min_reps))
    pacer = runner.Pacer.from_runs(record.runs)
    design = Design.for_settings(s, len(vs_classic({"suite": record.data["suite"], "runs": []})))

    def planned() -> list[Any]:
        return build_plan(suite, int(record.data["planned_repetitions"]))

    def do_round(i: int) -> None:
        record.data["planned_repetitions"] = max(i + 1, int(record.data["planned_repetitions"]))
        record.data["planned_runs"] = len(planned())
        runner.execute(build_plan(suite, max(min_reps, i + 1) if resumed else i + 1), suite, record,
                       annotate, pacer=pacer)

    try:
        # The warm-ups first: the budget is for measuring, not for loading and compiling.
        runner.execute(build_plan(suite, 0), suite, record, annotate, pacer=pacer)
        # Resumed: one "round" that finishes every planned repetition.
        outcome = sequential.run(1 if resumed else min_reps, 1 if resumed else max_reps, budget,
                                 design.looks, do_round, lambda: judge_vs_classic(record.data, design))
    except KeyboardInterrupt:
        plan = planned()
        record.finish(len(plan))
        n = len(record.runs)
        print(f"harness: interrupted; {n} of {len(plan)} runs kept in {record.path} (complete: false); "
              f"finish with: harness run --resume {record.path}", file=sys.stderr)
        raise SystemExit(130) from None
    if not resumed:
        record.data["sequential"] = {"design": design.to_dict(), "budget_s": budget,
                                     "min_repetitions": min_reps, "max_repetitions": max_reps,
                                     **outcome.to_dict()}
    if suite.settings.scaling and "scaling" not in record.data:
        record.data["scaling"] = runner.measure_scaling(suite)
    record.finish(len(planned()))


def resolve_host_settings(suite: Any) -> Any:
    """cooldown_s = "host" takes the matching host profile's cooldown rule: its floor_s as
    cooldown_s, its ratio and cap_s as cooldown_ratio and cooldown_cap_s."""
    from harness.suite import Settings, with_settings
    if suite.settings.cooldown_source != "host":
        return suite
    try:
        from harness.hosts import cooldown_rule, describe_cooldown, match_profile
        profile = match_profile(_host())
    except ImportError:
        profile = None
    if profile is None:
        base = Settings()
        return with_settings(suite, cooldown_s=base.cooldown_s, cooldown_ratio=base.cooldown_ratio,
                             cooldown_cap_s=base.cooldown_cap_s,
                             cooldown_source=f"host: no profile matched, default {base.cooldown_s:g} s")
    rule = cooldown_rule(profile)
    return with_settings(suite, cooldown_s=float(rule["floor_s"]), cooldown_ratio=float(rule["ratio"]),
                         cooldown_cap_s=None if rule["cap_s"] is None else float(rule["cap_s"]),
                         cooldown_source=f"host profile {profile['name']} ({describe_cooldown(rule)})")


def _new_session(suite: Any, record_path: Path, baselines: Path, extra: dict[str, Any]) -> Any:
    from harness.identity import BaselineStore
    from harness.plan import build_plan
    from harness.record import Record
    suite = resolve_host_settings(suite)
    store = BaselineStore.load(baselines)   # a bad baselines file fails before any run
    record = Record.create(record_path, suite.to_dict(), _host(),
                           ["harness", *_ARGV], len(build_plan(suite)),
                           extra={**extra, "baselines": str(baselines)})
    _execute(record, suite, store)
    return record


def _print_summary(record: Any, title: str) -> list[Any]:
    from harness.summary import duty_line, machine_summary, render_table, sequential_lines, summarize
    rows = summarize(record.data)
    out = _console_out()
    out.print(render_table(rows, title=title))
    for line in [duty_line(record.data), *sequential_lines(record.data)]:
        if line:
            out.print(line, highlight=False, soft_wrap=True)
    print(json.dumps(machine_summary(record.data, rows, str(record.path)), sort_keys=True), flush=True)
    return rows


# --- commands ------------------------------------------------------------------------

def cmd_run(args: argparse.Namespace) -> int:
    from harness.identity import BaselineStore
    from harness.record import Record
    from harness.suite import load_suite, quick, suite_from_record
    if args.resume:
        if args.suite or args.quick or args.record:
            raise UserError("--resume takes its suite, settings and path from the record; "
                            "drop SUITE, --quick and --record")
        record = Record.load(args.resume)
        suite = suite_from_record(record.data["suite"], str(record.path))
        in_process_engines_first(suite)
        baselines = Path(args.baselines or record.data.get("baselines") or default_baselines_path())
        store = BaselineStore.load(baselines)
        if not record.data.get("complete"):
            record.note_resume(["harness", *_ARGV], _host())
            _execute(record, suite, store)
    else:
        suite = load_suite(args.suite)
        in_process_engines_first(suite)
        if args.quick:
            suite = quick(suite)
        record_path = Path(args.record) if args.record else default_record_path(suite.name)
        baselines = Path(args.baselines) if args.baselines else default_baselines_path()
        record = _new_session(suite, record_path, baselines, {"purpose": "run", "quick": bool(args.quick)})
    _print_summary(record, f"{suite.name}: {record.path}")
    bad = [r for r in record.runs if r["status"] == "failed" or (r.get("identity") or {}).get("status") == "differs"]
    return 1 if bad else 0


def cmd_check(args: argparse.Namespace) -> int:
    """One run per arm and prompt, compared with each arm's own baseline."""
    from dataclasses import replace
    from harness.identity import describe
    from harness.suite import load_suite, with_settings
    suite = load_suite(args.suite)
    in_process_engines_first(suite)
    # Identity does not depend on timing: no warm-up, no cooldown, no quiet gate.
    suite = with_settings(suite, repetitions=1, warmups=0, cooldown_s=0.0, cooldown_ratio=0.0, cooldown_cap_s=None,
                          cooldown_source="check", budget_s=None,
                          quiet=replace(suite.settings.quiet, enabled=False))
    record_path = Path(args.record) if args.record else default_record_path(suite.name, "check")
    baselines = Path(args.baselines) if args.baselines else default_baselines_path()
    record = _new_session(suite, record_path, baselines, {"purpose": "check", "quick": False})
    out = _console_out()
    t = Table(title=f"identity against own baselines ({baselines})", title_justify="left")
    for col in ("arm", "prompt", "identity", "label"):
        t.add_column(col, overflow="fold")
    verdicts = []
    for r in record.runs:
        ident = r.get("identity") or {}
        verdicts.append(ident.get("status"))
        t.add_row(r["arm"], r["prompt"], describe(ident) if r["status"] == "ok" else f"failed: {r['error']}",
                  r.get("label") or "-")
    out.print(t)
    _print_summary(record, f"{suite.name}: {record.path}")
    if "no_baseline" in verdicts:
        print(f"harness: some arms have no baseline in {baselines}; record them with "
              f"`harness baseline record {args.suite}`", file=sys.stderr)
    ok = all(v == "identical" for v in verdicts)
    return 0 if ok else 1


def cmd_baseline_record(args: argparse.Namespace) -> int:
    """Run each arm twice per prompt and store the output where both runs agree."""
    from dataclasses import replace
    from harness.identity import BaselineStore, record_baselines
    from harness.suite import load_suite, with_settings
    suite = load_suite(args.suite)
    in_process_engines_first(suite)
    suite = with_settings(suite, repetitions=2, warmups=0, cooldown_s=0.0, cooldown_ratio=0.0, cooldown_cap_s=None,
                          cooldown_source="baseline", budget_s=None,
                          quiet=replace(suite.settings.quiet, enabled=False))
    baselines = Path(args.baselines) if args.baselines else default_baselines_path()
    record_path = Path(args.record) if args.record else default_record_path(suite.name, "baseline")
    record = _new_session(suite, record_path, baselines, {"purpose": "baseline", "quick": False})
    store = BaselineStore.load(baselines)   # re-read: the file may have changed meanwhile
    outcomes = record_baselines(record.data, store, update=args.update)
    if any(o.status in ("stored", "updated") for o in outcomes):
        store.save()
    out = _console_out()
    t = Table(title=f"baselines ({baselines})", title_justify="left")
    for col in ("key", "outcome", "detail"):
        t.add_column(col, overflow="fold")
    for o in outcomes:
        t.add_row(o.key, o.status.upper() if o.status == "inconclusive" else o.status, o.detail)
    out.print(t)
    print(json.dumps({"kind": "harness.baselines.outcome", "baselines": str(baselines),
                      "record": str(record.path),
                      "outcomes": [{"key": o.key, "status": o.status, "detail": o.detail} for o in outcomes]},
                     sort_keys=True), flush=True)
    return 0 if all(o.status in ("stored", "updated", "unchanged") for o in outcomes) else 1


def cmd_project(args: argparse.Namespace) -> int:
    try:
        costmodel = importlib.import_module("harness.costmodel")
    except ImportError as e:
        raise UserError(f"'harness project' needs harness.costmodel ({e})") from None
    fn = getattr(costmodel, "project_cli", None)
    if fn is None:
        raise UserError("'harness project' needs harness.costmodel.project_cli, which this checkout lacks")
    return int(fn(list(args.rest)) or 0)


# --- parser --------------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="harness", description="Benchmark harness for MLX speculative decoding")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    r = sub.add_parser("run", help="run a suite (the default suite when none is given)",
                       epilog="exit status: 0 all runs ok; 1 a run failed or an output differs from its "
                              "own baseline; 2 a problem to fix (one line on stderr); 130 interrupted "
                              "(the record keeps every finished run: resume it with --resume)")
    r.add_argument("suite", nargs="?", help="suite TOML (default: harness/suites/default.toml)")
    r.add_argument("--record", help="record path (default: records/<date-time>-<suite>-<host>.json)")
    r.add_argument("--resume", metavar="RECORD", help="finish the missing runs of an incomplete record")
    r.add_argument("--quick", action="store_true",
                   help="smoke test: 2 repetitions, no warm-up, no cooldown, no quiet gate, <=32 tokens")
    r.add_argument("--baselines", help="baselines file (default: baselines/<host>.json)")
    r.set_defaults(func=cmd_run)

    c = sub.add_parser("check", help="compare each arm's output with its own baseline",
                       epilog="exit status: 0 every output identical to its baseline; 1 a difference, "
                              "a failed run, or an arm without a baseline; 2 a problem to fix")
    c.add_argument("suite")
    c.add_argument("--baselines", help="baselines file (default: baselines/<host>.json)")
    c.add_argument("--record", help="record path for the check session")
    c.set_defaults(func=cmd_check)

    b = sub.add_parser("baseline", help="record arms' outputs as their own baselines")
    bsub = b.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    br = bsub.add_parser("record", help="run each arm twice and store outputs where both agree",
                         epilog="exit status: 0 every baseline stored, updated or unchanged; 1 an "
                                "INCONCLUSIVE key (the two runs disagree, or failed) or an existing, "
                                "different baseline kept because --update was not given")
    br.add_argument("suite")
    br.add_argument("--update", action="store_true", help="replace differing baselines (old ones kept in history)")
    br.add_argument("--baselines", help="baselines file (default: baselines/<host>.json)")
    br.add_argument("--record", help="record path for the baseline session")
    br.set_defaults(func=cmd_baseline_record)

    pr = sub.add_parser("project", help="cost-model projections (harness.costmodel)", add_help=False)
    pr.add_argument("rest", nargs=argparse.REMAINDER)
    pr.set_defaults(func=cmd_project)

    for name, module in EXTENSIONS.items():
        _add_extension(sub, name, module)
    return p


def _add_extension(sub: Any, name: str, module: str) -> None:
    try:
        mod = importlib.import_module(module)
        hook = getattr(mod, "add_cli", None)
    except ImportError:
        hook = None
    if callable(hook):
        hook(sub)
        return

    def unavailable(args: argparse.Namespace) -> int:
        raise UserError(f"'harness {name}' is not available in this checkout ({module}.add_cli is missing)")
    ep = sub.add_parser(name, help=f"(not available yet: {module})", add_help=False)
    ep.add_argument("rest", nargs=argparse.REMAINDER)
    ep.set_defaults(func=unavailable)


def _sigterm(signum: int, frame: Any) -> None:
    # A kill should end like Ctrl-C: the command child is killed and the record says so.
    raise KeyboardInterrupt


def in_process_engines_first(suite: Any) -> None:
    """Before anything loads mlx.core (collect_host does): each in-process engine's process
    preparation (a BLAS preload only takes effect then). Never for a command engine: that is
    another process, whose BLAS this process must not decide (it reports its own)."""
    from harness.declare import prepare_process
    prepare_process({suite.engine(a).name: suite.engine(a) for a in suite.arms
                     if a.adapter != "command"}.values())


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _ARGV[:] = argv
    parser = build_parser()
    if argv and argv[0] == "project":
        # Everything after "project", options included, belongs to the cost model's own parser.
        args = argparse.Namespace(func=cmd_project, rest=argv[1:])
    else:
        args = parser.parse_args(argv)
    if threading_is_main():
        signal.signal(signal.SIGTERM, _sigterm)
    try:
        return int(args.func(args) or 0)
    except UserError as e:
        print(f"harness: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("harness: interrupted", file=sys.stderr)
        return 130


def threading_is_main() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


if __name__ == "__main__":
    raise SystemExit(main())
