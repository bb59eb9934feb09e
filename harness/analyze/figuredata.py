"""The series a report's figures draw, read from a record; nothing here draws.

Each figure has its own typed series, and an empty tuple (or None) where the record has no data
for it, so the renderer draws only what the record holds:

- runs: ms/token of every measured run in session order, per arm and prompt, with the marks a
  reader needs beside a point (contended, quiet-wait timeout, failed);
- kv: verify ms by KV length, first use of a shape against its repeats (the engine's rounds_log;
  every completed run, warm-ups included, since first uses fall mostly there);
- acceptance: accepted share of drafts by draft position, with Wilson intervals;
- splits: ms per round (per token for classic decode) by the engine's own phases.

Two records compared give before/after intervals (median with min-max of the runs) of ms/token
per arm and prompt and of each round component both records have.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.analyze import acceptance, compare, contended, rounds, stats
from harness.analyze.drafterstep import TimedRound, widest_timed_rounds
from harness.core import declare
from harness.core.runs import AnyRecord, RecordData, as_record, measured_ok_runs, record_core
from harness.core.schema import Record, Run, RunDiagnostics

KV_BIN = 8       # KV lengths grouped in bins of this many tokens: fine enough to see a slope
FIRST_USE, REPEAT = "first use", "repeat"


@dataclass(frozen=True)
class RunPoint:
    """One measured run."""

    index: int                    # its place in the session (the record's run index)
    ms_per_token: float | None    # None: the run failed and has no figure
    contended: bool               # the contention watch marked it
    quiet_timeout: bool           # the quiet wait timed out before it (it ran on a busy host)

    @property
    def failed(self) -> bool:
        return self.ms_per_token is None


@dataclass(frozen=True)
class RunSeries:
    """An arm's measured runs on one prompt, in session order."""

    arm: str
    prompt: str
    points: tuple[RunPoint, ...]


@dataclass(frozen=True)
class KvCurve:
    """Median verify ms per KV-length bin, for first-use or repeat rounds of one arm (prompts pooled)."""

    arm: str
    width: int                    # T: the verify width (shorter last rounds left out)
    kind: str                     # FIRST_USE | REPEAT
    kv: tuple[int, ...]           # each bin's lower edge, tokens
    ms: tuple[float, ...]         # median verify ms of the bin's rounds
    rounds: int                   # rounds behind the curve


@dataclass(frozen=True)
class PositionAcceptance:
    """Drafts accepted at each draft position (1..k) of one arm, over the runs said in `runs`."""

    arm: str
    accepted: tuple[int, ...]
    proposed: tuple[int, ...]
    runs: int

    @property
    def share(self) -> tuple[float | None, ...]:
        return tuple(a / p if p else None for a, p in zip(self.accepted, self.proposed))

    @property
    def ci(self) -> tuple[tuple[float, float] | None, ...]:
        """95% Wilson interval per position (None where nothing was proposed there)."""
        return tuple(stats.wilson_ci(min(a, p), p) if p else None for a, p in zip(self.accepted, self.proposed))


@dataclass(frozen=True)
class Segment:
    phase: str                    # the engine's own phase name
    label: str                    # its label at this arm's block (plain text)
    ms: float                     # ms per unit


@dataclass(frozen=True)
class SplitBar:
    """One arm and prompt's decode unit split by phase (summed over its measured runs)."""

    arm: str
    prompt: str
    unit: str                     # "round" | "token"
    segments: tuple[Segment, ...]
    unattributed_ms: float        # decode time per unit no phase claimed (negative: phases overlap)
    total_ms: float               # decode ms per unit
    profile: bool                 # the engine's profile mode (slowed on purpose)
    block: int                    # the block the arm asked for (> 1 with unit "token": it decoded classic)


@dataclass(frozen=True)
class FigureData:
    """Everything a record's figures draw; empty where the record has no data for a figure."""

    arms: tuple[str, ...]                  # suite order: every figure colours an arm the same
    prompts: tuple[str, ...]
    runs: tuple[RunSeries, ...]
    warmups: int                           # warm-up runs left out of `runs`
    kv: tuple[KvCurve, ...]
    kv_bin: int
    acceptance: tuple[PositionAcceptance, ...]
    acceptance_runs: str                   # which runs the acceptance counts cover, in words
    splits: tuple[SplitBar, ...]
    phases: tuple[tuple[str, str], ...]    # (phase, legend label) in the engines' order


def _ms(run: Run) -> float | None:
    x = run.ms_per_token
    return x if run.is_ok and x is not None and x > 0 else None


def run_series(record: AnyRecord, runs: list[Run]) -> tuple[tuple[RunSeries, ...], int]:
    """Measured runs per (arm, prompt) in suite order, and the count of warm-ups left out;
    runs: the record's runs typed, in its order."""
    out = []
    for (arm, prompt), rs in rounds.by_arm_prompt(record, [r for r in runs if not r.warmup]).items():
        pts = tuple(RunPoint(r.index, _ms(r), contended.is_contended(r), "quiet_wait_timeout" in r.marks) for r in rs)
        out.append(RunSeries(arm, prompt, tuple(sorted(pts, key=lambda p: p.index))))
    return tuple(out), sum(1 for r in runs if r.warmup)


def _curve(arm: str, width: int, kind: str, xs: list[TimedRound]) -> KvCurve | None:
    bins: dict[int, list[float]] = {}
    for x in xs:
        bins.setdefault(x.kv_len // KV_BIN * KV_BIN, []).append(x.verify_ms)
    if not bins:
        return None
    keys = sorted(bins)
    return KvCurve(arm, width, kind, tuple(keys), tuple(stats.median(bins[k]) for k in keys), len(xs))


def kv_curves(record: AnyRecord, runs: list[Run]) -> tuple[KvCurve, ...]:
    """Verify ms by KV length per arm, first uses and repeats apart; runs: the record's, typed."""
    every = [r for r in runs if r.is_ok]   # warm-ups too: a shape's first use may be theirs
    by_arm: dict[str, list[Run]] = {}
    for (arm, _), rs in rounds.by_arm_prompt(record, every).items():
        by_arm.setdefault(arm, []).extend(rs)
    out = []
    for arm, rs in by_arm.items():
        width, timed = widest_timed_rounds(rs)
        for kind in (FIRST_USE, REPEAT):
            c = _curve(arm, width, kind, [x for x in timed if x.first_use == (kind == FIRST_USE)])
            if c is not None:
                out.append(c)
    return tuple(out)


def _counts(d: RunDiagnostics) -> tuple[list[int], list[int]] | None:
    acc, prop = d.accepted_by_position, d.proposed_by_position
    if acc is None or prop is None or len(acc) != len(prop) or not prop:
        return None
    return acc, prop


def position_acceptance(record: AnyRecord, groups: rounds.Groups) -> tuple[tuple[PositionAcceptance, ...], str]:
    """Per speculative arm, counts summed over its runs (groups: rounds.measured_by_arm_prompt's).
    At temperature 0 repetitions repeat the same tokens, so (as harness.analyze.acceptance) only
    the first measured run per prompt counts."""
    greedy = record_core(record).suite.settings.temp == 0.0
    by_arm: dict[str, dict[str, list[Run]]] = {}
    for (arm, prompt), rs in groups.items():
        by_arm.setdefault(arm, {})[prompt] = rs
    out = []
    for arm, per_prompt in by_arm.items():
        runs = list(acceptance.first_runs(per_prompt).values()) if greedy else \
            [r for rs in per_prompt.values() for r in rs]
        counts = [c for r in runs if r.diagnostics.mode == "speculative"
                  if (c := _counts(r.diagnostics)) is not None]
        if not counts:
            continue
        k = max(len(p) for _, p in counts)
        acc = [sum(a[i] for a, _ in counts if i < len(a)) for i in range(k)]
        prop = [sum(p[i] for _, p in counts if i < len(p)) for i in range(k)]
        if any(prop):
            out.append(PositionAcceptance(arm, tuple(acc), tuple(prop), len(counts)))
    said = "first measured run per prompt" if greedy else "every measured run"
    return tuple(out), said


def _plain(label: str) -> str:
    return label.replace("`", "")


def _phase_order(record: AnyRecord, names: list[str]) -> list[str]:
    """Phases in the engines' declared round order, then the undeclared ones as reported."""
    declared = list(dict.fromkeys(p for a in record_core(record).suite.arms for p in declare.of_record(record, a.name).phases))
    return [p for p in declared if p in names] + [p for p in names if p not in declared]


def split_bars(record: AnyRecord, groups: rounds.Groups) -> tuple[tuple[SplitBar, ...], tuple[tuple[str, str], ...]]:
    """Each round split as a bar, and the phases' legend; groups: rounds.measured_by_arm_prompt's."""
    bars: list[SplitBar] = []
    labels: dict[str, str] = {}
    asked = {a.name: a.block for a in record_core(record).suite.arms}
    for s in rounds.all_splits(record, groups):
        decl = declare.of_record(record, s.arm)
        segs = tuple(Segment(c.name, _plain(c.label), c.per_unit_ms) for c in s.components)
        for c in s.components:
            labels.setdefault(c.name, _plain(decl.phase_labels.get(c.name, c.name).replace("{block}", "K")))
        bars.append(SplitBar(s.arm, s.prompt, s.unit, segs, s.closure_ms / s.units, s.per_unit_ms, s.profile,
                             asked.get(s.arm, s.block)))
    return tuple(bars), tuple((p, labels[p]) for p in _phase_order(record, list(labels)))


def record_figure_data(record: AnyRecord) -> FigureData:
    """The series of every figure of one (loaded) record."""
    rec = record_core(record)
    typed = rec.runs
    groups = rounds.by_arm_prompt(rec.suite, measured_ok_runs(typed))
    runs, warmups = run_series(rec, typed)
    acc, acc_runs = position_acceptance(rec, groups)
    bars, phases = split_bars(rec, groups)
    suite = rec.suite
    return FigureData(
        arms=tuple(a.name for a in suite.arms),
        prompts=tuple(p.name for p in suite.prompts),
        runs=runs, warmups=warmups, kv=kv_curves(rec, typed), kv_bin=KV_BIN,
        acceptance=acc, acceptance_runs=acc_runs, splits=bars, phases=phases)


# --- two records ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Interval:
    median: float
    lo: float                     # smallest run
    hi: float                     # largest run
    runs: int


@dataclass(frozen=True)
class BeforeAfter:
    """One row of a comparison: an arm on a prompt, each side's interval (None: that side lacks it)."""

    arm: str
    prompt: str
    before: Interval | None
    after: Interval | None


@dataclass(frozen=True)
class ComparePanel:
    name: str                     # what is compared: "ms/token", or a round component's label
    unit: str                     # "token" | "round": the x axis is ms per this
    rows: tuple[BeforeAfter, ...]


@dataclass(frozen=True)
class ArmChange:
    """One arm's ms/token, after over before, judged paired over every prompt (the comparison
    section's own check, harness.analyze.compare.throughput_changes)."""

    arm: str
    change: float                 # after / before - 1 (the paired location)
    lo: float | None              # its interval, as changes (None: too few pairs for one)
    hi: float | None
    verdict: str                  # compare's verdict: faster, slower, noise, unchanged, inconclusive, ...


@dataclass(frozen=True)
class CompareFigureData:
    before: str                   # each record's name for a legend (suite, host, date)
    after: str
    arms: tuple[str, ...]         # before's arms then after's new ones
    ms_per_token: ComparePanel | None
    components: tuple[ComparePanel, ...]   # each round component both records have
    changes: tuple[ArmChange, ...] = ()    # each arm's paired change, with its interval
    threshold: float = 0.10                # the change the check had to be able to see


def _interval(xs: list[float]) -> Interval | None:
    if not xs:
        return None
    return Interval(stats.median(xs), min(xs), max(xs), len(xs))


def _name(record: Record) -> str:
    host_name = record.host.spec.name if record.host.spec is not None else None
    when = record.created[:16].replace("T", " ")
    return " ".join(x for x in (record.suite.name, host_name and f"on {host_name}", when) if x)


def _ms_rows(before: rounds.Groups, after: rounds.Groups) -> tuple[BeforeAfter, ...]:
    sides = [{k: [m for r in rs if (m := _ms(r)) is not None] for k, rs in groups.items()} for groups in (before, after)]
    keys = list(dict.fromkeys([*sides[0], *sides[1]]))
    return tuple(BeforeAfter(a, p, _interval(sides[0].get((a, p), [])), _interval(sides[1].get((a, p), [])))
                 for a, p in keys)


def _component_panels(before: RecordData, after: RecordData, groups: rounds.Groups) -> tuple[ComparePanel, ...]:
    """A panel per component and unit (the total first), its rows the arms and prompts that have
    it on both sides; groups: before's measured runs. Components are named by phase, so one phase
    at two blocks shares a panel."""
    bars, labels = split_bars(before, groups)
    name_of = {(b.arm, b.prompt, s.label): s.phase for b in bars for s in b.segments}
    label_of = dict(labels)
    panels: dict[tuple[str, str], list[BeforeAfter]] = {}
    for c in compare.component_changes(before, after):
        phase = name_of.get((c.arm, c.prompt, _plain(c.component)))
        name = label_of.get(phase, _plain(c.component)) if phase is not None else _plain(c.component)
        panels.setdefault((name, c.unit), []).append(BeforeAfter(
            c.arm, c.prompt, Interval(c.before.median, c.before.lo, c.before.hi, len(c.before_runs)),
            Interval(c.after.median, c.after.lo, c.after.hi, len(c.after_runs))))
    keys = sorted(panels, key=lambda k: k[1] != "round")   # stable: rounds first, each in split order
    return tuple(ComparePanel(name, unit, tuple(panels[(name, unit)])) for name, unit in keys)


def compare_figure_data(before: RecordData, after: RecordData) -> CompareFigureData | None:
    """Before/after series of two (loaded) records; None when no arm has runs on either side."""
    groups = rounds.measured_by_arm_prompt(before)
    rows = _ms_rows(groups, rounds.measured_by_arm_prompt(after))
    comps = _component_panels(before, after, groups)
    if not rows and not comps:
        return None
    recs = as_record(before), as_record(after)
    suites = recs[0].suite, recs[1].suite
    arms = tuple(dict.fromkeys(a.name for s in suites for a in s.arms))
    return CompareFigureData(_name(recs[0]), _name(recs[1]), arms,
                             ComparePanel("ms/token", "token", rows) if rows else None, comps,
                             _changes(before, after), suites[0].settings.threshold)


def _changes(before: RecordData, after: RecordData) -> tuple[ArmChange, ...]:
    """Each arm's paired change; none across hosts, where the comparison gives speedups, not
    verdicts."""
    if not compare.same_host(before, after):
        return ()
    out = []
    for t in compare.throughput_changes(before, after)[0]:
        if t.ms is None:
            continue
        j = t.ms.judged
        if j is None or j.ratio is None:
            continue
        out.append(ArmChange(t.arm, j.ratio - 1.0, None if j.lo is None else j.lo - 1.0,
                             None if j.hi is None else j.hi - 1.0, t.ms.verdict))
    return tuple(out)
