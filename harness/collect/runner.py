"""Executes a plan: cooldown with the quiet wait, thermal check, contention watch, adapter, record.

Before a measured run the runner cools down for clamp(cooldown_ratio x the previous run's
wall_s, cooldown_s, cooldown_cap_s) while the quiet wait samples foreign CPU (and the GPU,
where the host reports it: host/gpuload.py): on a quiet host
the run starts when the cooldown ends; after a busy sample it waits on until the host has been
quiet for settle_s, at most timeout_s (both sized to the arm's previous run where the suite
leaves them unset: host/quiet.py, wait_limits). Where thermal state is readable it keeps cooling
until it reads nominal (NVIDIA clocks, macOS thermal pressure), at most thermal_limit_s.
During the run the contention watch samples about 20 times, paced from the previous run of the
same arm and densely from the run's start (host/quiet.py, watch_interval), in a process of its
own (host/watcher.py) so that an in-process engine's GIL cannot starve it. A `Pacer` holds that
waiting state, so several drivers can share it.

Each run is wrapped in load snapshots (before/after), the quiet wait's verdict, the
contention watch's samples, a thermal reading and, where the host reports one, the GPU read
while our engine is idle just before and after it, then appended to the record at once.
Labels and identity are analyses, so the runner does not import them: the caller passes an
`annotate` function that adds them to each run before it is recorded.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgspec

from harness.collect.engines import EngineFailure, Engines, RunRequest, RunsEngines
from harness.collect.host import gpuload as host_gpu
from harness.collect.host import load as host_load
from harness.collect.host import quiet as host_quiet
from harness.collect.host import thermal as host_thermal
from harness.collect.host import watcher as host_watcher
from harness.collect.plan import PlannedRun
from harness.collect.record import Record, now_iso
from harness.collect.suite import Suite
from harness.core import interrupt, schema
from harness.core.errors import UserError
from harness.core.hostinfo import ContentionResult, QuietWaitResult, RunLoad, ThermalState, ThermalWait
from harness.core.results import result_problem
from harness.core.schema import Run, RunDiagnostics

UIFactory = Callable[[int, int], Any]   # (total runs, done before) -> a context-managed UI
Annotate = Callable[[Run], Run]
WATCH_MIN_SAMPLES = 10          # fewer samples than this: the run is marked watch_undersampled
FIRST_RUN_PREDICTED_S = 0.01    # an arm's first run: no previous run to predict its length from
THERMAL_WAIT_MAX_S = 120.0


def cooldown_for(settings: Any, prev_wall_s: float | None) -> float:
    """clamp(cooldown_ratio x the previous run's wall_s, cooldown_s, cooldown_cap_s).

    No previous run: the floor. Settings from old records lack the ratio and cap (0, None).
    """
    floor = float(getattr(settings, "cooldown_s", 0.0) or 0.0)
    ratio = float(getattr(settings, "cooldown_ratio", 0.0) or 0.0)
    cap = getattr(settings, "cooldown_cap_s", None)
    x = max(floor, ratio * float(prev_wall_s or 0.0))
    return min(x, float(cap)) if cap is not None else x


def thermal_limit_s(settings: Any) -> float:
    """How long the thermal wait may keep cooling: the cooldown cap, 120 s at most."""
    cap = getattr(settings, "cooldown_cap_s", None)
    return THERMAL_WAIT_MAX_S if cap is None else min(float(cap), THERMAL_WAIT_MAX_S)


@dataclass
class Pacer:
    """The waiting state shared by every run one driver (or several, alternately) makes.

    last_wall_s: the previous run's wall time, any arm, warm-ups and failures included (it
    heated the machine all the same): the cooldown rule's input. arm_wall_s: the previous run
    of each arm: the watch's prediction. sampler: the quiet wait's foreign-CPU sampler (a thread
    watch shares it, so each reading can look back into the previous ones). watcher: the
    watch's own process (host.watcher.Watcher), started on first use; close() stops it.
    """
    last_wall_s: float | None = None
    arm_wall_s: dict[str, float] = field(default_factory=dict)
    sampler: Any = None
    watcher: Any = None

    @classmethod
    def from_runs(cls, runs: list[Run]) -> Pacer:
        """A pacer that continues after these runs (a resumed record's, in run order)."""
        p = cls()
        for r in runs:
            p.note(r)
        return p

    def note(self, run: Run) -> None:
        if run.wall_s is not None:
            self.last_wall_s = run.wall_s
            self.arm_wall_s[run.arm or ""] = run.wall_s

    def cooldown_s(self, settings: Any) -> float:
        return cooldown_for(settings, self.last_wall_s)

    def predicted_wall_s(self, arm: str) -> float:
        return self.arm_wall_s.get(arm, FIRST_RUN_PREDICTED_S)

    def expected_wall_s(self, arm: str) -> float | None:
        """The quiet wait's sizing input: the arm's previous run, else any arm's; None first."""
        return self.arm_wall_s.get(arm, self.last_wall_s)

    def foreign_sampler(self) -> Any:
        if self.sampler is None:
            self.sampler = host_load.ForeignCpuSampler()
            self.sampler.prime()
        return self.sampler

    def contention_watch(self, threshold_pct: float, interval_s: float, predicted_s: float) -> Any:
        """A context manager that watches one run: in the watch's own process (started on first
        use; host/watcher.py says why), else in a thread; its result() says which."""
        if self.watcher is None:
            self.watcher = host_watcher.Watcher(self.foreign_sampler)
        return self.watcher.watch(threshold_pct, interval_s, predicted_s)

    def close(self) -> None:
        """Stop the watch's process, if one was started."""
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None


class NullUI:
    """A UI that shows nothing: for drivers that call run_one themselves, and the default."""

    @classmethod
    def factory(cls, total: int, done_before: int) -> NullUI:
        return cls()

    def __enter__(self) -> NullUI:
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def status(self, text: str, eta: float | None = None) -> None:
        pass

    def finished_run(self, run: Run, eta: float | None = None) -> None:
        pass


def _busy_s(r: Run) -> float:
    """A finished run's own time plus the waits beyond its cooldown (quiet and thermal)."""
    thermal = r.load.thermal_wait.waited_s if r.load.thermal_wait is not None else 0.0
    return (r.wall_s or 0.0) + (r.quiet_wait_s or 0.0) + thermal


def estimate_remaining_s(remaining: list[PlannedRun], done: list[Run],
                         suite: Suite, pacer: Pacer | None = None) -> float | None:
    """Seconds left: per remaining run, the mean time of that arm's runs so far (with their quiet
    and thermal waits) plus, for a measured run, the cooldown the rule gives after the run
    before it (its predicted wall time; the first from the pacer, else the last finished run).

    Unknown arms take the mean over all runs; with no finished run yet there is no estimate.
    """
    if not done:
        return None
    measured = [r for r in done if not r.warmup] or done
    overall = statistics.fmean(_busy_s(r) for r in measured)
    by_arm: dict[str | None, list[float]] = {}
    walls: dict[str | None, list[float]] = {}
    for r in measured:
        by_arm.setdefault(r.arm, []).append(_busy_s(r))
        walls.setdefault(r.arm, []).append(r.wall_s or 0.0)
    overall_wall = statistics.fmean(r.wall_s or 0.0 for r in measured)
    prev = pacer.last_wall_s if pacer is not None and pacer.last_wall_s is not None \
        else done[-1].wall_s or 0.0
    total = 0.0
    for p in remaining:
        xs = by_arm.get(p.arm)
        total += statistics.fmean(xs) if xs else overall
        if not p.warmup:
            total += cooldown_for(suite.settings, prev)
        ws = walls.get(p.arm)
        prev = statistics.fmean(ws) if ws else overall_wall
    return total


def execute(plan: list[PlannedRun], suite: Suite, record: Record, annotate: Annotate,
            engines: Engines | None = None, ui: UIFactory | None = None, *,
            pacer: Pacer | None = None) -> list[Run]:
    """Run every planned run the record lacks; returns the runs added in this call.

    ui: makes the progress display from (total runs, runs done before), a context manager with
    status() and finished_run(); None shows nothing. pacer: the waiting state to use (and
    update); None starts one that continues after the runs already in the record.
    """
    engines = engines or Engines()
    ui = ui or NullUI.factory
    own_pacer = pacer is None
    pacer = pacer if pacer is not None else Pacer.from_runs(record.runs)
    done = record.done_indices()
    todo = [p for p in plan if p.index not in done]
    added: list[Run] = []
    try:
        with ui(len(plan), len(plan) - len(todo)) as shown:
            for i, planned in enumerate(todo):
                interrupt.check()
                history = [r for r in record.runs if r.is_ok]   # warm-ups too: the estimate's fallback
                eta = estimate_remaining_s(todo[i:], history, suite, pacer)
                run = record.add_run(annotate(run_one(planned, suite, engines, shown, eta, pacer)))
                added.append(run)
                interrupt.check()
                shown.finished_run(run, estimate_remaining_s(todo[i + 1:], history + [run], suite, pacer))
    finally:
        if own_pacer:
            pacer.close()
    return added


def _cooldown(seconds: float, ui: Any, eta: float | None) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ui.status(f"cooling down {left:4.1f} s", None if eta is None else eta - (seconds - left))
        time.sleep(min(0.25, left))


def run_one(planned: PlannedRun, suite: Suite, engines: RunsEngines, ui: Any,
            eta: float | None, pacer: Pacer | None = None) -> Run:
    """One planned run, waits included; updates the pacer. ui: RunnerUI or NullUI (anything
    with status(text, eta) and finished_run(run, eta))."""
    if pacer is None:   # a pacer for this run only, and its watch process with it
        pacer = Pacer()
        try:
            return run_one(planned, suite, engines, ui, eta, pacer)
        finally:
            pacer.close()
    s = suite.settings
    arm, pairing, prompt = suite.arm(planned.arm), suite.pairing(planned.pairing), suite.prompt(planned.prompt)
    begun = time.monotonic()

    def left() -> float | None:   # the ETA shrinks while this run cools down, waits and runs
        return None if eta is None else max(0.0, eta - (time.monotonic() - begun))
    waits = _wait_before(planned, s, pacer, ui, left)
    ui.status(f"{arm.name} on {prompt.name}" + (" (warm-up)" if planned.warmup else ""), left())
    before = host_load.load_snapshot()
    gpu_before = host_gpu.before_run(waits.quiet, host_gpu.read)
    started = now_iso()
    out, failure, wall_s, contention = _measure(engines, RunRequest(arm=arm, pairing=pairing, prompt=prompt,
                                                                    settings=s), s, pacer)
    probe_ms = out.dispatch_measurement_ms if out is not None else None
    if probe_ms is not None:   # timed after the run, inside the same call: not the run's time
        wall_s = max(0.0, wall_s - probe_ms / 1e3)
    after = host_load.load_snapshot()
    # Another process's GPU work, read while our engine is idle on either side (host/gpuload.py).
    gpu = host_gpu.after_run(gpu_before, host_gpu.read)
    marks = waits.marks
    if (contention.contended_fraction or 0.0) > s.contention_threshold:
        marks.append("contended")
    if contention.enabled and (contention.samples or 0) < WATCH_MIN_SAMPLES:
        marks.append("watch_undersampled")
    if failure is not None:
        marks.append("failed")
    # The collectors' snapshots are dicts; the thermal and GPU readings are typed already.
    load = msgspec.convert({"before": before, "after": after, "quiet_wait": waits.quiet,
                            "contention": contention}, RunLoad)
    load.thermal, load.thermal_wait, load.gpu = waits.thermal, waits.thermal_wait, gpu
    run = Run(index=planned.index, arm=planned.arm, pairing=planned.pairing, prompt=planned.prompt,
              repetition=planned.repetition, warmup=planned.warmup, engine=arm.engine, block=arm.block,
              status="ok" if failure is None else "failed", error=None if failure is None else failure.error,
              stderr_tail=failure.stderr_tail if failure is not None else (out.stderr_tail if out else None),
              started=started, wall_s=wall_s, cooldown_s=round(waits.cooldown_s, 4),
              quiet_wait_s=waits.quiet_wait_s, dispatch_measurement_ms=probe_ms, load=load, marks=marks)
    _copy_result(run, out, failure)
    pacer.note(run)
    return run


@dataclass
class _Waits:
    """What the waits before one run did: the cooldown, the quiet wait, the thermal wait."""

    cooldown_s: float
    quiet: dict[str, Any]
    quiet_wait_s: float
    thermal_wait: ThermalWait
    thermal: ThermalState
    marks: list[str]


def _wait_before(planned: PlannedRun, s: Any, pacer: Pacer, ui: Any, left: Callable[[], float | None]) -> _Waits:
    """The cooldown (sampled by the quiet wait when it is on), then the thermal wait."""
    marks: list[str] = []
    # A warm-up is discarded, and the measured run after it gets its own cooldown.
    cooldown = 0.0 if planned.warmup else pacer.cooldown_s(s)
    quiet: dict[str, Any] = {"enabled": False}
    quiet_wait = 0.0
    if s.quiet.enabled:
        def tick(phase: str, secs: float) -> None:
            ui.status(f"cooling down {secs:4.1f} s" if phase == "cooldown"
                      else f"waiting for a quiet machine ({secs:4.1f} s)", left())
        # settle_s and timeout_s the suite leaves unset are sized to the arm's expected run.
        lim = host_quiet.wait_limits(s.quiet.settle_s, s.quiet.timeout_s, pacer.expected_wall_s(planned.arm))
        quiet = dict(host_quiet.QuietWait(threshold_pct=s.quiet.threshold_pct, settle_s=lim.settle_s,
                                          timeout_s=lim.timeout_s,
                                          sampler=pacer.foreign_sampler(), gpu=host_gpu.read).wait(cooldown, tick))
        quiet.update(lim.to_dict(), enabled=True)
        waited = msgspec.convert(quiet, QuietWaitResult)
        quiet_wait = float(waited.waited_s or 0.0)
        if waited.timed_out:
            marks.append("quiet_wait_timeout")
    elif cooldown > 0:
        _cooldown(cooldown, ui, left())
    thermal_wait, thermal = host_thermal.wait_thermal(
        thermal_limit_s(s), read=host_thermal.recent_thermal_state, wait=not planned.warmup,
        on_tick=lambda secs, why: ui.status(f"cooling: not thermally nominal ({why}) {secs:4.0f} s", left()))
    if planned.warmup and thermal_wait.nominal is False:
        thermal_wait.reason += " (warm-up: not waited for)"
    elif thermal_wait.nominal is False:
        marks.append("thermal_not_nominal")
    return _Waits(cooldown, quiet, quiet_wait, thermal_wait, thermal, marks)


def _measure(engines: RunsEngines, req: RunRequest, s: Any,
             pacer: Pacer) -> tuple[Any, EngineFailure | None, float, ContentionResult]:
    """The run itself, under the contention watch when it is on: (output, failure, wall_s, watch)."""
    if not s.watch.enabled:
        t0 = time.perf_counter()
        out, failure = _attempt(engines, req)
        return out, failure, time.perf_counter() - t0, ContentionResult(enabled=False)
    predicted = pacer.predicted_wall_s(req.arm.name)
    with pacer.contention_watch(s.watch.threshold_pct, s.watch.interval_s, predicted) as w:
        t0 = time.perf_counter()
        out, failure = _attempt(engines, req)
        wall_s = time.perf_counter() - t0
    contention = dict(w.result())
    contention.update(enabled=True, predicted_wall_s=round(predicted, 4))
    return out, failure, wall_s, msgspec.convert(contention, ContentionResult)


def _copy_result(run: Run, out: Any, failure: EngineFailure | None) -> None:
    """The run's fields copied from the engine's typed result; a failed run has no engine parts."""
    if out is None:
        assert failure is not None   # _attempt gives a failure whenever it gives no output
        run.overrides = failure.overrides
        return
    result: schema.EngineResult = out.result
    d = result.diagnostics
    ids = result.token_ids
    run.decode_tokens_per_s, run.prefill_ms = d.decode_tokens_per_s, d.prefill_ms
    # Kept once, as the run's own figure (schema.RunDiagnostics has no ms_per_token).
    run.ms_per_token = d.ms_per_token
    run.generated_tokens = d.generated_tokens if d.generated_tokens is not None else (
        len(ids) if ids is not None else None)
    run.token_ids, run.text, run.text_sha256 = ids, result.text, result.text_sha256
    run.overrides = out.overrides
    run.gate, run.engine_info, run.result_arm = result.gate, result.engine, result.arm
    run.diagnostics = msgspec.convert(d, RunDiagnostics, from_attributes=True)


def _attempt(engines: RunsEngines, req: RunRequest) -> tuple[Any, EngineFailure | None]:
    try:
        out = engines.run(req)
    except EngineFailure as f:
        return None, f
    except Exception as e:  # an adapter bug must not end the session either
        import traceback
        return None, EngineFailure(f"{type(e).__name__}: {e}", traceback.format_exc()[-2000:])
    # The one gate every engine result passes (in-process, command, a worker's) before it is a
    # run: a NaN or negative figure fails this run, never the session or a later report.
    problem = result_problem({**schema.to_builtins(out.result), "dispatch_measurement_ms": out.dispatch_measurement_ms})
    if problem:
        return None, EngineFailure(f"engine result: {problem}", out.stderr_tail, out.overrides)
    return out, None


def _adapter_functions(suite: Suite, name: str) -> Iterator[tuple[Any, Any]]:
    """(arm, function) for each arm whose in-process engine's module defines `name` (an optional
    hook: check_inputs, measure_scaling); command engines have none."""
    import importlib

    from harness.core.declare import builtin_modules
    for arm in suite.arms:
        mod = builtin_modules().get(suite.engine(arm).adapter)
        fn = getattr(importlib.import_module(mod), name, None) if mod else None
        if fn is not None:
            yield arm, fn


def check_inputs(suite: Suite) -> None:
    """What an in-process engine would refuse (its module's `check_inputs(pairing)`), said once
    before the session as one line, rather than as every run failing."""
    seen: set[tuple[Any, str]] = set()
    for arm, check in _adapter_functions(suite, "check_inputs"):
        if (check, arm.pairing) in seen:
            continue
        seen.add((check, arm.pairing))
        problem = check(suite.pairing(arm.pairing))
        if problem:
            raise UserError(f"{suite.path}: pairing {arm.pairing!r} ({suite.engine(arm).name}): {problem}")


def measure_scaling(suite: Suite, context_tokens: int = 512) -> dict[str, Any] | None:
    """Verify-forward cost scaling of the first pairing run by an engine that can measure it
    (suite `scaling = true`); None when no arm's engine can."""
    for arm, scaler in _adapter_functions(suite, "measure_scaling"):
        scaling: dict[str, Any] | None = scaler(suite.pairing(arm.pairing), context_tokens=context_tokens)
        return scaling
    return None
