"""The drafter-step split an engine reports in profile mode, and verify cost by shape.

Drafter split (engine contract: diagnostics.drafter_split): per phase that runs drafter
forwards (the engine's declared drafting phase, and any other it names: an MTP head drafts its
first token in its accept hook) the forwards it ran and the ms of each stage of them
({"forwards": n, "ms": {stage: ms}}). Phases are the engine's own names, never assumed here. In
profile mode the stages are synced and so their own; they should close against the phase's own
time in the round split.

Shape costs (engine contract: diagnostics.rounds_log[i] with verify_ms, kv_len, first_use): a
backend may build a kernel plan the first time it meets a shape (T positions after a KV length),
so a round's verify cost depends on whether its shape ran before in the process. First uses
happen mostly in warm-up runs, so this reads every completed run, warm-ups included.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from harness.analyze import stats
from harness.analyze.comparisons import scaling_for
from harness.analyze.rounds import Groups, by_arm_prompt, measured_by_arm_prompt
from harness.core.runs import AnyRecord, RecordCore, record_core
from harness.core.schema import RoundEntry, Run

# A first-use cost above this share of the decode time of the runs it fell in is flagged.
FIRST_USE_SHARE = 0.05
# A verify forward slower than the warm scaling probe at its width by more than this is flagged.
PROBE_RATIO = 1.5
KV_BIN = 64     # KV lengths are grouped in bins of this many tokens


@dataclass
class DrafterSplit:
    arm: str
    prompt: str
    phase: str
    forwards: int
    rounds: int
    stages: list[tuple[str, float]]      # (stage, total ms) in the engine's order
    phase_ms: float | None               # the phase's own total in the round split; None when a run lacks it

    @property
    def total_ms(self) -> float:
        return sum(ms for _, ms in self.stages)

    @property
    def closure_ms(self) -> float | None:
        return None if self.phase_ms is None else self.phase_ms - self.total_ms

    @property
    def closure_pct(self) -> float | None:
        c = self.closure_ms
        return abs(c) / self.phase_ms if c is not None and self.phase_ms else None

    @property
    def dominant(self) -> str:
        return max(self.stages, key=lambda s: s[1])[0] if self.stages else "none"


def drafter_splits(record: AnyRecord, groups: Groups | None = None) -> list[DrafterSplit]:
    """Profiled arms whose engine split its drafter forwards, summed over measured runs;
    groups: rounds.measured_by_arm_prompt's."""
    out = []
    for (arm, prompt), runs in measured_by_arm_prompt(record, groups).items():
        diags = [r.diagnostics for r in runs]
        splits = [d.drafter_split for d in diags if d.profile and d.drafter_split is not None]
        if not diags or len(splits) < len(diags):
            continue
        rounds = sum(d.rounds or 0 for d in diags)
        for phase in dict.fromkeys(p for split in splits for p in split):
            parts = [part for split in splits if (part := split.get(phase)) is not None]
            stages: dict[str, float] = {}
            for part in parts:
                for k, v in part.ms.items():
                    stages[k] = stages.get(k, 0.0) + v
            if not stages:
                continue
            own = [d.phase_ms.get(phase) for d in diags]
            phase_ms = sum(x for x in own if x is not None) if None not in own else None
            out.append(DrafterSplit(arm, prompt, phase, sum(part.forwards for part in parts),
                                    rounds, list(stages.items()), phase_ms))
    return out


# --- verify cost by shape ---------------------------------------------------------------

class _FirstAndRepeat:
    """Verify times of first-use rounds (a new shape) and of repeats, with their medians."""

    first: list[float]
    repeat: list[float]

    @property
    def first_median(self) -> float | None:
        return stats.median(self.first) if self.first else None

    @property
    def repeat_median(self) -> float | None:
        return stats.median(self.repeat) if self.repeat else None


@dataclass
class KvBin(_FirstAndRepeat):
    lo: int
    hi: int
    first: list[float] = field(default_factory=list)
    repeat: list[float] = field(default_factory=list)


@dataclass
class ShapeCost(_FirstAndRepeat):
    arm: str
    prompt: str
    width: int                       # T: the arm's full verify width (shorter last rounds left out)
    rounds: int                      # rounds of that width, every completed run
    first: list[float]               # verify ms of first-use rounds
    repeat: list[float]              # verify ms of rounds whose shape ran before
    first_runs_decode_ms: float | None   # decode time of the runs that had first-use rounds (None: a run lacks it)
    measured_verify: list[float]     # verify ms of the measured runs' rounds (the arm's figure)
    bins: list[KvBin]
    probe_warm_ms: float | None      # the scaling probe at this width, warm and cold
    probe_cold_ms: float | None

    @property
    def excess_ms(self) -> float | None:
        """What first uses cost over a repeat of the same width: sum(first) - n x repeat median."""
        if not self.first or self.repeat_median is None:
            return None
        return sum(self.first) - len(self.first) * self.repeat_median

    @property
    def excess_share(self) -> float | None:
        e = self.excess_ms
        return e / self.first_runs_decode_ms if e is not None and self.first_runs_decode_ms else None

    @property
    def first_use_flagged(self) -> bool | None:
        """None when the share is unknown: neither flagged nor cleared."""
        share = self.excess_share
        return None if share is None else share > FIRST_USE_SHARE

    @property
    def verify_median(self) -> float | None:
        return stats.median(self.measured_verify) if self.measured_verify else None

    @property
    def vs_probe(self) -> float | None:
        v = self.verify_median
        return v / self.probe_warm_ms if v is not None and self.probe_warm_ms else None

    @property
    def probe_flagged(self) -> bool:
        return (self.vs_probe or 0.0) > PROBE_RATIO


def _probe(record: RecordCore, width: int, pairing: str | None) -> tuple[float | None, float | None]:
    """The scaling probe's warm and cold medians at this width, when it ran on this arm's target
    (pairings that share a target share its probe)."""
    sc = scaling_for(record, pairing)
    for w in [] if sc is None else sc.widths:
        if w.T == width:
            return w.median_ms, w.cold_median_ms
    return None, None


@dataclass(frozen=True)
class TimedRound:
    """A speculative round that logged its verify ms and the KV length before it."""

    verify_ms: float
    kv_len: int
    first_use: bool        # its shape was new to the engine's loaded target
    run: Run               # the run it fell in


def _width(x: RoundEntry) -> int:
    """The verify width of a round: its drafted tokens and the target's own."""
    return len(x.drafted or []) + 1


def widest_timed_rounds(runs: list[Run]) -> tuple[int, list[TimedRound]]:
    """The speculative runs' timed rounds of the widest verify only (a shorter last round is
    another shape), and that width; (0, []) when no round logged its timing."""
    timed = [(_width(x), TimedRound(ms, kv, bool(x.first_use), r)) for r in runs if r.diagnostics.mode == "speculative"
             for x in r.diagnostics.rounds_log or []
             if (ms := x.verify_ms) is not None and (kv := x.kv_len) is not None]
    if not timed:
        return 0, []
    width = max(w for w, _ in timed)
    return width, [t for w, t in timed if w == width]


def shape_costs(record: AnyRecord) -> list[ShapeCost]:
    """Per speculative arm and prompt whose engine logs verify ms and KV length per round."""
    # Warm-ups too: a shape's first use may be theirs.
    rec = record_core(record)
    every = [r for r in rec.runs if r.is_ok]
    out = []
    for (arm, prompt), runs in by_arm_prompt(rec.suite, every).items():
        width, timed = widest_timed_rounds(runs)
        if not timed:
            continue
        bins: dict[int, KvBin] = {}
        first, repeat = [], []
        first_runs: dict[int, float | None] = {}
        for t in timed:
            ms, kv = t.verify_ms, t.kv_len
            b = bins.setdefault(kv // KV_BIN, KvBin(kv // KV_BIN * KV_BIN, kv // KV_BIN * KV_BIN + KV_BIN - 1))
            if t.first_use:
                first.append(ms)
                b.first.append(ms)
                first_runs[id(t.run)] = t.run.diagnostics.decode_ms
            else:
                repeat.append(ms)
                b.repeat.append(ms)
        measured = [t.verify_ms for t in timed if not t.run.warmup]
        decode = list(first_runs.values())
        decode_ms = sum(d for d in decode if d is not None) if None not in decode else None
        warm, cold = _probe(rec, width, runs[0].pairing)
        out.append(ShapeCost(arm, prompt, width, len(timed), first, repeat, decode_ms, measured,
                             [bins[k] for k in sorted(bins)], warm, cold))
    return out
