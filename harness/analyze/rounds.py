"""Round split of each arm, and profile mode against the same arm unprofiled.

Reads the engine's diagnostics (phase_ms, decode_ms, rounds) from a record's measured runs,
and the engine's declaration (suite.engines in the record: phase order and labels, profile
variable, which phase drafts and which verifies). Phases are the engine's own: a name it declares or reports is kept, in declared
order then as reported; a phase a run did not report is left out of that run's figures.
Totals are summed over an arm's measured runs, so components close against the decode total
exactly as the engine's closure_error_ms says; per-round figures divide by the rounds summed
the same way. Classic decode has no rounds: its unit is the token.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from harness.analyze import stats
from harness.analyze.counters import SplitCounters, split_counters, units
from harness.core import declare
from harness.core.declare import EngineDecl
from harness.core.runs import AnyRecord, measured_ok_runs, record_core
from harness.core.schema import Run, RunDiagnostics, SuiteSection
from harness.core.suitespec import Arm


def profile_var(record: AnyRecord, arm: str) -> str | None:
    """The variable that puts this arm's engine in profile mode (None: it has none)."""
    return declare.of_record(record, arm).profile_var


def profiled_arm(record: AnyRecord, arm: str, overrides: dict[str, str]) -> bool:
    """The arm ran in its engine's profile mode (which slows it on purpose)."""
    var = profile_var(record, arm)
    return var is not None and var in overrides


# Runs by (arm, prompt), in suite order.
Groups = dict[tuple[str, str], list[Run]]


def by_arm_prompt(record: AnyRecord | SuiteSection, runs: Iterable[Run],
                  keep_empty: bool = False) -> Groups:
    """Runs by (arm, prompt), in suite order, so a table reads like the suite; keep_empty keeps
    the (arm, prompt) pairs no run reached."""
    suite = record if isinstance(record, SuiteSection) else record_core(record).suite
    out: Groups = {(a.name, p.name): [] for a in suite.arms for p in suite.prompts}
    for r in runs:
        out.setdefault((str(r.arm), str(r.prompt)), []).append(r)
    return out if keep_empty else {k: v for k, v in out.items() if v}


def measured_by_arm_prompt(record: AnyRecord, groups: Groups | None = None) -> Groups:
    """The record's measured ok runs, typed, by (arm, prompt) in suite order: `groups` where the
    caller has them so (a report's Facts), else converted here."""
    if groups is not None:
        return groups
    rec = record_core(record)
    return by_arm_prompt(rec.suite, measured_ok_runs(rec.runs))


def engaged(runs: Sequence[Run]) -> bool:
    """Every run decoded speculatively (the gate engaged, by itself or overridden)."""
    return bool(runs) and all(r.diagnostics.mode == "speculative" for r in runs)


def profiled(runs: Sequence[Run]) -> bool:
    return bool(runs) and all(r.diagnostics.profile for r in runs)


@dataclass
class Component:
    name: str
    label: str
    total_ms: float
    per_unit_ms: float
    share: float                      # of the decode total
    per_run: list[float] = field(default_factory=list)   # ms per unit, one per run


@dataclass
class RoundSplit:
    arm: str
    prompt: str
    mode: str | None                  # speculative | classic; None: the engine did not say
    block: int
    runs: int
    units: int                        # rounds (speculative) or tokens (classic)
    unit: str                         # "round" | "token"
    decode_ms: float                  # summed over runs
    components: list[Component]
    closure_ms: float                 # decode total minus the components' sum
    emitted_per_verify: float | None
    profile: bool
    per_run_unit_ms: list[float]      # decode ms per unit, one per run
    counters: SplitCounters | None = None   # the engine's work counters per unit, where it counts

    @property
    def closure_pct(self) -> float:
        return abs(self.closure_ms) / self.decode_ms if self.decode_ms else 0.0

    @property
    def per_unit_ms(self) -> float:
        return self.decode_ms / self.units if self.units else 0.0

    def component(self, name: str) -> Component | None:
        return next((c for c in self.components if c.name == name), None)


def round_split(arm: str, prompt: str, runs: list[Run], decl: EngineDecl | None = None) -> RoundSplit | None:
    """None when the engine gives no phase split (stock mlx-lm, a tok/s-only command)."""
    diags = [r.diagnostics for r in runs]
    decodes = [ms for d in diags if d.phase_ms and (ms := d.decode_ms)]
    if not diags or len(decodes) < len(diags):
        return None
    modes = {d.mode for d in diags}
    if len(modes) != 1:
        return None
    mode = modes.pop()
    counts = [units(d) for d in diags]
    if not all(counts):
        return None
    decl = decl or EngineDecl(name="?")
    reported = list(dict.fromkeys(k for d in diags for k in d.phase_ms))   # the engine's order
    names = [k for k in decl.phases if k in reported] + [k for k in reported if k not in decl.phases]
    decode = sum(decodes)
    # The block the engine ran: its own diagnostics, else the arm's as recorded with the run.
    block = diags[0].block_size or runs[0].block or 1
    comps = []
    for n in names:
        # Only runs that reported the phase: a missing phase is not a measured 0.
        have = [(d.phase_ms[n], ms, u) for d, ms, u in zip(diags, decodes, counts) if n in d.phase_ms]
        total = sum(ph for ph, _, _ in have)
        have_decode = sum(ms for _, ms, _ in have)
        comps.append(Component(n, decl.phase_label(n, block), total, total / sum(u for _, _, u in have),
                               total / have_decode if have_decode else 0.0,
                               [ph / u for ph, _, u in have]))
    tokens = sum(d.generated_tokens or 0 for d in diags)
    return RoundSplit(
        arm=arm, prompt=prompt, mode=mode, block=block, runs=len(runs), units=sum(counts),
        unit="round" if mode == "speculative" else "token", decode_ms=decode, components=comps,
        closure_ms=decode - sum(c.total_ms for c in comps),
        emitted_per_verify=(tokens / sum(counts)) if mode == "speculative" else None,
        profile=all(d.profile for d in diags),
        per_run_unit_ms=[ms / u for ms, u in zip(decodes, counts)],
        counters=split_counters(diags, block, decl))


def all_splits(record: AnyRecord, groups: Groups | None = None) -> list[RoundSplit]:
    """Each (arm, prompt)'s round split where its engine gives one; groups: measured_by_arm_prompt's."""
    out = []
    for (arm, prompt), runs in measured_by_arm_prompt(record, groups).items():
        s = round_split(arm, prompt, runs, declare.of_record(record, arm))
        if s is not None:
            out.append(s)
    return out


# --- profile mode against the same arm unprofiled -------------------------------------

@dataclass
class ProfileComparison:
    profiled: RoundSplit
    unprofiled: RoundSplit
    drafter_steps_per_round: float    # drafter forwards per round (drafted tokens / rounds)
    syncs_per_round: float
    sync_ms_per_round: float
    # The engine's declared drafting and verify phases (None: it declares no such role).
    draft_phase: str | None = None
    verify_phase: str | None = None

    @property
    def cost(self) -> float:
        """Profile mode's cost: its round time over the unprofiled round, minus 1."""
        return self.profiled.per_unit_ms / self.unprofiled.per_unit_ms - 1.0

    @property
    def resolved(self) -> bool:
        """Whether the two arms' per-round ranges separate (otherwise the cost is inside the noise)."""
        a, b = self.profiled.per_run_unit_ms, self.unprofiled.per_run_unit_ms
        return min(a) > max(b) or max(a) < min(b)

    @property
    def drafter_step_ms(self) -> float | None:
        """The profiled drafting phase per drafter forward: the step cost with its device work
        synced in. None when the engine declares no drafting phase or the arm drafted nothing."""
        c = None if self.draft_phase is None else self.profiled.component(self.draft_phase)
        if c is None or not self.drafter_steps_per_round:
            return None
        return c.per_unit_ms / self.drafter_steps_per_round


def unprofiled_twin(record: AnyRecord, arm_name: str) -> str | None:
    """The arm that is this one without its engine's profile variable: same pairing, engine,
    block, other env. None when the engine has no profile mode."""
    var = profile_var(record, arm_name)
    if var is None:
        return None
    arms = record_core(record).suite.arms
    me = next(a for a in arms if a.name == arm_name)

    def rest(arm: Arm) -> dict[str, str]:
        return {k: v for k, v in arm.env.items() if k != var}
    for a in arms:
        if a.name != arm_name and var not in a.env \
                and (a.pairing, a.engine, a.block) == (me.pairing, me.engine, me.block) \
                and rest(a) == rest(me):
            return a.name
    return None


def profile_comparisons(record: AnyRecord, groups: Groups | None = None) -> list[ProfileComparison]:
    """Each profiled arm against its unprofiled twin, per prompt; groups: measured_by_arm_prompt's."""
    groups = measured_by_arm_prompt(record, groups)
    out = []
    for (arm, prompt), runs in groups.items():
        if not (engaged(runs) and profiled(runs)):
            continue
        twin = unprofiled_twin(record, arm)
        if twin is None or not engaged(groups.get((twin, prompt), [])):
            continue
        decl = declare.of_record(record, arm)
        p, u = round_split(arm, prompt, runs, decl), round_split(twin, prompt, groups[(twin, prompt)], decl)
        if p is None or u is None:
            continue
        diags = [r.diagnostics for r in runs]
        proposed = sum(d.proposed or 0 for d in diags)
        draft = decl.phase_for(declare.ROLE_DRAFT)
        reported = None if draft is None else forwards_per_round(diags, draft)
        out.append(ProfileComparison(
            profiled=p, unprofiled=u,
            drafter_steps_per_round=(reported if reported is not None
                                     else proposed / p.units if p.units else 0.0),
            syncs_per_round=sum(d.profile_syncs or 0 for d in diags) / p.units,
            sync_ms_per_round=sum(d.profile_sync_ms or 0.0 for d in diags) / p.units,
            draft_phase=draft, verify_phase=decl.phase_for(declare.ROLE_VERIFY)))
    return out


def forwards_per_round(diags: list[RunDiagnostics], phase: str) -> float | None:
    """Drafter forwards per round an engine reported for a phase (diagnostics.drafter_split;
    an MTP head drafts its first token in another phase, so the drafting phase runs K-2).
    None when it reports none: then a drafter forward per drafted token is assumed."""
    got = [(d.drafter_split or {}).get(phase) for d in diags]
    if not got or any(g is None for g in got):
        return None
    rounds = sum(d.rounds or 0 for d in diags)
    return sum(g.forwards for g in got if g is not None) / rounds if rounds else None


def median_range(xs: list[float]) -> tuple[float, float, float]:
    lo, hi = stats.min_max(xs)
    return stats.median(xs), lo, hi
