"""One verdict per arm, read once from a record: every sentence that judges an arm (the report's
finding, the terminal summary, the dashboard's badge) renders these and nothing else.

Where the record has a paired reading against classic (the budgeted session's last look), that
reading is the judgement. A record made without a budget is judged the same way after the fact,
at one look. Unpaired figures (median tok/s, spreads) describe; they never judge. An arm that
decoded classic (its gate declined) is "declined", never given a speedup; a profile-mode arm is
slowed on purpose and is not judged. Runs set aside for their host (analyze.spoiled) are left out
of every reading and still count towards the contended share.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from harness.analyze import contended, rounds, spoiled
from harness.analyze.design import Design
from harness.analyze.paired import Paired
from harness.core.runs import RecordData, as_record, measured_ok_runs
from harness.core.schema import Record, Run
from harness.core.suitespec import Settings

# What an arm's verdict can be. The first four are the paired reading's (arm over classic,
# ms/token: "slower" is the paired "worse").
SLOWER, FASTER, SAME, INCONCLUSIVE = "slower", "faster", "same", "inconclusive"
DECLINED = "declined"        # asked to speculate, decoded classic (the engine's gate declined)
REFERENCE = "reference"      # a classic arm: what the others are judged against
PROFILED = "profiled"        # the engine's profile mode: slowed on purpose, not judged
NO_REFERENCE = "no classic"  # no classic arm of its pairing ran, so nothing to judge against
NO_RUNS = "no runs"          # no measured run finished ok
OUTCOMES = (SLOWER, FASTER, SAME, INCONCLUSIVE, DECLINED, REFERENCE, PROFILED, NO_REFERENCE, NO_RUNS)
_FROM_PAIRED = {"worse": SLOWER, "improved": FASTER, "unchanged": SAME, "inconclusive": INCONCLUSIVE}


@dataclass(frozen=True)
class ArmVerdict:
    """One arm of a record, judged."""

    arm: str
    outcome: str                    # one of OUTCOMES
    classic: str | None             # the arm it is judged against (None: a classic arm, or none ran)
    # The paired reading of ms/token, this arm over its classic arm, by prompt and repetition
    # (None where there is no judgement: declined, reference, profiled, no classic, no runs).
    reading: Paired | None
    threshold: float                # the change the check had to be able to see
    runs: int                       # measured runs that finished ok, over all prompts
    failed: int                     # measured runs that failed
    tok_s: float | None             # geometric mean over prompts of the median tok/s (description)
    spread: float | None            # the largest per-prompt spread, (max - min) / median
    shipping: bool                  # no override, the engine's own gate decided
    overrides: dict[str, str] = field(default_factory=dict)
    do_not_publish: bool = False
    # Short marks a reader needs next to the figures: "unstable", "contended", "1 run", "failed",
    # "quiet timeout", "quick", "no cooldown" (the renderers give each its words).
    marks: tuple[str, ...] = ()
    # Runs of the pairs behind the reading that were contended (or set aside for their host, so
    # not in the reading), and how many runs there were.
    contended_runs: int = 0
    paired_runs: int = 0

    @property
    def judged(self) -> bool:
        return self.reading is not None and self.reading.ratio is not None

    @property
    def change(self) -> float | None:
        """The paired change in ms/token, arm over classic, minus one (+0.12: 12% slower)."""
        r = self.reading
        return None if r is None or r.ratio is None else r.ratio - 1.0

    @property
    def interval(self) -> tuple[float, float] | None:
        r = self.reading
        return None if r is None or r.lo is None or r.hi is None else (r.lo - 1.0, r.hi - 1.0)

    @property
    def detectable(self) -> float | None:
        return None if self.reading is None else self.reading.detectable


@dataclass(frozen=True)
class Judgement:
    """A record's arms, judged; and what every judgement rests on."""

    arms: list[ArmVerdict]
    paired_when: str                # "during the session" (budgeted) or "after the session" (one look)
    complete: bool
    measured: int                   # measured runs
    failed: int
    contended: int                  # measured runs marked contended

    def of(self, arm: str) -> ArmVerdict:
        return next(v for v in self.arms if v.arm == arm)

    @property
    def judged(self) -> list[ArmVerdict]:
        return [v for v in self.arms if v.judged and v.outcome != DECLINED]

    def best(self) -> ArmVerdict | None:
        """The judged arm with the lowest paired ms/token ratio to classic."""
        def ratio(v: ArmVerdict) -> float:
            assert v.reading is not None and v.reading.ratio is not None   # a judged arm has both
            return v.reading.ratio
        arms = self.judged
        return min(arms, key=ratio) if arms else None


def _design(settings: Settings, figures: int) -> Design:
    return Design(threshold=float(settings.threshold or 0.10), alpha=float(settings.alpha or 0.05),
                  looks=1, figures=max(1, figures))


def _readings(record: RecordData, rec: Record) -> tuple[dict[str, Paired], str]:
    """Each speculative arm's paired reading: the session's own where it judged during the session
    (a budget), else judged now at one look."""
    from harness.analyze.comparisons import judge_vs_classic, vs_classic
    from harness.analyze.summary import look_readings
    if rec.sequential is not None and rec.sequential.looks:
        return look_readings(rec.sequential.looks[-1]), "during the session"
    arms = vs_classic(record)
    return judge_vs_classic(record, _design(rec.suite.settings, len(arms))), "after the session"


def _marks(runs: list[Run], ok: list[Run], settings: Settings,
           quick: bool, spread: float | None, per_prompt_runs: list[int]) -> tuple[str, ...]:
    from harness.analyze.summary import has_cooldown
    run_marks = [m for r in runs for m in r.marks]
    out = []
    if spread is not None and spread > float(settings.spread_threshold or 0.04):
        out.append("unstable")
    if "contended" in run_marks:
        out.append("contended")
    # Set aside for the host (a backup, battery, thermal pressure, the GPU): each reason a mark.
    host = {why for r in runs if not r.warmup for why in spoiled.reasons(r)}
    out += [why for why in spoiled.REASONS if why in host]
    if any(n == 1 for n in per_prompt_runs):
        out.append("1 run")
    if len(ok) < len(runs):
        out.append("failed")
    if "quiet_wait_timeout" in run_marks:
        out.append("quiet timeout")
    if quick:
        out.append("quick")
    elif not has_cooldown(settings):
        out.append("no cooldown")
    return tuple(out)


def judge(record: RecordData) -> Judgement:
    """Every arm of `record` (a record's data, any schema version load_record gives) judged."""
    from harness.analyze.comparisons import classic_arm_for, pairing_targets
    from harness.analyze.summary import summarize
    rec = as_record(record)
    suite = rec.suite
    settings = suite.settings
    quick = bool(rec.quick)
    typed = rec.runs
    rows = summarize(record, typed)
    readings, when = _readings(record, rec)
    measured = [r for r in typed if not r.warmup]
    targets = pairing_targets(suite)
    out = []
    for a in suite.arms:
        name = a.name
        runs = [r for r in measured if r.arm == name]
        ok = measured_ok_runs(runs)
        mine = [s for s in rows if s.arm == name]
        tps = [s.tok_s_median for s in mine if s.tok_s_median]
        spreads = [s.spread for s in mine if s.spread is not None]
        spread = max(spreads) if spreads else None
        overrides: dict[str, str] = {}
        for r in runs:
            overrides.update(r.overrides)
        classic = None if a.block == 1 else classic_arm_for(a, suite.arms, targets)
        reading = readings.get(name)
        if not ok:
            outcome = NO_RUNS
        elif a.block == 1:
            outcome = REFERENCE
        elif all(s.declined for s in mine if s.runs) or not rounds.engaged(ok):
            outcome, reading = DECLINED, None
        elif rounds.profiled_arm(record, name, overrides):
            outcome, reading = PROFILED, None
        elif classic is None:
            outcome, reading = NO_REFERENCE, None
        elif reading is None or reading.ratio is None:
            outcome = INCONCLUSIVE   # no pairs, or too few: said by the reading's note
        else:
            outcome = INCONCLUSIVE if reading.contended else _FROM_PAIRED.get(reading.verdict, INCONCLUSIVE)
        pair_runs = [r for r in ok if classic] + [r for r in measured if classic and r.arm == classic.name
                                                  and r.measured_ok]
        out.append(ArmVerdict(
            arm=name, outcome=outcome, classic=classic.name if classic else None, reading=reading,
            threshold=float(settings.threshold or 0.10), runs=len(ok), failed=len(runs) - len(ok),
            tok_s=math.exp(sum(map(math.log, tps)) / len(tps)) if tps else None, spread=spread,
            shipping=bool(runs) and all(r.shipping for r in runs), overrides=dict(sorted(overrides.items())),
            do_not_publish=any(s.do_not_publish for s in mine), marks=_marks(runs, ok, settings, quick, spread, [s.runs for s in mine]),
            contended_runs=sum(map(contended.is_contended, pair_runs)), paired_runs=len(pair_runs)))
    return Judgement(arms=out, paired_when=when, complete=rec.complete is not False,
                     measured=len(measured), failed=sum(not r.is_ok for r in measured),
                     contended=sum(map(contended.is_contended, measured)))
