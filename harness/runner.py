"""Executes a plan: cooldown, quiet gate, contention watch, adapter, record.

Each run is wrapped in load snapshots (before/after), the quiet gate's verdict, the
contention watch's samples and a thermal reading, then appended to the record at once.
Labels and identity are analyses, so the runner does not import them: the caller passes an
`annotate` function that adds them to each run before it is recorded.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, Progress, ProgressColumn, TaskProgressColumn, TextColumn
from rich.table import Table
from rich.text import Text

from harness import loadwatch
from harness.engines import EngineFailure, Engines, RunRequest
from harness.plan import PlannedRun
from harness.record import Record, now_iso
from harness.suite import Suite

Annotate = Callable[[dict[str, Any]], dict[str, Any]]
TABLE_ROWS = 14


@dataclass
class RunnerUI:
    """The progress bar and live table; plain one-line-per-run output when not a terminal."""
    console: Console
    total: int
    done_before: int
    rows: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.live_mode = self.console.is_terminal
        self.progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), TaskProgressColumn(),
            TextColumn("{task.completed}/{task.total}"), _EtaColumn(),
            TextColumn("{task.fields[status]}"), console=self.console)
        self.task = self.progress.add_task("runs", total=self.total, completed=self.done_before,
                                           status="", eta_s=None)
        self.live: Live | None = None

    def __enter__(self) -> "RunnerUI":
        if self.live_mode:
            self.live = Live(self._render(), console=self.console, refresh_per_second=4)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.update(self._render())
            self.live.__exit__(*exc)

    def status(self, text: str, eta_s: float | None) -> None:
        self.progress.update(self.task, status=text, eta_s=eta_s)
        if self.live is not None:
            self.live.update(self._render())

    def finished_run(self, run: dict[str, Any], eta_s: float | None) -> None:
        self.rows.append(run)
        self.progress.update(self.task, advance=1, status="", eta_s=eta_s)
        if self.live is not None:
            self.live.update(self._render())
        else:
            self.console.print(_plain_line(run, self.progress.tasks[0].completed, self.total),
                               highlight=False, soft_wrap=True)

    def _render(self) -> Group:
        return Group(live_table(self.rows[-TABLE_ROWS:]), self.progress)


class _EtaColumn(ProgressColumn):
    """ETA from the runner's own estimate, which counts cooldowns and quiet-gate waits."""

    def render(self, task: Any) -> Text:
        eta = task.fields.get("eta_s")
        if eta is None:
            return Text("eta -:--", style="progress.remaining")
        m, s = divmod(int(eta + 0.5), 60)
        h, m = divmod(m, 60)
        return Text(f"eta {h}:{m:02d}:{s:02d}" if h else f"eta {m}:{s:02d}", style="progress.remaining")


def _fmt(x: Any, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def live_table(runs: list[dict[str, Any]]) -> Table:
    t = Table(title="runs", title_justify="left", expand=False)
    for col in ("#", "arm", "prompt", "rep", "tok/s", "ms/tok", "accept", "marks", "identity", "label"):
        t.add_column(col, overflow="fold")
    for r in runs:
        acc = (r.get("diagnostics") or {}).get("acceptance_rate")
        marks = ",".join(r.get("marks") or []) or ("warmup" if r.get("warmup") else "")
        style = "red" if r["status"] == "failed" else ("dim" if r.get("warmup") else None)
        t.add_row(str(r["index"]), r["arm"], r["prompt"], ("w" if r["warmup"] else "") + str(r["repetition"]),
                  _fmt(r.get("decode_tokens_per_s"), ".1f"), _fmt(r.get("ms_per_token"), ".2f"),
                  _fmt(acc, ".2f"), marks, (r.get("identity") or {}).get("status", "-"),
                  short_label(r), style=style)
    return t


def short_label(r: dict[str, Any]) -> str:
    """The live table's label: the full text is in the record and under the summary table."""
    if r.get("shipping"):
        return "shipping"
    why = [f"{k}={v}" for k, v in sorted((r.get("overrides") or {}).items())]
    outcome = (r.get("gate") or {}).get("outcome")
    if outcome not in (None, "passed", "not_applicable"):
        why.append(f"gate {outcome}")
    return "NOT shipping" + (f" ({', '.join(why)})" if why else "")


def _plain_line(r: dict[str, Any], done: float, total: int) -> str:
    tps = _fmt(r.get("decode_tokens_per_s"), ".1f")
    marks = ",".join(r.get("marks") or [])
    ident = (r.get("identity") or {}).get("status", "-")
    err = f" error={r['error']}" if r.get("error") else ""
    return (f"[{int(done)}/{total}] run {r['index']} arm={r['arm']} prompt={r['prompt']} "
            f"rep={'w' if r['warmup'] else ''}{r['repetition']} status={r['status']} tok/s={tps} "
            f"identity={ident} marks={marks or '-'} label={short_label(r)}{err}")


def estimate_remaining_s(remaining: list[PlannedRun], done: list[dict[str, Any]],
                         suite: Suite) -> float | None:
    """Seconds left: per remaining run, its cooldown plus the mean time of that arm's runs so far.

    Unknown arms take the mean over all runs; with no finished run yet there is no estimate.
    """
    if not done:
        return None
    measured = [r for r in done if not r.get("warmup")] or done
    overall = statistics.fmean(r["wall_s"] + r.get("gate_wait_s", 0.0) for r in measured)
    by_arm: dict[str, list[float]] = {}
    for r in measured:
        by_arm.setdefault(r["arm"], []).append(r["wall_s"] + r.get("gate_wait_s", 0.0))
    total = 0.0
    for p in remaining:
        xs = by_arm.get(p.arm)
        total += statistics.fmean(xs) if xs else overall
        if not p.warmup:
            total += suite.settings.cooldown_s
    return total


def execute(plan: list[PlannedRun], suite: Suite, record: Record, annotate: Annotate,
            engines: Engines | None = None, console: Console | None = None) -> list[dict[str, Any]]:
    """Run every planned run the record lacks; returns the runs added in this call."""
    engines = engines or Engines()
    console = console or Console(stderr=True)
    done = record.done_indices()
    todo = [p for p in plan if p.index not in done]
    added: list[dict[str, Any]] = []
    with RunnerUI(console, total=len(plan), done_before=len(plan) - len(todo)) as ui:
        for i, planned in enumerate(todo):
            history = [r for r in record.runs if r["status"] == "ok"]
            eta = estimate_remaining_s(todo[i:], history, suite)
            run = run_one(planned, suite, engines, ui, eta)
            run = annotate(run)
            record.add_run(run)
            added.append(run)
            ui.finished_run(run, estimate_remaining_s(todo[i + 1:], history + [run], suite))
    return added


def _cooldown(seconds: float, ui: RunnerUI, eta: float | None) -> None:
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ui.status(f"cooling down {left:4.1f} s", None if eta is None else eta - (seconds - left))
        time.sleep(min(0.25, left))


def run_one(planned: PlannedRun, suite: Suite, engines: Engines, ui: RunnerUI,
            eta: float | None) -> dict[str, Any]:
    s = suite.settings
    arm, pairing, prompt = suite.arm(planned.arm), suite.pairing(planned.pairing), suite.prompt(planned.prompt)
    marks: list[str] = []
    begun = time.monotonic()

    def left() -> float | None:   # the ETA shrinks while this run cools down, waits and runs
        return None if eta is None else max(0.0, eta - (time.monotonic() - begun))
    # A warm-up is discarded, and the measured run after it gets its own cooldown.
    if not planned.warmup and s.cooldown_s > 0:
        _cooldown(s.cooldown_s, ui, eta)
    quiet: dict[str, Any] = {"enabled": False}
    if s.quiet.enabled:
        ui.status("waiting for a quiet machine", left())
        quiet = dict(loadwatch.QuietGate(threshold_pct=s.quiet.threshold_pct, settle_s=s.quiet.settle_s,
                                         timeout_s=s.quiet.timeout_s).wait())
        quiet["enabled"] = True
        if quiet.get("timed_out"):
            marks.append("quiet_gate_timeout")
    ui.status(f"{arm.name} on {prompt.name}" + (" (warm-up)" if planned.warmup else ""), left())
    before = loadwatch.load_snapshot()
    thermal = loadwatch.thermal_state()
    started = now_iso()
    t0 = time.perf_counter()
    req = RunRequest(arm=arm, pairing=pairing, prompt=prompt, settings=s)
    out, failure = None, None
    contention: dict[str, Any] = {"enabled": False}
    if s.watch.enabled:
        with loadwatch.ContentionWatch(threshold_pct=s.watch.threshold_pct, interval_s=s.watch.interval_s) as w:
            out, failure = _attempt(engines, req)
        contention = dict(w.result())
        contention["enabled"] = True
    else:
        out, failure = _attempt(engines, req)
    wall_s = time.perf_counter() - t0
    after = loadwatch.load_snapshot()
    if (contention.get("contended_fraction") or 0.0) > s.contention_threshold:
        marks.append("contended")
    if failure is not None:
        marks.append("failed")

    result = out.result if out is not None else {}
    diag = result.get("diagnostics") or {}
    ids = result.get("token_ids")
    return {
        **planned.to_dict(),
        "engine": arm.engine, "block": arm.block,
        "status": "ok" if failure is None else "failed",
        "error": None if failure is None else failure.error,
        "stderr_tail": failure.stderr_tail if failure is not None else (out.stderr_tail if out else None),
        "started": started, "wall_s": wall_s, "gate_wait_s": float(quiet.get("waited_s") or 0.0),
        "decode_tokens_per_s": diag.get("decode_tokens_per_s"),
        "ms_per_token": diag.get("ms_per_token"),
        "prefill_ms": diag.get("prefill_ms"),
        "generated_tokens": diag.get("generated_tokens", len(ids) if ids is not None else None),
        "token_ids": ids, "text": result.get("text"), "text_sha256": result.get("text_sha256"),
        "overrides": out.overrides if out is not None else failure.overrides,
        "gate": result.get("gate") or {},
        "engine_info": result.get("engine") or {},
        "result_arm": result.get("arm") or {},
        "diagnostics": diag,
        "load": {"before": before, "after": after, "quiet_gate": quiet, "contention": contention,
                 "thermal": thermal},
        "marks": marks,
    }


def _attempt(engines: Engines, req: RunRequest) -> tuple[Any, EngineFailure | None]:
    try:
        return engines.run(req), None
    except EngineFailure as f:
        return None, f
    except Exception as e:  # an adapter bug must not end the session either
        import traceback
        return None, EngineFailure(f"{type(e).__name__}: {e}", traceback.format_exc()[-2000:])


def measure_scaling(suite: Suite, context_tokens: int = 512) -> dict[str, Any] | None:
    """Verify-forward cost scaling of the first specdec pairing's target (suite `scaling = true`)."""
    arm = next((a for a in suite.arms if a.engine == "specdec"), None)
    if arm is None:
        return None
    from specdec.loading import load_pair
    from specdec.scaling import verify_forward_cost_scaling
    pairing = suite.pairing(arm.pairing)
    pair = load_pair(pairing.target_dir(), with_drafter=False)
    out = verify_forward_cost_scaling(pair.target, context_tokens=context_tokens)
    out.update(pairing=pairing.name, target=str(pairing.target_dir()))
    return out

