"""What the session commands (run, check, baseline record) share: the invocation, default
paths, executing a plan under the sequential rule, and printing the summary.

The CLI is the composition root: it loads the suite, builds the plan, opens the record and
baselines, and hands the runner an `annotate` hook built from labels and identity, so the
runner itself never reaches downstream. Progress goes to stderr; stdout gets the summary only
(harness.render.termsummary's lines, or with --json the JSON summary alone).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import math
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console

from harness.core.errors import UserError
from harness.core.recordsections import Scaling, Sequential
from harness.core.runs import RecordCore
from harness.core.schema import Record, Run
from harness.render.terminal import RunnerUI


@dataclass
class Invocation:
    """One `harness` invocation: its arguments (the record's "command") and this host,
    collected once (the record and the default paths share it)."""

    argv: list[str]
    _host: dict[str, Any] | None = field(default=None, repr=False)

    @property
    def command(self) -> list[str]:
        return ["harness", *self.argv]

    def host(self) -> dict[str, Any]:
        if self._host is None:
            from harness.collect.host.info import collect_host
            self._host = collect_host()   # the repository under test: asv's, else the cwd's
        return self._host


# --- names and paths -----------------------------------------------------------------

def host_name(host: dict[str, Any]) -> str:
    """The matching host spec's name (hosts/*.json), else "local"."""
    from harness.collect.host.specs import match_spec
    try:
        spec = match_spec(host)
    except UserError:
        return "local"
    return _slug(spec.name) if spec else "local"


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-") or "local"


def default_record_path(inv: Invocation, suite_name: str, kind: str = "") -> Path:
    # Date and time, so a second session on the same day does not collide with the first.
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    suffix = f"-{kind}" if kind else ""
    return Path("records") / f"{stamp}-{_slug(suite_name)}-{host_name(inv.host())}{suffix}.json"


def default_baselines_path(inv: Invocation) -> Path:
    return Path("baselines") / f"{host_name(inv.host())}.json"


# --- session -------------------------------------------------------------------------

def _annotator(store: Any, settings: Any) -> Callable[[Run], Run]:
    from harness.analyze.identity import annotate_identity
    from harness.analyze.labels import annotate_label

    def annotate(run: Run) -> Run:
        return annotate_identity(annotate_label(run), store, settings)
    return annotate


def execute(record: Any, suite: Any, store: Any, quiet: bool = False) -> None:
    """Run the plan; with a budget, keep adding rounds (repetitions) under the sequential rule
    (the session: harness.collect.sampling; its look: each arm judged against classic).

    A resumed session finishes the repetitions its record had planned and adds none. Progress
    goes to stderr (none with quiet)."""
    from harness.analyze import sequential
    from harness.analyze.comparisons import judge_vs_classic, vs_classic
    from harness.analyze.design import Design
    from harness.collect import runner, sampling
    from harness.collect.engines import Engines
    from harness.collect.plan import build_plan
    s = suite.settings
    data: Record = record.data   # the typed record (schema.Record)
    annotate = _annotator(store, data.suite.settings)
    console = Console(stderr=True)

    # The record keeps the repetitions planned so far (the minimum, then each added round), so a
    # resumed session knows what to finish.
    resumed = data.planned_repetitions is not None
    if data.planned_repetitions is None:
        data.planned_repetitions = s.repetitions
    min_reps = data.planned_repetitions
    budget = None if resumed else s.budget_s
    # Without a budget the whole plan is known: the counter says N of all of it from the first
    # run (it once read 3/3, then 4/6, as rounds were handed to the runner one at a time).
    whole = 0 if budget else len(build_plan(suite, min_reps))

    def progress(total: int, done_before: int) -> Any:
        return runner.NullUI() if quiet else RunnerUI(console, max(total, whole), done_before)
    pacer = runner.Pacer.from_runs(record.runs)
    # One set of adapters for the whole session: the models the warm-ups loaded (and what their
    # first runs compiled and cached) serve every round after them.
    engines = Engines()
    compared = len(vs_classic(RecordCore(suite=data.suite)))
    design = Design.for_settings(s, compared)
    bounds = sampling.Settings(min_reps, s.max_repetitions, budget, design.looks, compares=compared > 0)

    def planned() -> list[Any]:
        return build_plan(suite, data.planned_repetitions or min_reps)

    def warm_up() -> None:
        runner.execute(build_plan(suite, 0), suite, record, annotate, engines=engines, ui=progress, pacer=pacer)

    def do_round(i: int) -> None:
        data.planned_repetitions = max(i + 1, data.planned_repetitions or min_reps)
        data.planned_runs = len(planned())
        runner.execute(build_plan(suite, max(min_reps, i + 1) if resumed else i + 1), suite, record,
                       annotate, engines=engines, ui=progress, pacer=pacer)

    def cleanup(interrupted: bool) -> None:
        if interrupted:
            # Interrupted is incomplete even when every planned run landed: a budgeted session
            # had more rounds to judge, and the message says "complete: false".
            record.finish(len(planned()), interrupted=True)
        pacer.close()

    # Resumed: one "round" that finishes every planned repetition.
    rounds = sampling.Settings(1, None, None, design.looks, compared > 0) if resumed else bounds
    try:
        outcome = sampling.sample(rounds, warm_up, do_round,
                                  lambda times, sizes: judge_vs_classic(msgspec.to_builtins(data),
                                                                        design.at_looks(times, sizes)),
                                  sequential.run, cleanup)
    except KeyboardInterrupt:
        plan = planned()
        print(f"harness: interrupted; {len(record.runs)} of {len(plan)} runs kept in {record.path} "
              f"(complete: false); finish with: {follow_up(record.path)}", file=sys.stderr)
        raise SystemExit(130) from None
    if not resumed:
        last = design.at_looks(*outcome.schedule()) if outcome.looks else design   # the look it stopped at
        data.sequential = msgspec.convert(outcome.summary(last.to_dict(), budget, min_repetitions=min_reps,
                                                          max_repetitions=bounds.max_rounds), Sequential)
    if suite.settings.scaling and data.scaling is None:
        scaling = runner.measure_scaling(suite)
        data.scaling = None if scaling is None else msgspec.convert(scaling, Scaling)
    record.finish(len(planned()))


def follow_up(record_path: str | Path) -> str:
    """The command that finishes the session `record_path` keeps, whatever its kind: a resumed
    check reports as a check, a resumed baseline session stores its baselines (cli/run.py)."""
    return f"harness run --resume {shlex.quote(str(record_path))}"


def cannot_write(e: OSError, record_path: Path, kept: int | None, what: str = "record",
                 where: Path | None = None) -> UserError:
    """A write that failed (a full disk, a read-only or failing one) as one line: what the record
    keeps and how to finish it; kept None: the session had not begun, nothing was run."""
    why = e.strerror or str(e)
    if kept is None:
        option = "--baselines" if what.startswith("baselines") else "--record"
        return UserError(f"{where or record_path}: cannot write the {what} ({why}); nothing was run; "
                         f"run it again once the place can be written, or pass another {option}")
    return UserError(f"{where or record_path}: cannot write the {what} ({why}); {kept} runs kept, "
                     f"finish with: {follow_up(record_path)}")


@contextlib.contextmanager
def session_locks(inv: Invocation, record_path: Path, baselines: Path | None = None,
                  kept: int | None = None) -> Iterator[None]:
    """Held for a whole session: the record's lock (its journal too) and, where the session writes
    it, the baselines file's, in that order; a second writer gets one line naming the holder. A
    lock file that cannot be written is one line too (kept: the runs the record has so far)."""
    from harness.collect.lock import acquire
    with contextlib.ExitStack() as held:
        for target, what in ((record_path, "record"), (baselines, "baselines file")):
            if target is None:
                continue
            try:
                held.enter_context(acquire(target, what, inv.command))
            except OSError as e:
                raise cannot_write(e, record_path, kept, what, target) from None
        yield


def _check_new_record(inv: Invocation, record_path: Path) -> None:
    from harness.collect.lock import acquire
    from harness.collect.record import check_new_record
    try:
        check_new_record(record_path)
    except UserError:
        # A session writing it now is said by name (pid, host, command), not only "exists".
        with contextlib.suppress(OSError), acquire(record_path, "record", inv.command):
            pass
        raise


def new_session(inv: Invocation, suite: Any, record_path: Path, baselines: Path, purpose: str,
                then: Callable[[Any], None] | None = None, yes: bool = False, quiet: bool = False,
                *, quick: bool = False, update: bool | None = None) -> Any:
    """Create the record and run the plan, holding the session's locks throughout; `then(record)`
    runs under them too (a baseline session stores its baselines there). purpose, quick, update:
    the record's own fields (schema.Record)."""
    from harness.collect.baselines import BaselineStore
    from harness.collect.files import check_writable
    from harness.collect.host.specs import resolve_host_settings
    from harness.collect.plan import build_plan, check_plan
    from harness.collect.record import Record as RecordFile
    from harness.collect.runner import check_inputs
    writes_baselines = purpose == "baseline"
    # Before the host is read (which loads MLX) and any model: where the outputs go.
    _check_new_record(inv, record_path)
    if writes_baselines:
        check_writable(baselines, "baselines file")
    with session_locks(inv, record_path, baselines if writes_baselines else None):
        suite = resolve_host_settings(suite, inv.host())
        check_plan(suite, yes)   # its size counted, not built: above the bounds only with --yes
        store = BaselineStore.load(baselines)   # a bad baselines file fails before any run
        check_inputs(suite)
        record = RecordFile.create(record_path, suite.to_dict(), inv.host(), inv.command, len(build_plan(suite)),
                               purpose=purpose, quick=quick, update=update, baselines=str(baselines))
        try:
            execute(record, suite, store, quiet)
            if then is not None:
                then(record)
        except OSError as e:   # the journal or the record (a full disk): what landed resumes
            raise cannot_write(e, record_path, len(record.runs)) from None
    return record


def in_process_engines_first(suite: Any) -> None:
    """Before anything loads mlx.core (collect_host does): each in-process engine's process
    preparation (a BLAS preload only takes effect then). Never for a command engine: that is
    another process, whose BLAS this process must not decide (it reports its own)."""
    from harness.core.declare import prepare_process
    prepare_process({suite.engine(a).name: suite.engine(a) for a in suite.arms
                     if a.adapter != "command"}.values())



def finite_float(text: str) -> float:
    """An option's number: inf would budget forever and nan compares false with every bound."""
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return x


def add_budget_args(p: argparse.ArgumentParser) -> None:
    """The options pr-check and compare-commits share: the suite, the budget, the threshold, alpha."""
    # The order is pullrequest.given_suite, then asvtool.configured_suite; compare-commits and bisect
    # fall back to the packaged suite only without asv.conf.json (compare_commits.check_suite_file).
    p.add_argument("--suite", help="suite TOML (default: $HARNESS_ASV_SUITE, else the suite the repository's "
                                   "asv.conf.json names in \"harness_suite\", else suite.toml in its benchmark "
                                   "directory; compare-commits and bisect in a repository without asv.conf.json: "
                                   "the packaged default suite)")
    p.add_argument("--budget-s", type=finite_float, help="time budget in seconds, counted from the end of the "
                                                         "warm-ups (default: the suite's budget_s); the suite's "
                                                         "repetitions become a minimum that always runs, so a busy "
                                                         "host can take longer")
    p.add_argument("--threshold", type=finite_float, help="relative change the check must see (default: the "
                                                   "suite's threshold, 0.10 = 10%%)")
    p.add_argument("--alpha", type=finite_float, help="false-alarm level of the whole check, split over its looks "
                                               "and gated figures (default: the suite's alpha, 0.05)")
    p.add_argument("--baselines", help="arms' own baselines file, for the runs' identity field (optional)")


def identity_session(args: argparse.Namespace, repetitions: int, purpose: str) -> tuple[Any, Path, Path]:
    """The suite, record path and baselines file of a check or baseline session: identity does
    not depend on timing, so no warm-up, no cooldown, no quiet wait and no budget."""
    from msgspec.structs import replace

    from harness.collect.suite import load_suite, with_settings
    inv = args.invocation
    suite = load_suite(args.suite)
    in_process_engines_first(suite)
    suite = with_settings(suite, repetitions=repetitions, warmups=0, cooldown_s=0.0, cooldown_ratio=0.0,
                          cooldown_cap_s=None, cooldown_source=purpose, budget_s=None,
                          quiet=replace(suite.settings.quiet, enabled=False))
    record_path = Path(args.record) if args.record else default_record_path(inv, suite.name, purpose)
    baselines = Path(args.baselines) if args.baselines else default_baselines_path(inv)
    return suite, record_path, baselines
