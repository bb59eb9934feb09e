"""The round split, profile-mode, verify-cost scaling and cost-model sections of a report."""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.analyze import costmodel, costreport
from harness.analyze.counters import Count, SplitCounters
from harness.analyze.facts import Facts
from harness.analyze.rounds import RoundSplit
from harness.core import declare
from harness.render import reportcost
from harness.render.format import f, pct, signed_pct
from harness.render.mdtable import Table


@dataclass(frozen=True)
class SplitSection:
    """One arm and prompt's round split, as the appendix shows it."""
    title: str                    # the row's label, and how it decoded when the gate declined
    table: Table                  # component, total ms, ms per unit, share
    mode: str                     # which mode timed the phases, in the engine's words
    closure: str                  # how closely the components close against the decode total
    counters: str                 # the work counted per unit; "" when the engine counts none


@dataclass(frozen=True)
class ProfileSection:
    """A profiled arm against its unprofiled twin on one prompt."""
    title: str
    table: Table                  # each component per round, unprofiled and profiled, and the change
    lines: list[str]              # the drafter step, profile mode's cost, what to quote


@dataclass(frozen=True)
class SplitTable:
    """Every arm's round split in one table, and the lines said under it."""
    table: Table
    lines: list[str]


@dataclass(frozen=True)
class ScalingSection:
    """The verify-forward cost scaling the engine measured, and what it measured."""
    table: Table
    line: str


@dataclass
class CostContext:
    """The cost-model section as the report says it; a table is None where the record has no
    data for it (the cost model's `available`, `what_if` and `break_even` say which)."""
    available: bool
    reason: str                   # why the section is unavailable ("" when it is)
    notes: list[str]              # why parts are left out
    peak: str                     # the peak bandwidth and its source, or why it is unknown
    bytes: Table | None = None    # bytes per step by tensor set (target, then drafter)
    bytes_notes: list[str] = field(default_factory=list)
    bandwidth: Table | None = None
    roofline: str = ""            # what bounds the target step
    what_if: Table | None = None
    model_note: str = ""
    what_if_line: str = ""
    break_even: Table | None = None        # per arm and prompt
    break_even_arms: Table | None = None   # per arm (the same table when the record has one prompt)


def split_sections(fx: Facts) -> list[SplitSection]:
    out = []
    for s in fx.splits:
        unit = s.unit
        t = Table(["component", "total ms", f"ms/{unit}", "share"], align=["l", "r", "r", "r"])
        for c in s.components:
            t.add(c.label, f"{c.total_ms:.2f}", f"{c.per_unit_ms:.3f}", pct(c.share))
        t.add(f"{unit} total (decode)", f"{s.decode_ms:.2f}", f"{s.per_unit_ms:.3f}", "100.0%")
        what = (f"{s.runs} runs, {s.units} rounds, {s.emitted_per_verify:.3f} tokens per round" if unit == "round"
                else f"{s.runs} runs, {s.units} tokens")
        notes = declare.of_record(fx.record, s.arm).split_notes
        key = "profile" if s.profile else "default"
        mode = (f"{key} mode: {notes.get(key, 'phases as the engine timed them')}" if unit == "round"
                else "classic decode")
        title = fx.row_label(s.arm, s.prompt)
        if s.mode == "classic" and s.arm in fx.arms and fx.arms[s.arm].block > 1:
            title += ": decoded classic (the gate declined)"
        out.append(SplitSection(title=title, table=t, mode=mode,
                                closure=f"Components close against the decode total to within {s.closure_pct:.3%} "
                                        f"({s.closure_ms:+.4f} ms over {what}).",
                                counters=counters_line(s.counters) if s.counters else ""))
    return out


def _amount(x: float) -> str:
    return f"{x:.0f}" if abs(x - round(x)) < 1e-9 else f"{x:.2f}"


def _count(c: Count) -> str:
    """"2 host syncs", "1 target forward of 3 tokens"."""
    label = c.label[:-1] if c.per_unit == 1 and c.label.endswith("s") else c.label
    each = "" if c.per_forward is None else f" of {_amount(c.per_forward)} token{'' if c.per_forward == 1 else 's'}"
    return f"{_amount(c.per_unit)} {label}{each}"


def counters_line(c: SplitCounters) -> str:
    """The engine's work counters per unit: "Counted per round at block 3, over 32 rounds: 2 host
    syncs, 1 target forward of 3 tokens, ..." (a counter at 0 is left out)."""
    at = f" at block {c.block}" if c.unit == "round" else ""
    said = [_count(x) for x in c.counts if x.total]
    return f"Counted per {c.unit}{at}, over {c.units} {c.unit}s: {', '.join(said) or 'nothing'}."


def includes(fx: Facts, arm_names: list[tuple[str, list[str]]]) -> list[str]:
    """'label: what it includes' for each (arm, its shown component names), in the engine's own words,
    once per distinct line; a block-dependent label reads K for the block."""
    out: list[str] = []
    for arm, shown in arm_names:
        decl, notes = declare.of_record(fx.record, arm), fx.notes(arm)
        for name in shown:
            if name in notes:
                line = f"{decl.phase_label(name, 'K')}: {notes[name]}"
                if line not in out:
                    out.append(line)
    return out


def split_includes(fx: Facts) -> list[str]:
    return includes(fx, [(s.arm, [c.name for c in s.components]) for s in fx.splits])


def profile_sections(fx: Facts) -> list[ProfileSection]:
    out = []
    for p in fx.profiles:
        u, q = p.unprofiled, p.profiled
        t = Table(["component", f"unprofiled ms/round ({u.arm})", f"profiled ms/round ({q.arm})", "change"],
                  align=["l", "r", "r", "r"])
        for c in u.components:
            qc = q.component(c.name)
            if qc is None:
                continue
            ch = signed_pct(qc.per_unit_ms / c.per_unit_ms - 1) if c.per_unit_ms else "-"
            t.add(c.label, f"{c.per_unit_ms:.3f}", f"{qc.per_unit_ms:.3f}", ch)
        t.add("round total", f"{u.per_unit_ms:.3f}", f"{q.per_unit_ms:.3f}", signed_pct(p.cost))
        lines = []
        if p.drafter_step_ms is not None:
            lines.append(f"Drafter step, profiled: {p.drafter_step_ms:.3f} ms per drafter forward "
                         f"({p.drafter_steps_per_round:.2f} forwards per round inside {p.draft_phase}, synced).")
        elif p.draft_phase is None:
            lines.append(f"No drafter step: the engine of {q.arm} declares no drafting phase "
                         "(`roles` in its declaration), so no phase's time is divided by its forwards.")
        lines.append(f"Profile mode costs {signed_pct(p.cost)} per round ({q.per_unit_ms:.3f} against "
                     f"{u.per_unit_ms:.3f} ms; {p.syncs_per_round:.2f} syncs per round, "
                     f"{p.sync_ms_per_round:.3f} ms per round spent waiting in them)"
                     + ("." if p.resolved else "; the two arms' per-round ranges overlap, so this record does "
                        "not resolve that cost from noise."))
        split = any(r.diagnostics.drafter_split for r in fx.groups.get((q.arm, q.prompt), []))
        lines.append("Quote the unprofiled round as the cost; the profiled column is for attribution only."
                     + (" The drafter step's own split is in the next section." if split else
                        " This engine's profile mode syncs per stage and does not split the drafter step further "
                        "(no layers / LM head / readback split)."))
        out.append(ProfileSection(title=fx.row_label(q.arm, q.prompt), table=t, lines=lines))
    return out


def scaling_section(fx: Facts) -> ScalingSection | None:
    sc = fx.record.scaling
    if sc is None or not sc.widths:
        return None
    cold = any(w.cold_median_ms is not None for w in sc.widths)
    head = (["T (positions)", "warm median ms", "warm min-max ms", "vs T=1"] if cold
            else ["T (positions)", "median ms", "min-max ms", "vs T=1"])
    t = Table(head + (["cold median ms", "cold min-max ms", "cold vs warm"] if cold else []),
              align=["r"] * (len(head) + (3 if cold else 0)))
    for w in sc.widths:
        row = [w.T, f(w.median_ms, ".3f"), f"{f(w.min_ms, '.3f')}-{f(w.max_ms, '.3f')}", f(w.vs_T1, ".2f") + "x"]
        if cold:
            row += [f(w.cold_median_ms, ".3f"), f"{f(w.cold_min_ms, '.3f')}-{f(w.cold_max_ms, '.3f')}",
                    f(w.cold_vs_warm, ".2f") + "x"]
        t.add(*row)
    line = (f"One evaluated target forward of T positions after {sc.context_tokens} "
            f"context tokens on {sc.device}, median of {sc.widths[0].repeats}"
            + (": warm at a KV length run before; cold at a KV length new to that width each time (what a "
               "decode meets every round)." if cold else "."))
    return ScalingSection(table=t, line=line)


def cost_section(fx: Facts) -> CostContext:
    c = costreport.build(fx.record, fx.runs, fx.classic_ref(), fx.splits, fx.profiles, fx.host_spec, fx.models)
    out = CostContext(available=c.available, reason=reportcost.reason(c), notes=reportcost.notes(c),
                      peak=reportcost.peak_note(c))
    if c.target is not None:
        b = Table(["tensor set", "bytes"], align=["l", "r"])
        for name, n in c.target.rows:
            b.add(name, f"{n:,}")
        if c.drafter is not None:
            for name, n in c.drafter.rows:
                b.add(name, f"{n:,}")
        out.bytes = b
        out.bytes_notes = [x for x in ((c.target.note and f"Target: {c.target.note}."),
                                          (c.drafter and c.drafter.note and f"Drafter: {c.drafter.note}.")) if x]
        bw = Table(["model", "bytes per step", "measured step", "effective GB/s", "efficiency vs peak"],
                   align=["l", "r", "r", "r", "r"])
        eff = c.target_eff
        assert eff is not None   # costreport.build measures it whenever it has the target's bytes
        on = f", {c.prompt}" if fx.multi_prompt else ""
        bw.add(f"target ({c.classic_arm} ms/token median{on})", f"{c.target.total:,}", f"{c.target_step_ms:.3f} ms",
               f"{eff.achieved_gb_s:.2f}", "unknown peak" if eff.fraction is None else pct(eff.fraction))
        if c.drafter is not None and c.drafter_step_ms is not None and c.drafter_eff is not None:
            d = c.drafter_eff
            bw.add("drafter (profiled step)", f"{c.drafter.total:,}", f"{c.drafter_step_ms:.3f} ms",
                   f"{d.achieved_gb_s:.2f}", "unknown peak" if d.fraction is None else pct(d.fraction))
        out.bandwidth = bw
        out.roofline = reportcost.roofline_sentence(c.roofline)
    if c.what_if:
        w = Table(["scenario", "drafter step ms", "round ms", "tok/s", "vs classic", "round in classic steps"],
                  align=["l", "r", "r", "r", "r", "r"])
        for r in c.what_if:
            w.add(r.name, f"{r.drafter_step_ms:.3f}", f"{r.round_ms:.3f}", f"{r.tokens_per_s:.1f}",
                  f"{r.speedup:.2f}x", f"{r.round_in_classic_steps:.2f}")
        out.what_if = w
        out.model_note = reportcost.model_note(c)
        m = c.model
        assert m is not None   # the what-if table is made from the round model
        free = next(r for r in c.what_if if r.name == costmodel.FREE_DRAFTER)
        out.what_if_line = (f"Break-even at the measured round: {c.what_if[0].break_even_emitted:.3f} emitted per "
                               f"verify, against {m.emitted_per_round:.3f} measured; with a free drafter it would be "
                               f"{free.break_even_emitted:.3f}. "
                               "Projections from the cost model, not measurements.")
    if c.break_even:
        be = Table(["arm", "against", "ms/round", "emitted per verify", "break-even emitted per verify",
                    "round cost in classic steps"], align=["l", "l", "r", "r", "r", "r"])
        for x in c.break_even:
            be.add(fx.row_label(x.arm, x.prompt), x.classic_arm, f"{x.round_ms:.3f}", f"{x.emitted_per_verify:.3f}",
                   f"{x.break_even_emitted:.3f}", f"{x.classic_steps:.2f}")
        out.break_even = be
        out.break_even_arms = _break_even_by_arm(c.break_even) if fx.multi_prompt else be
    return out


def _break_even_by_arm(rows: list[costreport.BreakEven]) -> Table:
    """The break-even table merged over prompts: one row per arm, each figure its median."""
    by: dict[tuple[str, str], list[costreport.BreakEven]] = {}
    for r in rows:
        by.setdefault((r.arm, r.classic_arm), []).append(r)
    t = Table(["arm", "against", "ms/round", "emitted per verify", "break-even emitted per verify",
               "round cost in classic steps"], align=["l", "l", "r", "r", "r", "r"])
    for (arm, ref), rs in by.items():
        t.add(arm, ref, *[f"{_median([getattr(r, k) for r in rs]):{spec}}" for k, spec in
                          (("round_ms", ".3f"), ("emitted_per_verify", ".3f"), ("break_even_emitted", ".3f"),
                           ("classic_steps", ".2f"))])
    return t


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    n = len(s)
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def split_table(fx: Facts) -> SplitTable | None:
    """Every arm's round split in one table: components as rows, arms as columns, each cell the
    median over prompts of the component's ms per round (per token for classic decode) and its
    share of the arm's median total. None when no arm reports a split."""
    by_arm: dict[str, list[RoundSplit]] = {}
    for s in fx.splits:
        by_arm.setdefault(s.arm, []).append(s)
    if not by_arm:
        return None
    arms = [a for a in fx.arm_order if a in by_arm]
    labels: list[str] = []
    for a in arms:
        for s in by_arm[a]:
            for c in s.components:
                if c.label not in labels:
                    labels.append(c.label)
    head = ["component"] + [f"{a} (ms/{by_arm[a][0].unit})" for a in arms]
    t = Table(head, align=["l"] + ["r"] * len(arms))
    totals = {a: _median([s.per_unit_ms for s in by_arm[a]]) for a in arms}
    for lab in labels:
        cells = []
        for a in arms:
            xs = [c.per_unit_ms for s in by_arm[a] for c in s.components if c.label == lab]
            cells.append("-" if not xs else f"{_median(xs):.3f} ({pct(_median(xs) / totals[a]) if totals[a] else '-'})")
        t.add(lab, *cells)
    t.add("total (decode)", *[f"{totals[a]:.3f}" for a in arms])
    epv = {a: [s.emitted_per_verify for s in by_arm[a] if s.unit == "round" and s.emitted_per_verify]
           for a in arms}
    if any(epv.values()):
        t.add("tokens per round", *[f"{_median(epv[a]):.3f}" if epv[a] else "-" for a in arms])
    declined = [a for a in arms if any(s.mode == "classic" for s in by_arm[a]) and fx.arms[a].block > 1]
    n = max(len(v) for v in by_arm.values())
    closure = max(abs(s.closure_pct) for s in fx.splits)
    lines = [(f"Median over the {n} prompts; " if n > 1 else "")
             + "each component in ms per round (per token for classic decode) and its share of the total; "
             + f"components close against the decode total to within {closure:.3%}. "
             + ("Per-prompt splits are in the appendix." if n > 1 else "")]
    if declined:
        lines.append(f"{', '.join(declined)} decoded classic (the gate declined): "
                     "their columns are classic decode's split.")
    return SplitTable(table=t, lines=lines)
