"""What a report says about its record beside the verdicts, as data: the runs left out of every
figure, the runs and rows flagged, the runs set aside on load, what an incomplete record lacks,
the arms overridden, declined or not shipping, and a comparison's changes counted."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.analyze import spoiled
from harness.analyze.compare import ComponentChange
from harness.analyze.facts import Facts
from harness.analyze.summary import ArmSummary
from harness.collect.recordcheck import SET_ASIDE, SET_ASIDE_PREFIX
from harness.core import declare
from harness.core.schema import Run

WARMUP, FAILED = "warmup", "failed"
CONTENDED, QUIET_TIMEOUT = "contended", "quiet"
HOST = "host"      # set aside for the host it ran on (analyze.spoiled)


@dataclass(frozen=True)
class RunGroup:
    """Runs of one arm and prompt left out or flagged for one reason."""

    arm: str
    prompt: str
    kind: str                  # left out: WARMUP, FAILED; flagged: CONTENDED, HOST, QUIET_TIMEOUT
    runs: tuple[int, ...]      # their indices, in record order
    error: str | None = None   # FAILED: the first run's error
    set_aside: bool = False    # FAILED: the first run was set aside on load (its error says so)
    quiet_timeout_s: float | None = None   # QUIET_TIMEOUT: the first run's quiet-wait limit
    reasons: tuple[str, ...] = ()         # HOST: analyze.spoiled's codes these runs share


def left_out(fx: Facts) -> list[RunGroup]:
    """Runs left out of every figure (warm-ups, failed runs, runs set aside on load), grouped by
    arm, prompt and reason (a failure's error): warm-ups first, then in arm and prompt order."""
    found: dict[tuple[str, str, str], tuple[Run, list[int]]] = {}
    for r in fx.runs:
        if r.warmup:
            key = WARMUP
        elif r.status == "failed":
            key = f"{FAILED} {r.error}"
        else:
            continue
        found.setdefault((str(r.arm), str(r.prompt), key), (r, []))[1].append(r.index)
    order = {a: i for i, a in enumerate(fx.arm_order)}
    out = []
    for (arm, prompt, key), (first, idx) in sorted(
            found.items(), key=lambda kv: (kv[0][2] != WARMUP, order.get(kv[0][0], 0), kv[0][1])):
        if key == WARMUP:
            out.append(RunGroup(arm, prompt, WARMUP, tuple(idx)))
        else:
            out.append(RunGroup(arm, prompt, FAILED, tuple(idx), error=first.error, set_aside=SET_ASIDE in first.marks))
    return out


def flagged(fx: Facts) -> list[RunGroup]:
    """Measured runs kept in the figures but flagged: contended, set aside for the host (one
    group per set of reasons), or run after the quiet wait gave up; grouped by flag (contended
    first), then arm and prompt."""
    found: dict[tuple[str, str, str], tuple[float | None, list[int]]] = {}
    quiet_limit = fx.settings.quiet.timeout_s
    for r in fx.runs:
        if r.warmup or r.status == "failed":
            continue
        arm, prompt = str(r.arm), str(r.prompt)
        if "contended" in r.marks:
            found.setdefault((arm, prompt, CONTENDED), (None, []))[1].append(r.index)
        if why := spoiled.reasons(r):
            found.setdefault((arm, prompt, " ".join((HOST,) + why)), (None, []))[1].append(r.index)
        if "quiet_wait_timeout" in r.marks:
            # The run's own limit: an unset [quiet] timeout_s is sized to each run.
            q = r.load.quiet_wait
            gave = q.timeout_s if q is not None and q.timeout_s is not None else quiet_limit
            limit = float(gave) if isinstance(gave, (int, float)) else None
            found.setdefault((arm, prompt, QUIET_TIMEOUT), (limit, []))[1].append(r.index)
    order = {a: i for i, a in enumerate(fx.arm_order)}
    return [RunGroup(arm, prompt, kind.split()[0], tuple(idx), quiet_timeout_s=limit,
                     reasons=tuple(kind.split()[1:]))
            for (arm, prompt, kind), (limit, idx) in sorted(
                found.items(), key=lambda kv: (kv[0][2], order.get(kv[0][0], 0), kv[0][1]))]


def spread_over(fx: Facts) -> list[ArmSummary]:
    """The summary rows whose spread is past the suite's threshold."""
    return [r for r in fx.rows if r.spread is not None and r.spread > fx.settings.spread_threshold]


@dataclass(frozen=True)
class SetAside:
    """A run an older harness kept as ok that no engine could have measured (collect.recordcheck)."""

    index: int
    arm: str
    prompt: str
    why: str        # the problem, without the set-aside prefix


def set_aside(fx: Facts) -> list[SetAside]:
    return [SetAside(r.index, str(r.arm), str(r.prompt), (r.error or "").removeprefix(SET_ASIDE_PREFIX))
            for r in fx.runs if SET_ASIDE in r.marks]


@dataclass(frozen=True)
class Incomplete:
    """What an incomplete record lacks."""

    done: int                  # runs recorded
    planned: int | None        # runs planned (None: not recorded)

    @property
    def runs_all_there(self) -> bool:
        """Every planned run is there: the session stopped in the steps after them."""
        return self.planned is not None and self.done >= self.planned


def incomplete(fx: Facts) -> Incomplete | None:
    """None for a complete record."""
    if fx.record.complete is not False:
        return None
    return Incomplete(len(fx.runs), fx.record.planned_runs)


def overridden_arms(fx: Facts) -> list[str]:
    return [a for a in fx.arm_order if fx.overrides(a)]


def declined_arms(fx: Facts) -> list[str]:
    """Speculative arms whose gate declined (on some run) to classic decode."""
    return [a for a in fx.arm_order if fx.arms[a].block > 1 and "declined" in fx.outcome(a)]


def not_shipping_arms(fx: Facts) -> list[str]:
    return [a for a in fx.arm_order if not fx.shipping(a)]


def scaling_tool(fx: Facts) -> str | None:
    """The first arm's engine's declared scaling tool, where the record has no scaling probe."""
    if fx.record.scaling is not None:
        return None
    tools = [declare.of_record(fx.record, a).tools.get("scaling") for a in fx.arm_order]
    return next((t for t in tools if t), None)


@dataclass(frozen=True)
class ChangeCounts:
    """A comparison's component changes in brief."""

    largest: ComponentChange | None   # the resolved change (paired, above the floor) largest in |log ratio|
    noise: int                        # resolved as noise
    inconclusive: int
    smallest_detectable: float | None  # the least finite detectable change of the inconclusive ones
    below_floor: int
    total: int


def _log_size(c: ComponentChange) -> float:
    return abs(math.log(c.judged.ratio)) if c.judged.ratio else 0.0


def change_counts(changes: list[ComponentChange]) -> ChangeCounts:
    real = [c for c in changes if c.real]
    dets = [c.judged.detectable for c in changes if c.verdict == "inconclusive"
            and c.judged.detectable is not None and math.isfinite(c.judged.detectable)]
    return ChangeCounts(
        largest=max(real, key=_log_size) if real else None,
        noise=sum(c.verdict == "noise" for c in changes),
        inconclusive=sum(c.verdict == "inconclusive" for c in changes),
        smallest_detectable=min(dets) if dets else None,
        below_floor=sum(c.verdict == "below the floor" for c in changes),
        total=len(changes))
