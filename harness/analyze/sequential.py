"""A time budget instead of a fixed count: keep adding interleaved rounds until every compared
figure can see its threshold, the budget is spent, or the looks are used up.

The budget counts measuring: the caller runs its warm-ups (model loads, kernel compiles) first
(harness.collect.sampling, the session around this loop, starts the clock after them).
The stopping rule (docs/statistics.md): at most `looks` looks. Look j is due once the session
has spent j / looks of its budget, or when the next round would not fit; the minimum number of
rounds always runs first. Each look is judged at its alpha-spending boundary
(harness.analyze.spending), from the share of the budget spent when it was taken (1.0 for the
look the check ends on for want of budget or rounds: it spends what is left) and the rounds
complete at each look so far; so the chance of any false alarm over all looks stays at alpha
whatever the looks saw. A figure needs no more data once it is unchanged within the threshold,
or worse or improved with a smallest detectable change within the threshold (a change caught
before the check could see the threshold, "+14.6% (+0.4% to +30.7%)", is sampled on until its
size is known to within it); when every figure needs no more, sampling stops.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from harness.analyze.paired import Paired

STOPS = {
    "resolved": "every compared figure resolved its threshold",
    "budget": "the time budget was spent",
    "max_rounds": "the maximum number of rounds was reached",
    "looks": "the last look was taken",
    "fixed": "a fixed number of rounds (no budget)",
    "nothing_to_compare": "nothing to compare (one arm, no paired figure): the repetitions only; "
                          "a budget adds no rounds",
}


@dataclass
class Look:
    index: int                      # 1-based
    rounds: int                     # rounds complete at this look
    elapsed_s: float
    # The share of the budget spent when this look was taken, for its boundary (1.0: the last
    # look, which spends what is left). Records before 2026-12-06 have none.
    time: float
    figures: dict[str, dict[str, Any]]  # name -> Paired.to_dict()
    resolved: bool


@dataclass
class Outcome:
    rounds: int
    stopped: str                    # a key of STOPS
    looks: list[Look] = field(default_factory=list)
    round_s: list[float] = field(default_factory=list)

    @property
    def final(self) -> dict[str, dict[str, Any]]:
        return self.looks[-1].figures if self.looks else {}

    def schedule(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        """(times, sizes) of the looks taken: what the last look was judged at (Design.at_looks)."""
        return tuple(lk.time for lk in self.looks), tuple(float(lk.rounds) for lk in self.looks)

    def summary(self, design: dict[str, Any], budget_s: float | None, **bounds: int) -> dict[str, Any]:
        """What a record keeps of the session (its "sequential" block, a comparison's
        "sequential"): the design at the look it stopped at, the budget, the caller's round
        bounds, then this outcome."""
        return {"design": design, "budget_s": budget_s, **bounds, **self.to_dict()}

    def to_dict(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "stopped": self.stopped, "stopped_because": STOPS[self.stopped],
                "looks": [asdict(lk) for lk in self.looks],
                "round_s": [round(x, 3) for x in self.round_s]}


def run(min_rounds: int, max_rounds: int, budget_s: float | None, looks: int,
        do_round: Callable[[int], None],
        analyze: Callable[[tuple[float, ...], tuple[float, ...]], dict[str, Paired]],
        started: float | None = None, clock: Callable[[], float] = time.monotonic,
        compares: bool = True) -> Outcome:
    """Run rounds 0, 1, ... through do_round(i) and take each look with analyze(times, sizes) under
    the rule above: the looks' budget shares and rounds so far, this look's last.

    budget_s None: exactly min_rounds rounds and one look (a fixed design). compares False (one
    arm, no paired figure): min_rounds rounds and one look whatever the budget, since more rounds
    resolve nothing (a one-arm nightly suite once sampled 110 runs a commit instead of 7)."""
    if min_rounds < 1 or max_rounds < min_rounds:
        raise ValueError(f"need 1 <= min_rounds <= max_rounds, got {min_rounds}, {max_rounds}")
    start = clock() if started is None else started
    out = Outcome(rounds=0, stopped="fixed")

    def one_round() -> None:
        t = clock()
        do_round(out.rounds)
        out.rounds += 1
        out.round_s.append(clock() - t)

    while out.rounds < min_rounds:
        one_round()
    if not compares and budget_s is not None:
        out.looks.append(Look(1, out.rounds, round(clock() - start, 3), 1.0, {}, True))
        out.stopped = "nothing_to_compare"
        return out
    k = 1 if budget_s is None else looks
    while True:
        elapsed = clock() - start
        nxt = statistics.median(out.round_s[-3:])
        if budget_s is None:
            stop_reason = "fixed"
        elif out.rounds >= max_rounds:
            stop_reason = "max_rounds"
        elif elapsed + nxt > budget_s:
            stop_reason = "budget"
        else:
            stop_reason = ""
        # budget_s None has stop_reason "fixed", so the time test runs only with a budget.
        due = len(out.looks) < k and (bool(stop_reason) or (
            budget_s is not None and elapsed >= (len(out.looks) + 1) * budget_s / k))
        if due:
            j = len(out.looks) + 1
            if budget_s is None or stop_reason or j == k:
                share = 1.0
            else:   # a round runs between two looks, so a later look is later; never 1.0 early
                share = min(max(elapsed / budget_s, out.looks[-1].time + 1e-6 if out.looks else 0.0), 1.0 - 1e-6)
            times, sizes = out.schedule()
            figs = analyze(times + (share,), sizes + (float(out.rounds),))
            resolved = all(p.resolved for p in figs.values())
            out.looks.append(Look(j, out.rounds, round(elapsed, 3), share,
                                  {n: p.to_dict() for n, p in figs.items()}, resolved))
            if not figs and budget_s is not None:
                out.stopped = "nothing_to_compare"
                return out
            if resolved and budget_s is not None:
                out.stopped = "resolved"
                return out
            if len(out.looks) >= k and not stop_reason:
                out.stopped = "looks"
                return out
        if stop_reason:
            out.stopped = stop_reason
            return out
        one_round()
