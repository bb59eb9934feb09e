"""An engine result's derived timings, and the values a result may hold: the one gate every
engine result passes before it becomes a run, and the same check over a recorded run.

An engine's NaN, infinity or negative time once went into the record as a successful run: the
session ended in a traceback in the statistics, the record held a bare NaN (not JSON) and every
report of it failed. `result_problem` names the first value no engine can have measured (a
non-finite or negative time, a non-finite or non-positive tok/s, a token id that is no id, no
token generated, a count that contradicts the ids, any non-finite number); the runner fails the
run with it (harness.collect.runner), and a record written before this check has such runs set
aside on load (harness.collect.recordcheck).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeGuard

if TYPE_CHECKING:   # schema imports this module (decode_engine_result): no import cycle at run time
    from harness.core.schema import EngineResult

TIME = "a time must be a finite number >= 0"
RATE = "a throughput must be a finite number > 0"
COUNT = "a count must be a whole number >= 0"
TOKEN_ID = "a token id must be a whole number >= 0"
# The times an engine reports besides its phase totals, in the order a problem is named: the
# decode timings first (the others are derived from whichever the engine gave).
DIAG_TIMINGS = ("decode_ms", "decode_tokens_per_s", "ms_per_token", "prefill_ms", "probe_ms", "profile_sync_ms")
# Not `rounds`: an engine may say -1 for rounds it did not count (an uninstrumented mode).
DIAG_COUNTS = ("prompt_tokens", "proposed", "accepted", "per_step_tested", "profile_syncs")


def usable(x: Any) -> TypeGuard[float]:
    """A time or rate a figure may be derived from: a finite number > 0 (never derive from
    a value the gate refuses, so that the gate names the value the engine gave)."""
    return _is_number(x) and math.isfinite(x) and x > 0


def complete_timings(res: EngineResult) -> EngineResult:
    """Fill the token count and the three timing forms from whichever the engine gave, and the
    mode from whichever field says what ran."""
    d = res.diagnostics
    if d.generated_tokens is None and res.token_ids is not None:
        d.generated_tokens = len(res.token_ids)
    n = d.generated_tokens if usable(d.generated_tokens) else None
    if d.decode_ms is None and n and usable(d.ms_per_token):
        d.decode_ms = d.ms_per_token * n
    if d.decode_ms is None and n and usable(d.decode_tokens_per_s):
        d.decode_ms = 1000.0 * n / d.decode_tokens_per_s
    if d.ms_per_token is None:
        if usable(d.decode_ms) and n:
            d.ms_per_token = d.decode_ms / n
        elif usable(d.decode_tokens_per_s):
            d.ms_per_token = 1000.0 / d.decode_tokens_per_s
    if d.decode_tokens_per_s is None and usable(d.ms_per_token):
        d.decode_tokens_per_s = 1000.0 / d.ms_per_token
    # Acceptance from the counts when the engine gave counts only.
    if d.acceptance_rate is None and d.proposed and d.accepted is not None:
        d.acceptance_rate = d.accepted / d.proposed
    # What ran: diagnostics.mode, else arm.mode ("what actually ran"), else gate.engaged. Every
    # analysis reads diagnostics.mode; an engine that said only one of the others once read as
    # "declined (classic decode)" with its gate passed and its rounds counted.
    if d.mode is None:
        engaged = res.gate.engaged
        d.mode = res.arm.mode or (None if engaged is None else "speculative" if engaged else "classic")
    return res


def missing_minimum(res: EngineResult) -> list[str]:
    """What the minimal contract lacks: a token count and a decode timing."""
    d = res.diagnostics
    out = []
    if res.token_ids is None and d.generated_tokens is None:
        out.append("token_ids or diagnostics.generated_tokens")
    if d.decode_ms is None and d.ms_per_token is None and d.decode_tokens_per_s is None:
        out.append("a decode timing (diagnostics.decode_ms, ms_per_token or decode_tokens_per_s)")
    return out


# --- the gate ------------------------------------------------------------------------------

def _is_number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def shown(x: Any) -> str:
    """A value as the error line gives it: -5, 0.625, nan, inf; anything else as its repr."""
    if _is_number(x):
        return format(x, ".15g") if isinstance(x, float) else str(x)
    return repr(x)


def _time(name: str, x: Any, positive: bool = False) -> str | None:
    if x is None:
        return None
    if not _is_number(x) or not math.isfinite(x) or x < 0:
        return f"{name} is {shown(x)}, {TIME}"
    if positive and x == 0:
        return f"{name} is 0, a decode of at least one token takes time"
    return None


def _count(name: str, x: Any) -> str | None:
    if x is None or (isinstance(x, int) and not isinstance(x, bool) and x >= 0):
        return None
    return f"{name} is {shown(x)}, {COUNT}"


def _non_finite(x: Any, where: str) -> Iterator[tuple[str, float]]:
    """(path, value) of each non-finite number under `where` (strict JSON has none)."""
    if isinstance(x, float) and not math.isfinite(x):
        yield where, x
    elif isinstance(x, Mapping):
        for k, v in x.items():
            yield from _non_finite(v, f"{where}.{k}" if where else str(k))
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from _non_finite(v, f"{where}[{i}]")


def _first_non_finite(x: Any) -> str | None:
    bad = next(_non_finite(x, ""), None)
    return None if bad is None else f"{bad[0]} is {shown(bad[1])}, a number must be finite"


def _diagnostics_problems(d: Mapping[str, Any], gate: Mapping[str, Any]) -> Iterator[str | None]:
    for k in DIAG_TIMINGS:
        x = d.get(k)
        if k == "decode_tokens_per_s":
            yield None if x is None or usable(x) else f"diagnostics.{k} is {shown(x)}, {RATE}"
        else:
            yield _time(f"diagnostics.{k}", x, positive=k in ("decode_ms", "ms_per_token"))
    for k, x in _mapping(d.get("phase_ms")).items():
        yield _time(f"diagnostics.phase_ms.{k}", x)
    for k, x in _mapping(d.get("counters")).items():
        yield _count(f"diagnostics.counters.{k}", x)
    for phase, split in _mapping(d.get("drafter_split")).items():
        for k, x in _mapping(_mapping(split).get("ms")).items():
            yield _time(f"diagnostics.drafter_split.{phase}.ms.{k}", x)
    for i, e in enumerate(d.get("rounds_log") or []):
        yield _time(f"diagnostics.rounds_log[{i}].verify_ms", _mapping(e).get("verify_ms"))
    yield _time("gate.probe_ms", gate.get("probe_ms"))
    for k in DIAG_COUNTS:
        yield _count(f"diagnostics.{k}", d.get(k))


def _mapping(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def result_problem(res: Mapping[str, Any]) -> str | None:
    """The first value an engine result (as builtins: token_ids, gate, diagnostics, ...) cannot
    hold, as one line "FIELD is VALUE, what it must be"; None when every value is plausible."""
    d, gate = _mapping(res.get("diagnostics")), _mapping(res.get("gate"))
    for problem in _diagnostics_problems(d, gate):
        if problem:
            return problem
    ids, n = res.get("token_ids"), d.get("generated_tokens")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 0):
        return f"diagnostics.generated_tokens is {shown(n)}, {COUNT}"
    if n == 0 or (n is None and ids == []):
        return "diagnostics.generated_tokens is 0, a run must generate at least one token"
    if isinstance(ids, list):
        for i, t in enumerate(ids):
            if not isinstance(t, int) or isinstance(t, bool) or t < 0:
                return f"token_ids[{i}] is {shown(t)}, {TOKEN_ID}"
        if n is not None and n != len(ids):
            return f"diagnostics.generated_tokens is {n} but token_ids holds {len(ids)} ids; the two must agree"
    return _first_non_finite(res)


# The engine's figures the run keeps beside its diagnostics (harness.collect.runner._result_fields;
# ms_per_token only there), checked as the engine's own: a record may have been edited since.
RUN_TIMES = ("ms_per_token", "prefill_ms", "dispatch_measurement_ms")


def run_problem(run: Mapping[str, Any]) -> str | None:
    """What a recorded run holds that no engine result may: result_problem over its engine
    parts, then its own copies of them and any non-finite number anywhere in it."""
    problem = result_problem({"token_ids": run.get("token_ids"), "gate": _mapping(run.get("gate")),
                              "diagnostics": _mapping(run.get("diagnostics"))})
    if problem:
        return problem
    tps = run.get("decode_tokens_per_s")
    if tps is not None and not usable(tps):
        return f"decode_tokens_per_s is {shown(tps)}, {RATE}"
    for k in RUN_TIMES:
        p = _time(k, run.get(k), positive=k == "ms_per_token")
        if p:
            return p
    n, ids = run.get("generated_tokens"), run.get("token_ids")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n <= 0):
        return f"generated_tokens is {shown(n)}, a run must generate at least one token"
    if isinstance(ids, list) and n is not None and n != len(ids):
        return f"generated_tokens is {n} but token_ids holds {len(ids)} ids; the two must agree"
    return _first_non_finite(run)


def _non_finite_number(x: Any) -> bool:
    return isinstance(x, float) and not math.isfinite(x)


def scrub_non_finite(x: Any) -> Any:
    """x without a non-finite number, so strict JSON can hold it: left out of an object (absent
    is not reported, as the schema reads it: a phase's ms map has no null), null in a list."""
    if _non_finite_number(x):
        return None
    if isinstance(x, dict):
        return {k: scrub_non_finite(v) for k, v in x.items() if not _non_finite_number(v)}
    if isinstance(x, list):
        return [scrub_non_finite(v) for v in x]
    return x
