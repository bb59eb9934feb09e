"""An engine that prints text: the parser its suite declares (`[engines.NAME.parse]`).

Either regular expressions for named figures (token ids, decode timing, phases, gate, overrides,
acceptance counts) or a Python function `module:function` in the engine's tree that takes
(stdout, stderr) and returns the contract's result dict. Both produce the same dict a JSON engine
prints, decoded by `decode_engine_result` and then checked by the runner's one gate
(`harness.core.results.result_problem`), so phases, identity and the gate work as for JSON.
Checked when the suite is read (a bad regex, a missing group, an unimportable function: one line);
a pattern that does not match fails the run, naming its key.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import msgspec

from harness.core.schema import (
    ArmInfo,
    Diagnostics,
    EngineResult,
    Gate,
    GateOutcome,
    Mode,
    ResultError,
    decode_engine_result,
    to_builtins,
)

# Figures one capture group reads as a number, each into the diagnostics field of its name.
NUMBERS = ("decode_ms", "decode_tokens_per_s", "ms_per_token", "prefill_ms", "generated_tokens",
           "prompt_tokens", "proposed", "accepted", "rounds")
COUNTS = ("generated_tokens", "prompt_tokens", "proposed", "accepted", "rounds")
# Figures a run that decoded classic does not print (block 1, or the gate declined).
SPECULATIVE_ONLY = ("proposed", "accepted", "rounds")
GATES = ("gate_overridden", "gate_declined", "gate_passed")   # the first that matches decides
TEXTS = ("tokens", "text", "gate_reading", "overrides")
KEYS = ("function", *NUMBERS, *GATES, *TEXTS, "phases")
TOKEN_IDS = re.compile(r"^[\s,\[\]]*\d+(?:[\s,]+\d+)*[\s,\]]*$")


_GATE_OUTCOMES: dict[str, GateOutcome] = {"gate_overridden": "overridden", "gate_declined": "declined",
                                          "gate_passed": "passed"}


class _Table(msgspec.Struct, kw_only=True):
    """The parse table's fields read by name. Values stay untyped here: `_pattern` and
    `_function` check them, each with the suite's one-line message."""
    function: Any = None
    phases: Any = None
    tokens: Any = None
    text: Any = None
    gate_reading: Any = None
    overrides: Any = None


@dataclass(frozen=True)
class _Texts:
    tokens: re.Pattern[str] | None
    text: re.Pattern[str] | None
    gate_reading: re.Pattern[str] | None
    overrides: re.Pattern[str] | None


class SpecError(ValueError):
    """A parse table the suite cannot use: (the suite key, what), for the suite's one-line error."""

    def __init__(self, key: str, what: str):
        super().__init__(f"{key}: {what}")
        self.key, self.what = key, what


@dataclass(frozen=True)
class TextParser:
    """A compiled parse table: patterns (with phases), or the engine's own function."""
    spec: dict[str, Any]                                   # as declared, for the record
    numbers: dict[str, re.Pattern[str]] = field(default_factory=dict)   # NUMBERS key -> pattern
    gates: dict[str, re.Pattern[str]] = field(default_factory=dict)     # GATES key -> pattern, in GATES order
    gate_reading: re.Pattern[str] | None = None
    tokens: re.Pattern[str] | None = None
    text: re.Pattern[str] | None = None
    overrides: re.Pattern[str] | None = None
    phases: dict[str, re.Pattern[str]] = field(default_factory=dict)     # phase -> pattern
    function: Callable[[str, str], Any] | None = None
    function_ref: str = ""                                 # its `module:function`, for messages

    def result(self, stdout: str, stderr: str, base: ArmInfo) -> EngineResult:
        """The run's result; `base` is what the harness knows of the arm (its `arm` block).
        ResultError names the pattern key that failed."""
        if self.function is not None:
            name = self.function_ref
            try:
                got = self.function(stdout, stderr)
            except Exception as e:  # the engine's own code may fail in any way: this run fails
                raise ResultError(f"parse.function {name} raised {type(e).__name__}: {e}") from None
            if not isinstance(got, dict):
                raise ResultError(f"parse.function {name} returned {type(got).__name__}, not a result dict")
            return decode_engine_result(got)
        return decode_engine_result(self._figures(stdout, stderr, base))

    def _figures(self, stdout: str, stderr: str, base: ArmInfo) -> dict[str, Any]:
        """The result's JSON object, as a JSON engine would print it, for the one strict decode."""
        classic_arm = base.block == 1
        gate = _gate(self.gates, self.gate_reading, stdout, stderr, classic_arm)
        classic = classic_arm or gate.outcome == "declined"
        mode: Mode = "classic" if classic else "speculative"
        figures: dict[str, float | int] = {}
        for key, rx in self.numbers.items():
            m = _last(rx, stdout, stderr)
            if m is not None:
                figures[key] = _number(key, m, whole=key in COUNTS)
            elif not (classic and key in SPECULATIVE_ONLY):
                raise _no_match(key)
            elif key == "rounds":
                figures[key] = 0   # classic decode runs no rounds (the contract's 0)
        phase_ms = {}
        for phase, rx in self.phases.items():
            m = _last(rx, stdout, stderr)
            if m is None:
                if classic:
                    continue
                raise _no_match(f"phases.{phase}")
            phase_ms[phase] = _number(f"phases.{phase}", m)
        try:
            diag = msgspec.convert(figures, Diagnostics)
        except msgspec.ValidationError as e:
            raise ResultError(f"result JSON does not match the engine contract: {e}") from None
        diag.mode = mode
        diag.phase_ms = phase_ms
        token_ids = None
        if self.tokens is not None:
            m = _last(self.tokens, stdout, stderr)
            if m is None:
                raise _no_match("tokens")
            ids = m.group(1) or ""
            if not TOKEN_IDS.match(ids):
                raise ResultError(f"parse.tokens captured {_short(ids)}, not a list of token ids")
            token_ids = [int(x) for x in re.findall(r"\d+", ids)]
        text = None
        if self.text is not None:
            m = _last(self.text, stdout, stderr)
            if m is None:
                raise _no_match("text")
            text = m.group(1) or ""
        overrides = {} if self.overrides is None else _overrides(self.overrides, stdout, stderr)
        res = EngineResult(arm=msgspec.structs.replace(base, mode=mode), gate=gate, diagnostics=diag,
                           token_ids=token_ids, text=text, overrides=overrides)
        built: dict[str, Any] = to_builtins(res)
        return built


def _last(rx: re.Pattern[str], stdout: str, stderr: str) -> re.Match[str] | None:
    """The last match in stdout, else in stderr (a log line may go to either)."""
    for stream in (stdout, stderr):
        ms = list(rx.finditer(stream))
        if ms:
            return ms[-1]
    return None


def _no_match(key: str) -> ResultError:
    return ResultError(f"parse.{key} matched nothing in stdout or stderr")


def _short(s: str) -> str:
    return repr(s if len(s) <= 60 else s[:57] + "...")


def _number(key: str, m: re.Match[str], whole: bool = False) -> float | int:
    s = (m.group(1) or "").strip()   # an optional group that took no part reads ""
    try:
        return int(s) if whole else float(s)
    except ValueError:
        what = "a whole number" if whole else "a number"
        raise ResultError(f"parse.{key} captured {_short(s)}, not {what}") from None


def _gate(gates: dict[str, re.Pattern[str]], reading_rx: re.Pattern[str] | None, stdout: str, stderr: str,
          classic_arm: bool) -> Gate:
    """The gate block: the first gate pattern that matches decides; none declared: unknown."""
    declared = list(gates)
    if not declared:
        return Gate(outcome="unknown")
    reading = ""
    if reading_rx is not None:
        m = _last(reading_rx, stdout, stderr)
        reading = " ".join((m.group(1) or "").split()) if m else ""   # one line, as labels quote it
    for key, rx in gates.items():
        if _last(rx, stdout, stderr) is not None:
            outcome = _GATE_OUTCOMES[key]
            return Gate(outcome=outcome, engaged=outcome != "declined", reading=reading)
    if classic_arm:
        return Gate(outcome="not_applicable", engaged=False, reading=reading)
    raise ResultError(f"parse: no gate pattern matched ({', '.join(f'parse.{k}' for k in declared)})")


def _overrides(rx: re.Pattern[str], stdout: str, stderr: str) -> dict[str, str]:
    """Every NAME=VALUE the pattern matches, in both streams; none is no override."""
    out: dict[str, str] = {}
    for stream in (stdout, stderr):
        for m in rx.finditer(stream):
            s = (m.group(1) if rx.groups else m.group(0)).strip()
            name, eq, value = s.partition("=")
            if not eq or not name.strip():
                raise ResultError(f"parse.overrides matched {_short(s)}, not NAME=VALUE")
            out[name.strip()] = value.strip()
    return out


# --- the suite's declaration -------------------------------------------------------------

def compile_spec(raw: Any, base_dir: Path, key: str = "parse") -> TextParser:
    """A parse table (the suite's `key`) checked and compiled; SpecError when it is not usable."""
    if not isinstance(raw, dict):
        raise SpecError(key, f"expected a table, got {raw!r}")
    for k in raw:
        if k not in KEYS:
            raise SpecError(f"{key}.{k}", f"unknown field (known: {', '.join(KEYS)})")
    table = msgspec.convert(raw, _Table)
    if table.function is not None:
        if len(raw) > 1:
            raise SpecError(f"{key}.function", "give either function or patterns, not both")
        return TextParser(spec=dict(raw), function=_function(table.function, base_dir, f"{key}.function"),
                          function_ref=str(table.function))
    # Figures and gates by name, in the table's order; the texts by their fields.
    patterns = {k: _pattern(f"{key}.{k}", rx, groups=0 if k in GATES else 1)
                for k, rx in raw.items() if k in NUMBERS or k in GATES}
    texts = _Texts(
        tokens=None if table.tokens is None else _pattern(f"{key}.tokens", table.tokens, 1),
        text=None if table.text is None else _pattern(f"{key}.text", table.text, 1),
        gate_reading=None if table.gate_reading is None else _pattern(f"{key}.gate_reading", table.gate_reading, 1),
        overrides=None if table.overrides is None else _pattern(f"{key}.overrides", table.overrides, 0))
    phases_raw = {} if table.phases is None else table.phases
    if not isinstance(phases_raw, dict):
        raise SpecError(f"{key}.phases", "expected a table: phase = pattern")
    phases = {name: _pattern(f"{key}.phases.{name}", rx, 1) for name, rx in phases_raw.items()}
    if texts.tokens is None and "generated_tokens" not in patterns:
        raise SpecError(key, "needs a token count: tokens (the ids) or generated_tokens")
    if not any(k in patterns for k in ("decode_ms", "ms_per_token", "decode_tokens_per_s")):
        raise SpecError(key, "needs a decode timing: decode_ms, ms_per_token or decode_tokens_per_s")
    if texts.gate_reading is not None and not any(k in patterns for k in GATES):
        raise SpecError(f"{key}.gate_reading", "needs a gate pattern too (gate_passed, gate_declined or "
                                               "gate_overridden)")
    # As declared, the phases last (an empty phases table is left out).
    spec = {k: v for k, v in raw.items() if k != "phases"} | ({"phases": dict(phases_raw)} if phases else {})
    return TextParser(spec=spec, numbers={k: patterns[k] for k in NUMBERS if k in patterns},
                      gates={k: patterns[k] for k in GATES if k in patterns},
                      gate_reading=texts.gate_reading, tokens=texts.tokens, text=texts.text,
                      overrides=texts.overrides, phases=phases)


def _pattern(key: str, rx: Any, groups: int) -> re.Pattern[str]:
    if not isinstance(rx, str) or not rx:
        raise SpecError(key, f"expected a regular expression (a non-empty string), got {rx!r}")
    try:
        c = re.compile(rx)
    except re.error as e:
        raise SpecError(key, f"not a valid regular expression: {e}") from None
    if c.groups < groups:
        raise SpecError(key, "needs a capture group around the value")
    return c


def _function(ref: Any, base_dir: Path, key: str) -> Callable[[str, str], Any]:
    """`module:function`, imported with the suite's directory (the engine's tree) first on the path."""
    if not isinstance(ref, str) or ref.count(":") != 1 or not all(ref.split(":")):
        raise SpecError(key, f"expected \"module:function\", got {ref!r}")
    mod_name, fn_name = ref.split(":")
    where = str(base_dir)
    sys.path.insert(0, where)
    try:
        importlib.invalidate_caches()
        mod = importlib.import_module(mod_name)
    except Exception as e:  # the engine's module may fail to import in any way: one line
        raise SpecError(key, f"cannot import {mod_name!r} (from {where} or the path): "
                                    f"{type(e).__name__}: {e}") from None
    finally:
        sys.path.remove(where)
    fn = getattr(mod, fn_name, None)
    if not callable(fn):
        raise SpecError(key, f"module {mod_name!r} has no function {fn_name!r}")
    # The engine's own function: getattr gives Any, and only its being callable is known here.
    return cast("Callable[[str, str], Any]", fn)
