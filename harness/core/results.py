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
from typing import TYPE_CHECKING, Any, TypeGuard, TypeVar

import msgspec

if TYPE_CHECKING:   # schema imports this module (decode_engine_result): no import cycle at run time
    from harness.core.schema import EngineResult

TIME = "a time must be a finite number >= 0"
RATE = "a throughput must be a finite number > 0"
COUNT = "a count must be a whole number >= 0"
TOKEN_ID = "a token id must be a whole number >= 0"


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


class _View(msgspec.Struct, kw_only=True):
    """A part of an engine result or a run as it came, each value as given (a value of the wrong
    type is what the gate names, so nothing is converted): read by field, checked below."""


class _SplitView(_View, kw_only=True):
    ms: Any = None


class _RoundView(_View, kw_only=True):
    verify_ms: Any = None


class _GateView(_View, kw_only=True):
    probe_ms: Any = None


class _DiagnosticsView(_View, kw_only=True):
    decode_ms: Any = None
    decode_tokens_per_s: Any = None
    ms_per_token: Any = None
    prefill_ms: Any = None
    probe_ms: Any = None
    profile_sync_ms: Any = None
    prompt_tokens: Any = None
    generated_tokens: Any = None
    proposed: Any = None
    accepted: Any = None
    per_step_tested: Any = None
    profile_syncs: Any = None
    phase_ms: Any = None
    counters: Any = None
    drafter_split: Any = None
    rounds_log: Any = None


class _ResultView(_View, kw_only=True):
    token_ids: Any = None
    gate: Any = None
    diagnostics: Any = None


class _RunView(_ResultView, kw_only=True):
    """A recorded run: its engine parts, and the engine's figures it keeps beside its
    diagnostics (harness.collect.runner._result_fields; ms_per_token only there), checked as the
    engine's own: a record may have been edited since."""
    decode_tokens_per_s: Any = None
    ms_per_token: Any = None
    prefill_ms: Any = None
    dispatch_measurement_ms: Any = None
    generated_tokens: Any = None


V = TypeVar("V", bound=_View)


def _view(x: Any, typ: type[V]) -> V:
    """x read as typ; a part that is no JSON object reads as empty, as an absent one."""
    if isinstance(x, Mapping):
        try:
            return msgspec.convert(dict(x), typ)
        except msgspec.ValidationError:
            pass
    return typ()


def _diagnostics_problems(d: _DiagnosticsView, gate: _GateView) -> Iterator[str | None]:
    yield _time("diagnostics.decode_ms", d.decode_ms, positive=True)
    x = d.decode_tokens_per_s
    yield None if x is None or usable(x) else f"diagnostics.decode_tokens_per_s is {shown(x)}, {RATE}"
    yield _time("diagnostics.ms_per_token", d.ms_per_token, positive=True)
    yield _time("diagnostics.prefill_ms", d.prefill_ms)
    yield _time("diagnostics.probe_ms", d.probe_ms)
    yield _time("diagnostics.profile_sync_ms", d.profile_sync_ms)
    for k, x in _mapping(d.phase_ms).items():
        yield _time(f"diagnostics.phase_ms.{k}", x)
    for k, x in _mapping(d.counters).items():
        yield _count(f"diagnostics.counters.{k}", x)
    for phase, split in _mapping(d.drafter_split).items():
        for k, x in _mapping(_view(split, _SplitView).ms).items():
            yield _time(f"diagnostics.drafter_split.{phase}.ms.{k}", x)
    for i, e in enumerate(d.rounds_log or []):
        yield _time(f"diagnostics.rounds_log[{i}].verify_ms", _view(e, _RoundView).verify_ms)
    yield _time("gate.probe_ms", gate.probe_ms)
    # Not `rounds`: an engine may say -1 for rounds it did not count (an uninstrumented mode).
    for name, x in (("prompt_tokens", d.prompt_tokens), ("proposed", d.proposed), ("accepted", d.accepted),
                    ("per_step_tested", d.per_step_tested), ("profile_syncs", d.profile_syncs)):
        yield _count(f"diagnostics.{name}", x)


def _mapping(x: Any) -> Mapping[str, Any]:
    return x if isinstance(x, Mapping) else {}


def result_problem(res: Mapping[str, Any]) -> str | None:
    """The first value an engine result (as builtins: token_ids, gate, diagnostics, ...) cannot
    hold, as one line "FIELD is VALUE, what it must be"; None when every value is plausible."""
    problem = _engine_problem(_view(res, _ResultView))
    return problem or _first_non_finite(res)


def _engine_problem(res: _ResultView) -> str | None:
    d = _view(res.diagnostics, _DiagnosticsView)
    for problem in _diagnostics_problems(d, _view(res.gate, _GateView)):
        if problem:
            return problem
    ids, n = res.token_ids, d.generated_tokens
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
    return None


def run_problem(run: Mapping[str, Any]) -> str | None:
    """What a recorded run holds that no engine result may: result_problem over its engine
    parts, then its own copies of them and any non-finite number anywhere in it."""
    r = _view(run, _RunView)
    problem = _engine_problem(r) or _first_non_finite(
        {"token_ids": r.token_ids, "gate": _mapping(r.gate), "diagnostics": _mapping(r.diagnostics)})
    if problem:
        return problem
    tps = r.decode_tokens_per_s
    if tps is not None and not usable(tps):
        return f"decode_tokens_per_s is {shown(tps)}, {RATE}"
    for name, x in (("ms_per_token", r.ms_per_token), ("prefill_ms", r.prefill_ms),
                    ("dispatch_measurement_ms", r.dispatch_measurement_ms)):
        p = _time(name, x, positive=name == "ms_per_token")
        if p:
            return p
    n, ids = r.generated_tokens, r.token_ids
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
