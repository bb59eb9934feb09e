"""The seed study's cost model: weights read per step, effective bandwidth, and a what-if table.

A speculative round is modelled additively, as the seed does:

    round_ms = verify_ms + drafter_steps * drafter_step_ms + other_ms

where drafter_steps counts every drafter forward in a round (the steps of the engine's
declared drafting phase, and any other phase's: an MTP head's first draft in its accept hook)
and other_ms is everything else (the phases that play neither role, and non-drafter work).
verify_ms is the engine's declared verify phase. A what-if holds acceptance (emitted per
round), block, verify and other fixed and varies only the drafter step cost. Units: bytes,
ms, GB = 1e9 B. A record's cost section is built from these in harness.analyze.costreport.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass

from harness.analyze.roofline import DispatchFloor, Roofline, dispatch_floor, roofline
from harness.collect.models import Tensors, model_tensor_bytes, safetensors_tensor_bytes

__all__ = [
    "GB",
    "StepBytes",
    "Efficiency",
    "RoundModel",
    "Scenario",
    "WhatIfRow",
    "safetensors_tensor_bytes",
    "model_tensor_bytes",
    "weight_bytes",
    "lm_head_bytes",
    "embedding_row_bytes",
    "target_bytes_per_step",
    "drafter_bytes_per_step",
    "effective_bandwidth",
    "ms_at_bandwidth",
    "bandwidth_efficiency",
    "DispatchFloor",      # what bounds a step, bandwidth or dispatch: harness.analyze.roofline
    "Roofline",
    "dispatch_floor",
    "roofline",
    "calibrate_other_ms",
    "round_ms",
    "tokens_per_s",
    "speedup_vs_classic",
    "break_even_emitted",
    "round_cost_in_classic_steps",
    "what_if",
    "project_cli",
]

# {pairing: {"target" | "drafter": (directory, tensor table or why it could not be read)}}
ModelTables = dict[str, dict[str, tuple[str, "Tensors | str"]]]

GB = 1e9  # decimal gigabyte, as the seed uses (16.05 GB in 30.3 ms = 530 GB/s)

# --- (a) weights read per step --------------------------------------------------------------



def _tensors(model: str | os.PathLike[str] | Tensors) -> Tensors:
    """A model directory's tensor table, or the table itself when one is given (read earlier)."""
    return model if isinstance(model, dict) else model_tensor_bytes(model)


def _matches(name: str, prefixes: Sequence[str]) -> bool:
    return any(name.startswith(pre) for pre in prefixes)


def weight_bytes(model_dir: str | os.PathLike[str] | Tensors, exclude_prefixes: Sequence[str] = ()) -> int:
    """Sum of tensor bytes in a model directory, leaving out tensors whose name starts with an excluded prefix."""
    return sum(b for name, (b, _) in _tensors(model_dir).items() if not _matches(name, exclude_prefixes))


def lm_head_bytes(model_dir: str | os.PathLike[str] | Tensors, prefix: str = "lm_head.") -> int:
    """Bytes of the LM head (weight plus any quantization scales/biases): tensors named prefix*."""
    total = sum(b for name, (b, _) in _tensors(model_dir).items() if name.startswith(prefix))
    if total == 0:
        raise ValueError(f"{model_dir}: no tensors named {prefix}* (tied embeddings? pass the embedding prefix)")
    return total


def embedding_row_bytes(model_dir: str | os.PathLike[str] | Tensors, prefix: str = "model.embed_tokens.") -> int:
    """Bytes of one embedding row: for each tensor named prefix*, its bytes / its first dimension (the vocab)."""
    total = 0
    found = False
    for name, (b, shape) in _tensors(model_dir).items():
        if name.startswith(prefix):
            found = True
            if not shape or shape[0] <= 0:
                raise ValueError(f"{model_dir}: embedding tensor {name!r} has shape {shape}")
            total += math.ceil(b / shape[0])
    if not found:
        raise ValueError(f"{model_dir}: no tensors named {prefix}*")
    return total


@dataclass(frozen=True)
class StepBytes:
    """Weight bytes one forward step reads: the model's own tensors plus borrowed ones."""

    own_weights: int
    borrowed_lm_head: int = 0
    embedding_row: int = 0

    @property
    def total(self) -> int:
        return self.own_weights + self.borrowed_lm_head + self.embedding_row


def target_bytes_per_step(
    model_dir: str | os.PathLike[str] | Tensors,
    embedding_prefix: str | None = None,
) -> StepBytes:
    """Bytes a target decode step reads: every tensor; with embedding_prefix (untied models), the embedding
    table counts one row instead of the whole table."""
    if embedding_prefix is None:
        return StepBytes(own_weights=weight_bytes(model_dir))
    return StepBytes(
        own_weights=weight_bytes(model_dir, exclude_prefixes=(embedding_prefix,)),
        embedding_row=embedding_row_bytes(model_dir, embedding_prefix),
    )


def drafter_bytes_per_step(
    drafter_dir: str | os.PathLike[str] | Tensors,
    borrowed_lm_head_bytes: int = 0,
    embedding_row_bytes: int = 0,
    exclude_prefixes: Sequence[str] = (),
) -> StepBytes:
    """Bytes one drafter step reads: its own tensors (minus excluded prefixes) plus a borrowed LM head and
    embedding row, in bytes (e.g. lm_head_bytes(target_dir), embedding_row_bytes(target_dir))."""
    for name, v in (("borrowed_lm_head_bytes", borrowed_lm_head_bytes), ("embedding_row_bytes", embedding_row_bytes)):
        if isinstance(v, bool) or int(v) != v or v < 0:
            raise ValueError(f"{name}: must be a non-negative integer, got {v!r}")
    return StepBytes(
        own_weights=weight_bytes(drafter_dir, exclude_prefixes),
        borrowed_lm_head=int(borrowed_lm_head_bytes),
        embedding_row=int(embedding_row_bytes),
    )


# --- (b) bandwidth ------------------------------------------------------------------------

def _positive(name: str, v: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name}: must be a positive finite number, got {v!r}")
    return float(v)


def _non_negative(name: str, v: float) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ValueError(f"{name}: must be a non-negative finite number, got {v!r}")
    return float(v)


def effective_bandwidth(bytes_per_step: float, step_ms: float) -> float:
    """Effective memory bandwidth in GB/s (1e9 B/s): bytes_per_step / (step_ms / 1000) / 1e9."""
    return _non_negative("bytes_per_step", bytes_per_step) / (_positive("step_ms", step_ms) / 1000.0) / GB


def ms_at_bandwidth(bytes_per_step: float, gb_per_s: float) -> float:
    """Step time in ms if bytes_per_step were read at gb_per_s GB/s: bytes / (GB/s * 1e9) * 1000."""
    return _non_negative("bytes_per_step", bytes_per_step) / (_positive("gb_per_s", gb_per_s) * GB) * 1000.0


@dataclass(frozen=True)
class Efficiency:
    """Achieved GB/s against a peak; fraction and gap are None when the peak is unknown."""

    achieved_gb_s: float
    peak_gb_s: float | None
    fraction: float | None  # achieved / peak
    gap: float | None  # peak / achieved ("3.6x efficiency gap")

    @property
    def label(self) -> str:
        if self.peak_gb_s is None or self.fraction is None:
            return f"{self.achieved_gb_s:.1f} GB/s (unknown peak)"
        return f"{self.achieved_gb_s:.1f} GB/s, {100 * self.fraction:.1f}% of {self.peak_gb_s:g} GB/s"


def bandwidth_efficiency(achieved_gb_s: float, peak_gb_s: float | None) -> Efficiency:
    """achieved / peak GB/s; peak None gives fraction None and the label "unknown peak" (never guessed)."""
    achieved = _non_negative("achieved_gb_s", achieved_gb_s)
    if peak_gb_s is None:
        return Efficiency(achieved, None, None, None)
    peak = _positive("peak_gb_s", peak_gb_s)
    return Efficiency(achieved, peak, achieved / peak, (peak / achieved) if achieved > 0 else None)


# --- (c) what-if table, (d) break-even ---------------------------------------------------

@dataclass(frozen=True)
class RoundModel:
    """Measured inputs of the additive round model (all ms are per round except the per-step/token ones)."""

    classic_ms_per_token: float
    emitted_per_round: float
    verify_ms: float
    drafter_steps: float  # drafter forwards per round, all phases
    drafter_step_ms: float
    other_ms: float  # everything in a round that is neither verify nor a drafter forward

    def __post_init__(self) -> None:
        _positive("classic_ms_per_token", self.classic_ms_per_token)
        _positive("emitted_per_round", self.emitted_per_round)
        _positive("verify_ms", self.verify_ms)
        _non_negative("drafter_steps", self.drafter_steps)
        _non_negative("drafter_step_ms", self.drafter_step_ms)
        _non_negative("other_ms", self.other_ms)


def calibrate_other_ms(measured_round_ms: float, verify_ms: float, drafter_steps: float, drafter_step_ms: float) -> float:
    """other_ms that closes the measured round: round - verify - steps * step; ValueError if negative."""
    other = measured_round_ms - verify_ms - drafter_steps * drafter_step_ms
    if other < -1e-9:
        raise ValueError(
            f"measured round {measured_round_ms} ms is less than verify {verify_ms} + "
            f"{drafter_steps} x {drafter_step_ms} ms of drafter steps"
        )
    return max(0.0, other)


def round_ms(m: RoundModel, drafter_step_ms: float | None = None) -> float:
    """verify + drafter_steps * step + other, with the step cost replaced by drafter_step_ms if given."""
    step = m.drafter_step_ms if drafter_step_ms is None else _non_negative("drafter_step_ms", drafter_step_ms)
    return m.verify_ms + m.drafter_steps * step + m.other_ms


def tokens_per_s(emitted_per_round: float, round_ms_: float) -> float:
    """Decode throughput of rounds: emitted_per_round / round_ms * 1000."""
    return _positive("emitted_per_round", emitted_per_round) / _positive("round_ms", round_ms_) * 1000.0


def speedup_vs_classic(classic_ms_per_token: float, emitted_per_round: float, round_ms_: float) -> float:
    """Classic time for the round's tokens over the round's time: classic_ms * emitted / round_ms."""
    return _positive("classic_ms_per_token", classic_ms_per_token) * _positive(
        "emitted_per_round", emitted_per_round
    ) / _positive("round_ms", round_ms_)


def break_even_emitted(round_ms_: float, classic_ms_per_token: float) -> float:
    """Emitted tokens per round (per verify) at which a round of round_ms costs what classic decode does:
    round_ms / classic_ms_per_token. Numerically equal to round_cost_in_classic_steps."""
    return _positive("round_ms", round_ms_) / _positive("classic_ms_per_token", classic_ms_per_token)


def round_cost_in_classic_steps(round_ms_: float, classic_ms_per_token: float) -> float:
    """How many classic decode steps one round costs: round_ms / classic_ms_per_token."""
    return _positive("round_ms", round_ms_) / _positive("classic_ms_per_token", classic_ms_per_token)


@dataclass(frozen=True)
class Scenario:
    """A what-if: a name and the drafter step cost in ms; keep_other=False drops other_ms too (verify-only)."""

    name: str
    drafter_step_ms: float
    keep_other: bool = True


@dataclass(frozen=True)
class WhatIfRow:
    """One what-if scenario's projected round cost, throughput and speedup over classic decode."""

    name: str
    drafter_step_ms: float
    round_ms: float
    tokens_per_s: float
    speedup: float  # vs classic
    round_in_classic_steps: float
    break_even_emitted: float


FREE_DRAFTER = "free drafter"
VERIFY_ONLY = "verify-only ceiling"


def what_if(
    m: RoundModel,
    scenarios: Iterable[Scenario | tuple[str, float]] = (),
    measured_name: str = "measured",
) -> list[WhatIfRow]:
    """Rows: measured, each scenario, "free drafter" (0 ms steps, other held: the drafter-side ceiling)
    and "verify-only ceiling" (round = verify alone); emitted, verify and other held fixed."""
    rows: list[Scenario] = [Scenario(measured_name, m.drafter_step_ms)]
    for s in scenarios:
        rows.append(s if isinstance(s, Scenario) else Scenario(str(s[0]), float(s[1])))
    names = {r.name for r in rows}
    if FREE_DRAFTER not in names:
        rows.append(Scenario(FREE_DRAFTER, 0.0))
    if VERIFY_ONLY not in names:
        rows.append(Scenario(VERIFY_ONLY, 0.0, keep_other=False))
    out = []
    for s in rows:
        r = round_ms(m, s.drafter_step_ms) - (0.0 if s.keep_other else m.other_ms)
        out.append(
            WhatIfRow(
                name=s.name,
                drafter_step_ms=float(s.drafter_step_ms),
                round_ms=r,
                tokens_per_s=tokens_per_s(m.emitted_per_round, r),
                speedup=speedup_vs_classic(m.classic_ms_per_token, m.emitted_per_round, r),
                round_in_classic_steps=round_cost_in_classic_steps(r, m.classic_ms_per_token),
                break_even_emitted=break_even_emitted(r, m.classic_ms_per_token),
            )
        )
    return out


# --- `harness project` ---------------------------------------------------------------------

class _ArgError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    # argparse prints usage and exits on error; the CLI contract is one line on stderr and rc 2.
    def error(self, message: str) -> None:  # type: ignore[override]
        raise _ArgError(message)


def _number(flag: str, text: str, allow_zero: bool) -> float:
    try:
        v = float(text)
    except ValueError:
        raise _ArgError(f"{flag}: not a number: {text!r}") from None
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        need = "non-negative" if allow_zero else "positive"
        raise _ArgError(f"{flag}: must be a {need} finite number, got {text!r}")
    return v


def _parser() -> _Parser:
    p = _Parser(
        prog="harness project",
        description="What-if table of the additive round model: vary the drafter step cost, hold the rest.",
    )
    p.add_argument("--classic-ms", required=True, help="measured classic decode ms per token")
    p.add_argument("--emitted", required=True, help="emitted tokens per round (per verify forward)")
    p.add_argument("--verify-ms", required=True, help="verify forward ms per round")
    p.add_argument("--drafter-steps", required=True, help="drafter forwards per round, all phases")
    p.add_argument("--drafter-ms", required=True, help="measured ms per drafter step")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--other-ms", help="ms per round that is neither verify nor a drafter forward")
    g.add_argument("--round-ms", help="measured ms per round; other-ms is what closes it")
    p.add_argument("--scenario", action="append", default=[], metavar="NAME=MS",
                   help="a what-if drafter step cost (repeatable)")
    p.add_argument("--json", action="store_true", help="after the table, print one JSON line")
    return p


def _render(rows: Sequence[WhatIfRow]) -> str:
    head = ("scenario", "drafter step", "round", "tok/s", "vs classic", "classic steps")
    body = [
        (r.name, f"{r.drafter_step_ms:.2f} ms", f"{r.round_ms:.2f} ms", f"{r.tokens_per_s:.1f}",
         f"{r.speedup:.2f}x", f"{r.round_in_classic_steps:.2f}")
        for r in rows
    ]
    widths = [max(len(x[i]) for x in [head, *body]) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths)))
             for line in [head, *body]]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def project_cli(argv: Sequence[str] | None = None) -> int:
    """Body of `harness project`: print the what-if table (and with --json one JSON line); bad input -> one
    stderr line and 2."""
    try:
        try:
            ns = _parser().parse_args(list(argv) if argv is not None else None)
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        classic = _number("--classic-ms", ns.classic_ms, allow_zero=False)
        emitted = _number("--emitted", ns.emitted, allow_zero=False)
        verify = _number("--verify-ms", ns.verify_ms, allow_zero=False)
        steps = _number("--drafter-steps", ns.drafter_steps, allow_zero=True)
        step_ms = _number("--drafter-ms", ns.drafter_ms, allow_zero=True)
        # A round emits the target's own token plus at most one accepted draft per drafter step.
        if not 1.0 <= emitted <= steps + 1.0:
            raise _ArgError(f"--emitted: a round emits between 1 and drafter steps + 1 = {steps + 1:g} "
                            f"tokens, got {emitted:g}")
        if ns.other_ms is not None:
            other = _number("--other-ms", ns.other_ms, allow_zero=True)
        else:
            measured = _number("--round-ms", ns.round_ms, allow_zero=False)
            try:
                other = calibrate_other_ms(measured, verify, steps, step_ms)
            except ValueError as exc:
                raise _ArgError(f"--round-ms: {exc}") from None
        scenarios = []
        for spec in ns.scenario:
            name, sep, ms = spec.rpartition("=")
            if not sep or not name.strip():
                raise _ArgError(f"--scenario: expected NAME=MS, got {spec!r}")
            scenarios.append(Scenario(name.strip(), _number(f"--scenario {name.strip()}", ms, allow_zero=True)))
    except _ArgError as exc:
        print(f"harness: project: {exc}", file=sys.stderr)
        return 2
    model = RoundModel(classic, emitted, verify, steps, step_ms, other)
    rows = what_if(model, scenarios)
    classic_tps = 1000.0 / classic
    print(
        f"round = verify {verify:g} + {steps:g} x drafter step + other {other:.2f} ms; "
        f"{emitted:g} tokens/round; classic {classic:g} ms/token ({classic_tps:.2f} tok/s)"
    )
    print(_render(rows))
    print(
        f"break-even at the measured round: {rows[0].break_even_emitted:.3f} emitted per verify "
        "(projections from the cost model, not measurements)"
    )
    if ns.json:
        print(json.dumps({
            "kind": "harness.project",
            "model": asdict(model),
            "classic_tokens_per_s": classic_tps,
            "rows": [asdict(r) for r in rows],
        }, sort_keys=True))
    return 0
