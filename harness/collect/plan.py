"""`Suite` -> list of `PlannedRun`: arms interleaved within each repetition, rotated.

Back-to-back repetitions of one arm drift (the verify shapes slow down while T=1 stays
flat), so every repetition visits every arm, and the arm that goes first rotates.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, TypeVar

from harness.collect.suite import Suite, size

T = TypeVar("T")


@dataclass(frozen=True)
class PlannedRun:
    index: int          # position in the plan; the record's run "index"
    arm: str
    pairing: str
    prompt: str
    repetition: int     # 0-based among measured repetitions; warm-ups count from 0 too
    warmup: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def rotated(items: list[T], start: int) -> list[T]:
    if not items:
        return []
    k = start % len(items)
    return items[k:] + items[:k]


def plan_size(suite: Suite, repetitions: int | None = None) -> int:
    """len(build_plan(suite, repetitions)), counted without building it."""
    reps = suite.settings.repetitions if repetitions is None else repetitions
    return size.plan_runs(len(suite.arms), len(suite.prompts), suite.settings.warmups, reps)


def check_plan(suite: Suite, yes: bool = False) -> None:
    """One line (UserError) before a session when its plan is above the bounds (harness.collect.suite.size)
    and `yes` (--yes) was not given, or absurd whatever was given."""
    size.check_size(suite.settings, len(suite.arms), len(suite.prompts), suite.path or suite.name, yes)


def build_plan(suite: Suite, repetitions: int | None = None) -> list[PlannedRun]:
    """Warm-ups first (one per arm per warm-up round, on the first prompt), then measured runs.

    Within a repetition the order is prompt by prompt, and for each prompt every arm, starting
    from arm (repetition mod n_arms). The plan is deterministic, which is what --resume needs,
    and a plan of more repetitions extends a shorter one (same indices), which is how a time
    budget adds rounds. `repetitions` replaces the suite's count.
    """
    arms = list(suite.arms)
    out: list[PlannedRun] = []
    first_prompt = suite.prompts[0].name
    # A warm-up only loads weights and compiles kernels; one prompt is enough for that.
    for w in range(suite.settings.warmups):
        for arm in rotated(arms, w):
            out.append(PlannedRun(len(out), arm.name, arm.pairing, first_prompt, w, True))
    for r in range(suite.settings.repetitions if repetitions is None else repetitions):
        for prompt in suite.prompts:
            for arm in rotated(arms, r):
                out.append(PlannedRun(len(out), arm.name, arm.pairing, prompt.name, r, False))
    return out
