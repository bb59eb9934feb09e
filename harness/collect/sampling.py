"""One sampling session, the loop `harness run` and compare-commits (pr-check, bisect) share:
the warm-ups, then measured rounds until the stopping rule stops, the budget's clock started
between the two; the caller's cleanup runs however it ends, and an interrupt goes on as
KeyboardInterrupt once it has run.

Analysis happens after collection, not inside it: the stopping rule
(harness.analyze.sequential.run) and its look (the paired verdicts so far) are handed in by the
composition root (cli/session.py, ci/twocommits.py), so this module runs what it is given, in order,
and judges nothing itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

# The most rounds a budget may add when the suite sets no max_repetitions.
DEFAULT_MAX_ROUNDS = 10_000

Outcome = TypeVar("Outcome", covariant=True)


@dataclass(frozen=True)
class Settings:
    """What bounds a session's rounds (the suite's settings, or a resumed record's)."""

    repetitions: int                # rounds that always run, budget or not
    max_repetitions: int | None     # the most rounds a budget may reach (None: DEFAULT_MAX_ROUNDS)
    budget_s: float | None          # measuring time after the warm-ups (None: `repetitions` rounds)
    looks: int                      # the most looks the stopping rule takes
    compares: bool = True           # False: nothing paired, so a budget adds no rounds

    @property
    def max_rounds(self) -> int:
        """The rounds the stopping rule may run at most: the minimum without a budget."""
        cap = self.max_repetitions or (DEFAULT_MAX_ROUNDS if self.budget_s else self.repetitions)
        return max(self.repetitions, cap)


class Rule(Protocol[Outcome]):
    """The stopping rule's signature (harness.analyze.sequential.run): rounds through do_round(i)
    and looks through analyze(times, sizes), the budget counted from `started` on `clock`."""

    def __call__(self, min_rounds: int, max_rounds: int, budget_s: float | None, looks: int,
                 do_round: Callable[[int], None], analyze: Callable[..., Any],
                 started: float | None = ..., clock: Callable[[], float] = ...,
                 compares: bool = ...) -> Outcome: ...


def sample(settings: Settings, warm_up: Callable[[], None], do_round: Callable[[int], None],
           look: Callable[..., Any], rule: Rule[Outcome],
           cleanup: Callable[[bool], None] = lambda interrupted: None,
           clock: Callable[[], float] = time.monotonic) -> Outcome:
    """warm_up(), then the rule's rounds and looks under `settings`; the rule's outcome.

    cleanup(interrupted) runs last whatever happened (interrupted: Ctrl-C); any exception,
    KeyboardInterrupt included, propagates after it."""
    interrupted = False
    try:
        warm_up()   # loading and compiling are not measuring: the budget's clock starts after
        return rule(settings.repetitions, settings.max_rounds, settings.budget_s, settings.looks,
                    do_round, look, started=clock(), clock=clock, compares=settings.compares)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        cleanup(interrupted)
