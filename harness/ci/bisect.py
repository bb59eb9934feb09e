"""`harness bisect GOOD BAD --arm A --figure F`: the first commit of GOOD..BAD (first-parent
history) at which one figure of one arm got worse, found by paired checks.

First GOOD against BAD, to confirm the step is there at all. Then a binary search: each trial
is the paired comparison of `harness compare-commits` (the two commits run by run on this host,
judged on per-pair ratios) between the latest commit known good and the middle of what is
left. "worse" moves the bad end there; "unchanged" or "improved" moves the good end; an
inconclusive trial stops the search and the answer is the range that is left (a trial cannot
be trusted to say good or bad when it could not see the threshold). Each trial is reported.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.analyze import acks as ackmod
from harness.analyze import paired
from harness.ci.build import rev_parse
from harness.ci.twocommits import Comparison, compare_commits
from harness.core.errors import UserError


@dataclass
class Trial:
    """One trial of the search: `commit` measured against `good` by a paired compare-commits."""
    good: str
    commit: str
    verdict: str
    change: str
    detectable: str
    pairs: int
    seconds: float


@dataclass
class Bisection:
    arm: str
    figure: str
    good: str
    bad: str
    trials: list[Trial] = field(default_factory=list)
    first_bad: str | None = None
    range: list[str] = field(default_factory=list)   # what is left when the search stopped
    stopped: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"kind": "harness.bisect", "arm": self.arm, "figure": self.figure, "good": self.good,
                "bad": self.bad, "first_bad": self.first_bad, "range": self.range, "stopped": self.stopped,
                "trials": [p.__dict__ for p in self.trials]}


def first_parent_range(repo: Path, good: str, bad: str) -> list[str]:
    """The commits after GOOD up to BAD, oldest first."""
    r = subprocess.run(["git", "rev-list", "--first-parent", "--reverse", f"{good}..{bad}"], cwd=repo,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise UserError(f"bisect: git cannot list {good[:12]}..{bad[:12]} in {repo}: {r.stderr.strip()[-200:]}")
    commits = r.stdout.split()
    if not commits:
        raise UserError(f"bisect: no commits between {good[:12]} and {bad[:12]} (is GOOD an ancestor of BAD?)")
    return commits


def pick(c: Comparison, arm: str, figure: str) -> paired.Paired:
    """The trial's verdict on the one figure being bisected."""
    for f in c.figures:
        if f.arm == arm and figure in ackmod.figure_names(f.figure):
            return f.result
    have = sorted({f"{f.arm} {f.figure}" for f in c.figures})
    raise UserError(f"bisect: no figure {figure!r} of arm {arm!r} in this suite's check (it has: {', '.join(have)})")


def bisect(repo: Path, good: str, bad: str, arm: str, figure: str, suite: Any, work: Path,
           report: Callable[[Trial], None] | None = None,
           compare: Callable[..., Comparison] = compare_commits, console: Any = None) -> Bisection:
    good_sha, bad_sha = rev_parse(repo, good), rev_parse(repo, bad)
    left = first_parent_range(repo, good_sha, bad_sha)
    b = Bisection(arm, figure, good_sha, bad_sha)

    def trial(lo: str, mid: str) -> str:
        # A commit tried again is not rebuilt (harness.ci.build keeps its built tree).
        c = compare(repo, lo, mid, suite, work / f"{len(b.trials):02d}-{mid[:12]}",
                    command=["harness", "bisect", good, bad], console=console)
        r = pick(c, arm, figure)
        p = Trial(lo, mid, r.verdict, paired.ratio_text(r), paired.detectable_text(r), r.n, round(c.duration_s, 1))
        b.trials.append(p)
        if report:
            report(p)
        return r.verdict

    first = trial(good_sha, bad_sha)
    if first != "worse":
        b.range, b.stopped = left, f"{bad[:12]} is not worse than {good[:12]} here ({first}): nothing to bisect"
        return b
    lo = good_sha
    while len(left) > 1:
        i = (len(left) - 1) // 2
        v = trial(lo, left[i])
        if v == "worse":
            left = left[:i + 1]
        elif v in ("unchanged", "improved"):
            lo, left = left[i], left[i + 1:]
        else:
            b.range, b.stopped = left, f"a trial was inconclusive at {left[i][:12]}: the step is in this range"
            return b
    b.first_bad, b.range, b.stopped = left[0], left, "found"
    return b
