"""Per-arm summary of a record, with the flags that say whether a figure may be published.

One row per (arm, prompt): tok/s differs by prompt, so pooling prompts would put prompt
variation into the spread and flag every arm. Warm-ups, failed runs and runs set aside for
their host (analyze.spoiled) are left out of the timings and the speedup (and counted). Reads
the record only; runs nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import msgspec

from harness.analyze import contended, paired, spoiled, stats
from harness.analyze.comparisons import pairing_targets
from harness.analyze.covariate import probe_note
from harness.analyze.design import Design, share_text
from harness.analyze.identity import classic_comparisons, describe
from harness.analyze.memory import run_memory
from harness.analyze.paired import Paired
from harness.analyze.rounds import by_arm_prompt
from harness.collect.record import record_duty
from harness.core.recordsections import Duty, Look
from harness.core.runs import RecordData, as_record, measured_ok_runs
from harness.core.schema import Record, Run
from harness.core.suitespec import Settings

MIN_BOOTSTRAP_RUNS = 5   # fewer runs a side: no bootstrap interval for the speedup (see below)


@dataclass
class ArmSummary:
    arm: str
    pairing: str
    prompt: str
    engine: str
    block: int
    runs: int                       # measured runs that finished ok
    failed: int
    contended: int
    quiet_wait_timeouts: int
    contended_samples: int = 0      # contended watch samples in the contended runs
    contention_samples: int = 0     # all watch samples in the contended runs
    watch_undersampled: int = 0     # runs the watch sampled fewer than 10 times
    watch_in_thread: int = 0        # runs watched from a thread of the harness (its process was lost)
    # Runs set aside for their host (analyze.spoiled: backup, battery, thermal, gpu-busy), counted
    # in `runs` but not in the timings, and how many runs have each reason code.
    set_aside: int = 0
    set_aside_reasons: dict[str, int] = field(default_factory=dict)
    tok_s_median: float | None = None
    tok_s_min: float | None = None
    tok_s_max: float | None = None
    ms_per_token_median: float | None = None
    ms_per_token_min: float | None = None
    ms_per_token_max: float | None = None
    spread: float | None = None
    # Device memory the arm needs (harness.analyze.memory), the largest over its runs, and what
    # its generation added over the resident part (KV caches, activations).
    memory_bytes: int | None = None
    run_memory_bytes: int | None = None
    acceptance: float | None = None
    per_step_acceptance: float | None = None
    per_step_ci: tuple[float, float] | None = None
    emitted_per_verify: float | None = None
    speedup: float | None = None            # ratio of median tok/s over the classic arm
    speedup_ci: tuple[float, float] | None = None
    min_detectable_change: float | None = None
    classic_arm: str | None = None
    identity: dict[str, int] = field(default_factory=dict)   # status -> count
    vs_classic: str | None = None           # information only (gate passed, no override)
    shipping: bool = False
    declined: bool = False                  # asked to speculate, decoded classic in every ok run (gate declined)
    labels: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)
    do_not_publish: bool = False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(record: RecordData, runs: list[Run] | None = None) -> list[ArmSummary]:
    """One row per (arm, prompt) in suite order; runs: the record's runs typed, in its order,
    where the caller has them so (a report's Facts), else converted here."""
    rec = as_record(record)
    suite = rec.suite
    settings = suite.settings
    arms = {a.name: a for a in suite.arms}
    typed = rec.runs if runs is None else runs
    # Failed runs too: they are counted.
    groups = by_arm_prompt(record, [r for r in typed if not r.warmup], keep_empty=True)
    vs_classic = classic_comparisons(suite.arms, typed)
    out: list[ArmSummary] = []
    timed_n: dict[tuple[str, str], int] = {}   # the runs the timings rest on, per row
    for (arm_name, prompt), runs in groups.items():
        # A run of an arm the suite lacks (recordcheck refuses those on load) reads as unknown.
        a = arms.get(arm_name)
        block = a.block if a is not None else 0
        ok = measured_ok_runs(runs)
        s = ArmSummary(arm=arm_name, pairing=a.pairing if a is not None else "?", prompt=prompt,
                       engine=a.engine if a is not None else "?",
                       block=block, runs=len(ok), failed=len(runs) - len(ok),
                       contended=sum("contended" in r.marks for r in runs),
                       quiet_wait_timeouts=sum("quiet_wait_timeout" in r.marks for r in runs),
                       watch_undersampled=sum("watch_undersampled" in r.marks for r in runs),
                       watch_in_thread=sum(_watched_from_a_thread(r) for r in runs),
                       set_aside=spoiled.set_aside_runs(runs), set_aside_reasons=spoiled.counts(runs))
        for r in runs:
            if "contended" in r.marks and (watch := r.load.contention) is not None:
                s.contended_samples += int(watch.contended_samples or 0)
                s.contention_samples += int(watch.samples or 0)
        timed = spoiled.usable_runs(ok)
        timed_n[(arm_name, prompt)] = len(timed)
        tps, mpt = _tok_s(timed), [x for r in timed if (x := r.ms_per_token) is not None]
        if tps:
            s.tok_s_median = stats.median(tps)
            s.tok_s_min, s.tok_s_max = stats.min_max(tps)
            if s.tok_s_median > 0:
                s.spread = stats.spread(tps)
        if mpt:
            s.ms_per_token_median = stats.median(mpt)
            s.ms_per_token_min, s.ms_per_token_max = stats.min_max(mpt)
        diags = [r.diagnostics for r in ok]
        proposed = sum(d.proposed or 0 for d in diags)
        accepted = sum(d.accepted or 0 for d in diags)
        tested = sum(d.per_step_tested or 0 for d in diags)
        if block > 1 and proposed:
            s.acceptance = accepted / proposed
        if block > 1 and tested:
            s.per_step_acceptance = accepted / tested
            s.per_step_ci = stats.wilson_ci(min(accepted, tested), tested)
        mems = [m for m in (run_memory(r.diagnostics) for r in ok) if m is not None]
        if mems:
            s.memory_bytes = max(m[0] for m in mems)
            added = [m[1] for m in mems if m[1] is not None]
            s.run_memory_bytes = max(added) if added else None
        epv = [x for d in diags if (x := d.emitted_per_verify) is not None]
        if epv:
            s.emitted_per_verify = stats.median(epv)
        for r in runs:
            st = r.identity.status if r.identity is not None else "not_compared"
            s.identity[st] = s.identity.get(st, 0) + 1
        if (arm_name, prompt) in vs_classic:
            c = vs_classic[(arm_name, prompt)]
            s.vs_classic = f"{describe(c.comparison)} (vs {c.classic_arm}; information only)"
        s.labels = sorted({r.label or "unlabelled" for r in runs})
        s.shipping = bool(runs) and all(r.shipping for r in runs)
        s.declined = block > 1 and bool(ok) and all(
            r.gate.outcome == "declined" or r.gate.engaged is False for r in ok)
        out.append(s)
    _speedups(out, groups, settings, pairing_targets(suite))
    quick = bool(rec.quick)
    for s in out:
        _flag(s, settings, quick, timed_n.get((s.arm, s.prompt), s.runs))
    return out


def _classic_for(s: ArmSummary, rows: list[ArmSummary], targets: dict[str, str]) -> ArmSummary | None:
    """The classic arm of the same pairing and prompt, else of a pairing with the same target
    (classic decode runs the target alone); same engine preferred."""
    cands = [c for c in rows if c.block == 1 and c.pairing == s.pairing and c.prompt == s.prompt and c is not s]
    if not cands and targets.get(s.pairing) is not None:
        cands = [c for c in rows if c.block == 1 and c.prompt == s.prompt and c is not s
                 and targets.get(c.pairing) == targets[s.pairing]]
    same = [c for c in cands if c.engine == s.engine]
    found = same or cands
    return found[0] if found else None


def _tok_s(runs: list[Run]) -> list[float]:
    return [x for r in runs if (x := r.decode_tokens_per_s) is not None]


def _speedups(rows: list[ArmSummary], groups: dict[tuple[str, str], list[Run]],
              settings: Settings, targets: dict[str, str]) -> None:
    def tps(row: ArmSummary) -> list[float]:
        return _tok_s(spoiled.usable_runs(groups[(row.arm, row.prompt)]))

    def by_rep(row: ArmSummary) -> dict[int, float]:
        return {r.repetition or 0: x for r in groups[(row.arm, row.prompt)]
                if spoiled.usable(r) and (x := r.ms_per_token) is not None}

    # The smallest detectable change is the paired one (harness.analyze.paired): runs of the same
    # repetition ran next to each other; it is the change caught with 80% power, not a half-width.
    design = Design(threshold=float(settings.threshold or 0.10), alpha=float(settings.alpha or 0.05),
                    looks=1, figures=1)

    for s in rows:
        if s.block == 1:
            continue
        c = _classic_for(s, rows, targets)
        if c is None:
            continue
        a, b = tps(s), tps(c)
        s.classic_arm = c.arm
        if not a or not b or min(b) <= 0:
            continue
        s.speedup, lo, hi = stats.bootstrap_ratio_ci(a, b)
        # A percentile bootstrap of medians from a handful of runs has a few distinct resamples
        # and reads far too narrow (1.12-1.19x from two runs each, where the paired check could not
        # see 50%): no interval is shown below MIN_BOOTSTRAP_RUNS a side.
        s.speedup_ci = (lo, hi) if min(len(a), len(b)) >= MIN_BOOTSTRAP_RUNS else None
        mine, ref = by_rep(s), by_rep(c)
        reps = sorted(set(mine) & set(ref))
        if len(reps) >= 2:
            p = paired.analyze([ref[k] for k in reps], [mine[k] for k in reps], design)
            s.min_detectable_change = p.detectable


def _flag(s: ArmSummary, settings: Settings, quick: bool, timed: int) -> None:
    thr = settings.spread_threshold
    if s.runs == 0:
        # Failed runs, or none at all (an interrupted session stopped before this arm and prompt).
        s.flags.append("no successful runs" if s.failed else "not run")
    elif s.runs < 2:
        s.flags.append("1 run: spread unknown")
    elif timed < 2:
        s.flags.append("every run set aside" if not timed else "1 run not set aside: spread unknown")
    if s.spread is not None and s.spread > thr:
        s.flags.append(f"may be unstable (spread {s.spread:.1%} > {thr:.0%})")
    if s.contended:
        # Counts from the runs' watches; records from before the counts say only how many runs.
        counts = f" ({s.contended_samples} of {s.contention_samples} samples)" if s.contention_samples else ""
        s.flags.append(f"{s.contended} contended{counts}")
    if s.set_aside:
        codes = ", ".join(f"{why} {n}" for why, n in s.set_aside_reasons.items())
        s.flags.append(f"{s.set_aside} set aside ({codes}), not in the figures")
    if s.watch_undersampled:
        s.flags.append(f"{s.watch_undersampled} watch undersampled")
    if s.watch_in_thread:
        # Its process could not start or stopped answering: an in-process engine may have starved it.
        s.flags.append(f"{s.watch_in_thread} watched from a thread")
    if s.failed:
        s.flags.append(f"{s.failed} failed")
    if s.quiet_wait_timeouts:
        s.flags.append(f"quiet wait timed out {s.quiet_wait_timeouts}x")
    no_cooldown = not has_cooldown(settings)
    if quick:
        s.flags.append("quick session")
    elif no_cooldown:
        s.flags.append("no cooldown")
    if s.min_detectable_change is not None and s.speedup is not None \
            and s.min_detectable_change > abs(s.speedup - 1.0):
        s.flags.append(f"speedup inconclusive (smallest detectable {s.min_detectable_change:.1%})")
    s.do_not_publish = bool(
        (s.spread is not None and s.spread > thr) or s.contended or s.set_aside or s.runs < 2
        or quick or no_cooldown)
    if s.do_not_publish:
        s.flags.insert(0, "do not publish")


def has_cooldown(settings: Settings) -> bool:
    """Whether measured runs got a cooldown: a floor, or a ratio with no zero cap (settings from
    old records lack the ratio and cap: no ratio)."""
    if settings.cooldown_s:
        return True
    cap = settings.cooldown_cap_s
    return bool(settings.cooldown_ratio) and (cap is None or cap > 0)


def machine_summary(record: RecordData, rows: list[ArmSummary], record_path: str) -> dict[str, Any]:
    """The one JSON line printed last for machines."""
    rec = as_record(record)
    runs = rec.runs
    return {
        "kind": "harness.summary", "record": record_path, "session_id": rec.session_id,
        "complete": rec.complete, "runs": len(runs),
        "failed": sum(r.status == "failed" for r in runs),
        "identity_differs": sum(r.identity is not None and r.identity.status == "differs" for r in runs),
        "duty": record_duty(record),
        "contention": contended.record_info(record).to_dict(),
        "arms": [s.to_dict() for s in rows],
    }


def _watched_from_a_thread(run: Run) -> bool:
    """The watch's process was lost, so this run was watched from a thread or not at all.
    Records from before the watch's process say nothing (False)."""
    how = run.load.contention.watcher if run.load.contention is not None else None
    return isinstance(how, str) and how != "process"


def _secs(x: float) -> str:
    return f"{x:.1f} s" if x < 10 else f"{x:.0f} s"


def record_duty_of(record: RecordData) -> Duty | None:
    """The record's duty (collect.record.record_duty: the one finish() wrote, else computed from
    its session wall time), typed; None for a record from before session wall time."""
    if isinstance(record, Record) and record.duty is not None:
        return record.duty
    duty = record_duty(record)
    return None if duty is None else msgspec.convert(duty, Duty)


def duty_line(record: RecordData) -> str:
    """One line for people under the table: "duty cycle 63%: 112 s of measured runs in 178 s of
    session wall (warm-ups 18 s, waiting 21 s)". The warm-ups (loads, first-use compiles) are
    named because in a short session of short runs they can be most of what is not measuring.
    "" for a record from before session wall time."""
    duty = record_duty_of(record)
    if duty is None or not duty.session_wall_s:
        return ""
    cycle = duty.duty_cycle
    head = "duty cycle -" if cycle is None else f"duty cycle {cycle:.0%}"
    warm = max(0.0, duty.run_s - duty.measured_run_s)
    return (f"{head}: {_secs(duty.measured_run_s)} of measured runs in "
            f"{_secs(duty.session_wall_s)} of session wall (warm-ups {_secs(warm)}, "
            f"waiting {_secs(duty.waiting_s)})")


_VS_CLASSIC = {"worse": "slower than classic", "improved": "faster than classic",
               "unchanged": "the same as classic within the threshold", "inconclusive": "inconclusive"}


def look_readings(look: Look) -> dict[str, Paired]:
    """A look of a record's `sequential` block: each arm's paired reading against classic, typed."""
    return {arm: msgspec.convert(p, Paired, from_attributes=True) for arm, p in look.figures.items()}


def sequential_lines(record: RecordData) -> list[str]:
    """What the budget did, and each speculative arm against classic, paired by prompt and
    repetition: "" lines for a record made without a budget or before budgets existed."""
    seq = as_record(record).sequential
    if seq is None or not seq.looks:
        return []
    d = seq.design
    budget = seq.budget_s
    head = (f"budget {budget:g} s of measuring" if budget else "no budget") + \
        f": {seq.rounds} repetitions, {len(seq.looks)} look(s); stopped: {seq.stopped_because}"
    out = [head,
           f"vs classic, ms/token paired by prompt and repetition (threshold ±{share_text(d.threshold)}, "
           f"false-alarm level {share_text(d.alpha)} over {d.looks} look(s) and "
           f"{d.figures} arm(s); docs/statistics.md):"]
    for arm, p in look_readings(seq.looks[-1]).items():
        if p.ratio is None:
            out.append(f"  {arm}: {p.note or 'no pairs'}")
            continue
        ci = "" if p.lo is None or p.hi is None else f" ({p.lo - 1:+.1%} to {p.hi - 1:+.1%})"
        det_s = "-" if p.detectable is None else f"{p.detectable:.1%}"
        words = _VS_CLASSIC.get(p.verdict, p.verdict)
        note = f"; {p.note}" if p.note and p.verdict != "inconclusive" else ""
        if p.contended:   # a reading set aside for contention says what it read and why
            words, note = f"inconclusive: {contended.reading_text(p)}", ""
        if p.verdict == "inconclusive" and (said := probe_note(p.dispatch_measurement)):
            note = f"; {said}"   # what the interval rests on is said whatever the verdict
        out.append(f"  {arm}: {p.ratio - 1:+.1%}{ci} over {p.n} pairs, {words}; "
                   f"smallest detectable {det_s}{note}")
    return out


def waiting_lines(record: RecordData) -> list[str]:
    """The summary's first lines when waiting, not measuring, took the session (more than half
    its wall time) or the quiet wait timed out: how long, for what, and the suite setting that
    governs it, e.g. "waited 427 s of 431 s for a quiet machine (65 quiet-wait timeouts);" and
    "  [quiet] timeout_s = 120 governs it: lower it on a busy host (the suite file)". A first
    run on a busy host once took 7 min for 2 s of measuring and nothing said why. [] otherwise."""
    rec = as_record(record)
    duty = record_duty_of(record)
    if duty is None or not duty.session_wall_s:
        return []
    return _waiting(duty.session_wall_s, duty.waiting_s, rec.runs, rec.suite.settings)


def _waiting(wall: float, waited: float, runs: list[Run], s: Settings) -> list[str]:
    """waiting_lines() of `runs` and their suite settings, waiting `waited` of `wall` seconds."""
    timeouts = sum("quiet_wait_timeout" in r.marks for r in runs)
    if not timeouts and waited <= 0.5 * wall:
        return []
    quiet = sum(r.quiet_wait_s or 0.0 for r in runs)
    cool = sum(r.cooldown_s or 0.0 for r in runs)
    thermal = sum(r.load.thermal_wait.waited_s for r in runs if r.load.thermal_wait is not None)
    waits = [g for r in runs if (g := r.load.quiet_wait) is not None]

    def setting(key: str, value: float | None, ran: list[float]) -> str:
        """The quiet wait's setting `key` as it ran (`ran`: each run's), where the runs say,
        else as the suite gives it."""
        if any(key in g.sized for g in waits):   # unset: sized to each run
            span = _num(min(ran)) + ("" if min(ran) == max(ran) else f"-{_num(max(ran))}")
            return f"{key} (unset: sized to each run, {span} s here)"
        return f"{key} = {_num(max(ran) if ran else value)}"
    head = f"waited {_secs(waited)} of {_secs(wall)}"
    if timeouts or quiet >= max(cool, thermal):
        n = f"{timeouts} quiet-wait timeout{'s' if timeouts != 1 else ''}" if timeouts else "no quiet-wait timeout"
        if timeouts:
            ran = [x for g in waits if (x := g.timeout_s) is not None]
            governs = f"  [quiet] {setting('timeout_s', s.quiet.timeout_s, ran)} governs it"
        else:
            settle = setting("settle_s", s.quiet.settle_s, [x for g in waits if (x := g.settle_s) is not None])
            pct = setting("threshold_pct", s.quiet.threshold_pct, [x for g in waits if (x := g.threshold_pct) is not None])
            governs = f"  [quiet] {settle} and {pct} govern it"
        tail = f"lower {'it' if timeouts else 'settle_s'} on a busy host (the suite file)"
        said = [f"{governs}: {tail}"] if len(governs) + len(tail) <= 78 else [f"{governs}:", f"  {tail}"]
        return [f"{head} for a quiet machine ({n});", *said]
    if cool >= thermal:
        return [f"{head} cooling down between runs;",
                f"  cooldown_s = {_num(s.cooldown_s)}, cooldown_ratio = {_num(s.cooldown_ratio)} "
                f"and cooldown_cap_s = {_num(s.cooldown_cap_s)} govern it"]
    return [f"{head} for the machine to leave a thermal state;",
            f"  cooldown_cap_s = {_num(s.cooldown_cap_s)} governs it (the thermal wait's limit)"]


def _num(x: Any) -> str:
    return f"{x:g}" if isinstance(x, (int, float)) and not isinstance(x, bool) else "unset"


def check_waiting_lines(records: Mapping[str, Record], wall_s: float | None) -> list[str]:
    """waiting_lines() of a paired check: both sides' runs and waits (made one after the other
    in one process) against the check's wall time; [] without one."""
    recs = list(records.values())
    if not recs or not wall_s:
        return []
    waited = sum(d.waiting_s for r in recs if (d := record_duty_of(r)) is not None)
    return _waiting(float(wall_s), waited, [x for r in recs for x in r.runs], recs[0].suite.settings)
