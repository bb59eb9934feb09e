"""A record's cost model: bytes per step, effective bandwidth, what-if and break-even, typed.

Weights are counted from the pairings' tensor tables (harness.analyze.costmodel); step times
come from the record. The peak is the matching host spec's figure, or unknown when there is
none: never a guess. The what-if needs the drafter step cost, which only a profile-mode arm
attributes (default mode leaves the drafter's device work in the target's verify phase), and
the engine's declared drafting and verify phases (roles in suite.engines); without them the
result says why, and holds the break-even figures only. harness.render.reportcost words it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import msgspec

from harness.analyze import costmodel as cm
from harness.analyze import rounds
from harness.analyze.comparisons import scaling_for
from harness.analyze.rounds import ProfileComparison, RoundSplit
from harness.collect.models import Tensors
from harness.core import declare
from harness.core.runs import AnyRecord, record_core
from harness.core.schema import ArmInfo, Run

EMBED = "model.embed_tokens."

ModelTables = cm.ModelTables

# Why a cost section is unavailable, or has no what-if table (CostSection.unavailable, .no_what_if).
NO_CLASSIC = "no classic arm"            # nothing to measure a step against
NO_BYTES = "no bytes"                    # the target's bytes per step are unknown (bytes_error says why)
NO_PROFILE = "no profile comparison"     # no profile-mode arm with an unprofiled twin
NO_ROLES = "no roles"                    # the engine declares no drafting or no verify phase
NO_STEP = "no drafter step"              # the profiled arm drafted nothing, or no drafter directory
NO_PHASES = "phases not reported"        # a run of the pair did not report a declared role's phase


@dataclass(frozen=True)
class Bytes:
    rows: list[tuple[str, int]]          # (tensor set, bytes)
    total: int
    note: str = ""


@dataclass(frozen=True)
class BreakEven:
    """An engaged, unprofiled speculative arm's round against its classic reference."""

    arm: str
    prompt: str
    classic_arm: str
    round_ms: float
    emitted_per_verify: float
    break_even_emitted: float            # emitted per verify at which a round costs classic's time
    classic_steps: float                 # the round's cost in classic decode steps


@dataclass(frozen=True)
class Peak:
    host_spec: str | None                # the matching host spec's name; None: none matches
    gb_s: float | None                   # its peak bandwidth; None: unknown
    source: str = ""                     # where the host spec's figure (or its absence) comes from


@dataclass(frozen=True)
class RoundBasis:
    """What the round model was calibrated on: the unprofiled round, its draft + verify time
    split in the profiled arm's proportions."""

    arm: str                             # the unprofiled arm
    prompt: str
    round_ms: float                      # its measured round
    profiled_arm: str
    draft_phase: str                     # the engine's declared drafting and verify phases
    verify_phase: str
    draft_verify_ms: float               # the two phases' unprofiled time per round
    drafter_share: float                 # the drafting phase's share of the two, profiled
    classic_ms: float


@dataclass
class CostSection:
    unavailable: str | None = None       # NO_CLASSIC | NO_BYTES; None: the section is available
    bytes_error: str = ""
    target_dir: str = ""
    drafter_dir: str = ""
    target: Bytes | None = None
    drafter: Bytes | None = None
    classic_arm: str = ""
    prompt: str = ""
    target_step_ms: float | None = None
    target_eff: cm.Efficiency | None = None
    drafter_step_ms: float | None = None
    drafter_eff: cm.Efficiency | None = None
    peak: Peak = Peak(None, None)
    model: cm.RoundModel | None = None
    basis: RoundBasis | None = None
    roofline: cm.Roofline | None = None  # what bounds the target step: bandwidth or dispatch
    what_if: list[cm.WhatIfRow] = field(default_factory=list)
    break_even: list[BreakEven] = field(default_factory=list)
    no_what_if: str | None = None        # NO_PROFILE | NO_ROLES | NO_STEP | NO_PHASES
    profile_vars: tuple[str, ...] = ()   # every profile variable the record's engines declare
    verify_phase: str | None = None      # the modelled arm's engine's verify phase
    profiled_arm: str = ""               # the profile-mode arm the drafter step comes from
    missing_roles: tuple[str, ...] = ()  # roles the profiled arm's engine does not declare

    @property
    def available(self) -> bool:
        return self.unavailable is None


def target_bytes(tensors: Tensors) -> Bytes:
    untied = any(n.startswith("lm_head.") for n in tensors)
    if untied and any(n.startswith(EMBED) for n in tensors):
        sb = cm.target_bytes_per_step(tensors, embedding_prefix=EMBED)
        return Bytes([("weights except the embedding table", sb.own_weights),
                      ("embedding row lookup", sb.embedding_row)], sb.total)
    sb = cm.target_bytes_per_step(tensors)
    note = "tied embeddings: the embedding table is also the LM head, read in full every step" \
        if any(n.startswith(EMBED) for n in tensors) else ""
    return Bytes([(f"target weights ({len(tensors)} tensors)", sb.total)], sb.total, note)


class Quantization(msgspec.Struct, kw_only=True):
    """An engine's `drafter_quantization` block, as far as the bytes estimate reads it."""
    quantized: bool | None = None
    how: str | None = None             # "at load": the engine quantized the weights as it loaded them
    bits: int | None = None
    group_size: int | None = None
    linear_layers: int | None = None   # the layers it quantized


class Borrows(msgspec.Struct, kw_only=True):
    """What an MTP head reads from the target every step: each role's tensor-name prefix."""
    lm_head: str | None = None
    embedding: str | None = None


def _quantization(block: dict[str, Any] | None) -> Quantization:
    """The block typed; one the estimate cannot read (a foreign engine's own shape) reads as none."""
    try:
        return msgspec.convert(block or {}, Quantization)
    except msgspec.ValidationError:
        return Quantization()


def _quantized_estimate(tensors: dict[str, tuple[int, list[int]]], q: Quantization) -> int | None:
    """Bytes after the engine's load-time quantization, when the record says which layers it took.

    Candidates are the 2-D non-embedding weights whose input width divides the group; the
    estimate is used only if their count equals the record's `linear_layers` (else None).
    """
    bits, group, count = q.bits, q.group_size, q.linear_layers
    if bits is None or group is None or count is None:
        return None
    cands = {n: v for n, v in tensors.items() if n.endswith(".weight") and len(v[1]) == 2
             and not n.startswith(EMBED) and v[1][-1] % group == 0}
    if len(cands) != count:
        return None
    total = sum(b for n, (b, _) in tensors.items() if n not in cands)
    for b, shape in cands.values():
        numel = shape[0] * shape[1]
        elem = b // numel
        total += numel * bits // 8 + 2 * (numel // group) * elem   # packed weights + scales + biases
    return total


def drafter_bytes(tensors: Tensors, quantization: dict[str, Any] | None) -> Bytes:
    disk = sum(b for b, _ in tensors.values())
    q = _quantization(quantization)
    if q.quantized and q.how == "at load":
        est = _quantized_estimate(tensors, q)
        if est is not None:
            return Bytes([(f"drafter weights, {q.bits}-bit group {q.group_size} as quantized at load "
                           f"({q.linear_layers} linear layers; {disk:,} B on disk)", est)], est,
                         "estimated from the checkpoint's tensor shapes and the record's quantization block")
        return Bytes([(f"drafter weights on disk ({len(tensors)} tensors)", disk)], disk,
                     "the engine quantized the drafter at load but its layers could not be matched: "
                     "on-disk bytes overstate what a step reads")
    return Bytes([(f"drafter weights ({len(tensors)} tensors)", disk)], disk)


def with_borrowed(own: Bytes, target: Tensors, borrows: dict[str, str]) -> Bytes:
    """A drafter that reads target tensors every step (an MTP head: the target's LM head in
    full, one embedding row): their bytes from the target's table, beside its own."""
    rows, total = list(own.rows), own.total
    roles = msgspec.convert(borrows, Borrows)
    head = roles.lm_head
    if head:
        names = sorted(n.rsplit(".", 1)[-1] for n in target if n.startswith(head))
        n = cm.lm_head_bytes(target, head)
        rows.append((f"borrowed target LM head (`{head}*`: {', '.join(names)})", n))
        total += n
    emb = roles.embedding
    if emb:
        n = cm.embedding_row_bytes(target, emb)
        rows.append((f"embedding row (`{emb}*`, one row per step)", n))
        total += n
    share = f"; borrowed tensors are {(total - own.total) / total:.0%} of a step's bytes" if total else ""
    return Bytes(rows, total, "; ".join(x for x in (own.note, f"reads the target's tensors it borrows{share}") if x))


# (arm, prompt) -> (classic arm, its median ms/token): the summary's classic reference, which
# prefers the same engine, so a reference-BLAS command arm is held against its own classic.
ClassicRef = dict[tuple[str, str], tuple[str, float]]


def build(record: AnyRecord, runs: list[Run], classic_ref: ClassicRef, splits: list[RoundSplit],
          profiles: list[ProfileComparison], host_spec: dict[str, Any] | None,
          models: ModelTables) -> CostSection:
    """runs: the record's runs, typed. models: each pairing's target and drafter tensor tables,
    read by the caller: (directory, table) or (directory, why it could not be read); a role the
    pairing lacks is absent."""
    rec = record_core(record)
    suite = rec.suite
    arms = {a.name: a for a in suite.arms}
    sec = CostSection(break_even=_break_even(splits, classic_ref))
    # The modelled arm: the first profile comparison with a classic reference, else any classic.
    prof = next((p for p in profiles if (p.unprofiled.arm, p.unprofiled.prompt) in classic_ref), None)
    key: tuple[str, str] | None
    if prof is not None:
        key = (prof.unprofiled.arm, prof.unprofiled.prompt)
    else:
        key = next((k for k in classic_ref if k[0] in arms and arms[k[0]].block > 1), None) \
            or next(iter(classic_ref), None)
    if key is None:
        return CostSection(NO_CLASSIC, break_even=sec.break_even)
    sec.classic_arm, classic_ms = classic_ref[key]
    sec.prompt = key[1]
    pairing = arms[key[0]].pairing
    tables = models.get(pairing, {})
    sec.peak = _peak(host_spec)
    tdir, ttab = tables.get("target", (None, "the pairing names no target"))
    try:
        if isinstance(ttab, str):
            raise ValueError(ttab)
        sec.target_dir = str(tdir)
        sec.target = target_bytes(ttab)
    except ValueError as e:
        return CostSection(NO_BYTES, bytes_error=str(e), break_even=sec.break_even)
    sec.target_step_ms = classic_ms
    sec.target_eff = cm.bandwidth_efficiency(cm.effective_bandwidth(sec.target.total, classic_ms), sec.peak.gb_s)
    # The engine's dispatch floor, if it measured one for this pairing's target (scaling.dispatch).
    sec.roofline = cm.roofline(sec.target.total, classic_ms, sec.peak.gb_s, cm.dispatch_floor(scaling_for(rec, pairing)))
    ddir, dtab = tables.get("drafter", (None, None))
    if isinstance(dtab, dict):
        sec.drafter_dir = str(ddir)
        ran = _result_arm(runs, prof.profiled.arm) if prof is not None else ArmInfo()
        sec.drafter = drafter_bytes(dtab, ran.drafter_quantization)
        borrows = ran.drafter_borrows
        if borrows:
            sec.drafter = with_borrowed(sec.drafter, ttab, borrows)
    if prof is None:
        sec.no_what_if = NO_PROFILE
        sec.profile_vars = tuple(sorted({v for a in suite.arms if (v := rounds.profile_var(record, a.name))}))
        sec.verify_phase = declare.of_record(record, key[0]).phase_for(declare.ROLE_VERIFY)
        return sec
    sec.profiled_arm = prof.profiled.arm
    sec.missing_roles = tuple(r for r, p in ((declare.ROLE_DRAFT, prof.draft_phase),
                                             (declare.ROLE_VERIFY, prof.verify_phase)) if p is None)
    if sec.missing_roles:
        sec.no_what_if = NO_ROLES
        return sec
    step = prof.drafter_step_ms
    if step is None or sec.drafter is None:
        sec.no_what_if = NO_STEP
        return sec
    got = _round_model(prof, classic_ms)
    if got is None:
        sec.no_what_if = NO_PHASES
        return sec
    sec.drafter_step_ms = step
    sec.drafter_eff = cm.bandwidth_efficiency(cm.effective_bandwidth(sec.drafter.total, step), sec.peak.gb_s)
    sec.model, sec.basis = got
    at_target = cm.ms_at_bandwidth(sec.drafter.total, sec.target_eff.achieved_gb_s)
    scen = [cm.Scenario(f"drafter at the target's {sec.target_eff.achieved_gb_s:.1f} GB/s", at_target),
            cm.Scenario("half the step cost", step / 2)]
    sec.what_if = cm.what_if(sec.model, scen)
    return sec


def _break_even(splits: list[RoundSplit], classic_ref: ClassicRef) -> list[BreakEven]:
    """Break-even for every engaged, unprofiled speculative arm that has a classic reference."""
    out = []
    for s in splits:
        ref = classic_ref.get((s.arm, s.prompt))
        if s.mode == "speculative" and not s.profile and ref:
            out.append(BreakEven(s.arm, s.prompt, ref[0], s.per_unit_ms, s.emitted_per_verify or 0.0,
                                 cm.break_even_emitted(s.per_unit_ms, ref[1]),
                                 cm.round_cost_in_classic_steps(s.per_unit_ms, ref[1])))
    return out


class _SpecPeak(msgspec.Struct, kw_only=True):
    """What the cost section reads of a record's host spec (core.hostinfo.HostSpec's fields)."""
    name: str
    peak_bandwidth_gbs: int | float | None = None
    peak_bandwidth_source: str = ""


def _peak(spec: dict[str, Any] | None) -> Peak:
    if spec is None:
        return Peak(None, None)
    s = msgspec.convert(spec, _SpecPeak)
    return Peak(s.name, s.peak_bandwidth_gbs, s.peak_bandwidth_source)


def _result_arm(runs: list[Run], arm: str) -> ArmInfo:
    """How the arm ran, as the engine said: warm-ups too, any ok run says it."""
    return next((r.result_arm for r in runs if r.arm == arm and r.is_ok), ArmInfo())


def _round_model(p: ProfileComparison, classic_ms: float) -> tuple[cm.RoundModel, RoundBasis] | None:
    """The unprofiled round, with its draft+verify time split in the profiled proportions.

    Default mode cannot say how much of the verify phase is drafter device work; profile mode
    can, but inflates both. So the measured unprofiled total of the drafting and verify phases
    is divided as the profiled arm divides it, and the model closes on the measured round.
    None when a split lacks either phase."""
    u, q = p.unprofiled, p.profiled
    if p.draft_phase is None or p.verify_phase is None:
        return None
    du, vu = (u.component(p.draft_phase), u.component(p.verify_phase))
    dq, vq = (q.component(p.draft_phase), q.component(p.verify_phase))
    if not (du and vu and dq and vq) or not p.drafter_steps_per_round:
        return None
    share = dq.per_unit_ms / (dq.per_unit_ms + vq.per_unit_ms)
    dv = du.per_unit_ms + vu.per_unit_ms
    steps = p.drafter_steps_per_round
    step = dv * share / steps
    verify = dv * (1 - share)
    other = u.per_unit_ms - dv
    model = cm.RoundModel(classic_ms_per_token=classic_ms, emitted_per_round=u.emitted_per_verify or 1.0,
                          verify_ms=verify, drafter_steps=steps, drafter_step_ms=step, other_ms=max(0.0, other))
    return model, RoundBasis(u.arm, u.prompt, u.per_unit_ms, q.arm, p.draft_phase, p.verify_phase,
                             dv, share, classic_ms)
