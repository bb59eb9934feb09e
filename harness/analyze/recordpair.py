"""Two records side by side, computed once for the report's comparison section: whether they
are one host's before and after or two hosts, each arm's and prompt's ms/token change, every
component's change, the acceptance A/B of arms whose text is identical on both sides, and the
environment differences."""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.analyze import acceptance as acc
from harness.analyze import compare as cmp
from harness.analyze import envdiff
from harness.analyze.design import Design
from harness.analyze.facts import Facts


@dataclass(frozen=True)
class RecordPair:
    """Record A (before) and record B (after) compared."""

    cross: bool                                   # two hosts (else one host's before and after)
    per_arm: list[cmp.Throughput]                 # each arm's tok/s and ms/token change, every prompt
    per_prompt: list[cmp.Throughput]              # the same per arm and prompt
    changes: list[cmp.ComponentChange]            # each arm and prompt's ms/token change, then every component's
    components: list[list[cmp.ComponentChange]]   # the component changes (ms/token left out) per arm and prompt
    design: Design                                # the paired check's design, from A's settings
    repetitions: int                              # the fewer of the two records' repetitions
    acceptance: list[acc.PairedAB]                # per arm (A's order) whose text is identical on both sides
    env: list[envdiff.EnvDifference]              # every environment difference
    env_compared: list[str]                       # what the environment comparison looked at

    @property
    def multi_prompt(self) -> bool:
        return len({x.prompt for x in self.per_prompt}) > 1

    @property
    def component_changes(self) -> list[cmp.ComponentChange]:
        return [c for c in self.changes if c.component != cmp.MS_PER_TOKEN]


def compare_records(fa: Facts, fb: Facts) -> RecordPair:
    """A one-line UserError where the two records cannot be compared (their pairings differ)."""
    cmp.check_comparable(fa.record, fb.record, fa.path, fb.path)
    per_arm, per_prompt = cmp.throughput_changes(fa.record, fb.record)
    changes = [x.ms for x in per_prompt if x.ms is not None] + cmp.component_changes(fa.record, fb.record)
    groups: dict[tuple[str, str], list[cmp.ComponentChange]] = {}
    for c in changes:
        if c.component != cmp.MS_PER_TOKEN:
            groups.setdefault((c.arm, c.prompt), []).append(c)
    ab = []
    for arm in fa.arm_order:
        if arm not in fb.arms or fa.arms[arm].block == 1 or not (fa.engaged(arm) and fb.engaged(arm)):
            continue
        ra = acc.first_runs({p: fa.groups.get((arm, p), []) for p in fa.prompts})
        rb = acc.first_runs({p: fb.groups.get((arm, p), []) for p in fb.prompts})
        if acc.identical_text(ra, rb):
            ab.append(acc.paired(arm, ra, arm, rb))
    return RecordPair(
        cross=not cmp.same_host(fa.record, fb.record), per_arm=per_arm, per_prompt=per_prompt, changes=changes,
        components=list(groups.values()), design=cmp.design_for(fa.settings),
        repetitions=min(fa.settings.repetitions, fb.settings.repetitions), acceptance=ab,
        env=envdiff.env_diff(fa.record, fb.record), env_compared=envdiff.compared(fa.record, fb.record))


def by_verdict(changes: list[cmp.ComponentChange]) -> dict[str, list[cmp.ComponentChange]]:
    """The changes grouped by verdict, each group in the changes' order."""
    by: dict[str, list[cmp.ComponentChange]] = {}
    for c in changes:
        by.setdefault(c.verdict, []).append(c)
    return by


def detectable_range(changes: list[cmp.ComponentChange]) -> list[float]:
    """The finite smallest detectable changes of `changes`, least first, and the greatest last."""
    dets = [c.judged.detectable for c in changes
            if c.judged.detectable is not None and math.isfinite(c.judged.detectable)]
    return [min(dets), max(dets)] if len(dets) > 1 else dets
