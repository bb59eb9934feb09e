"""The sampling session (harness.collect.sampling) with fake callables on a fake clock: the
warm-ups before the budget's clock, the stopping rule's stops, and the cleanup on Ctrl-C."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from harness.analyze import sequential
from harness.collect import sampling
from harness.core.errors import UserError


@dataclass
class Reading:
    """What the rule reads of a look's figure (analyze.paired.Paired's part it uses)."""

    resolved: bool

    def to_dict(self) -> dict:
        return {"resolved": self.resolved}


@dataclass
class Fake:
    """A session of fake callables: each round takes `round_s` on the clock, the warm-ups
    `warm_s`; every call lands in `log` in order."""

    round_s: float = 1.0
    warm_s: float = 0.0
    resolve_at: int | None = None       # the rounds after which the look reads resolved
    interrupt_at: int | None = None     # the round that raises KeyboardInterrupt
    now: float = 0.0
    log: list[str] = field(default_factory=list)

    def clock(self) -> float:
        return self.now

    def warm_up(self) -> None:
        self.log.append("warm")
        self.now += self.warm_s

    def do_round(self, i: int) -> None:
        if i == self.interrupt_at:
            raise KeyboardInterrupt
        self.log.append(f"round {i}")
        self.now += self.round_s

    def look(self, times: tuple[float, ...], sizes: tuple[float, ...]) -> dict[str, Reading]:
        self.log.append(f"look after {int(sizes[-1])}")
        done = self.resolve_at is not None and sizes[-1] >= self.resolve_at
        return {"arm ms/token": Reading(done)}

    def cleanup(self, interrupted: bool) -> None:
        self.log.append(f"cleanup interrupted={interrupted}")

    def sample(self, settings: sampling.Settings) -> sequential.Outcome:
        return sampling.sample(settings, self.warm_up, self.do_round, self.look, sequential.run,
                               self.cleanup, clock=self.clock)


def rounds(log: list[str]) -> int:
    return sum(x.startswith("round") for x in log)


def test_max_rounds_is_the_minimum_without_a_budget_and_10000_with_one() -> None:
    assert sampling.Settings(3, None, None, 4).max_rounds == 3
    assert sampling.Settings(3, 50, None, 4).max_rounds == 50
    assert sampling.Settings(3, None, 60.0, 4).max_rounds == sampling.DEFAULT_MAX_ROUNDS == 10_000
    assert sampling.Settings(3, 50, 60.0, 4).max_rounds == 50
    assert sampling.Settings(7, 2, 60.0, 4).max_rounds == 7   # the minimum always runs


def test_without_a_budget_exactly_the_minimum_runs_then_one_look() -> None:
    f = Fake()
    out = f.sample(sampling.Settings(3, None, None, 4))
    assert (out.rounds, out.stopped, len(out.looks)) == (3, "fixed", 1)
    assert f.log == ["warm", "round 0", "round 1", "round 2", "look after 3", "cleanup interrupted=False"]


def test_stops_when_the_budget_is_spent() -> None:
    f = Fake(round_s=1.0)
    out = f.sample(sampling.Settings(2, None, 10.5, 1))
    assert out.stopped == "budget"
    assert out.rounds == rounds(f.log) == 10   # an 11th round of 1 s would end past 10.5 s
    assert f.log[-1] == "cleanup interrupted=False"


def test_stops_at_the_maximum_rounds() -> None:
    f = Fake(round_s=1.0)
    out = f.sample(sampling.Settings(2, 5, 1000.0, 1))
    assert (out.stopped, out.rounds, rounds(f.log)) == ("max_rounds", 5, 5)


def test_stops_when_the_look_says_every_figure_resolved() -> None:
    f = Fake(round_s=1.0, resolve_at=4)
    out = f.sample(sampling.Settings(2, None, 100.0, 4))
    assert out.stopped == "resolved"
    assert out.looks[-1].resolved and out.looks[-1].rounds >= 4
    assert out.rounds == rounds(f.log) < 100   # far short of what the budget would allow


def test_the_warm_ups_run_before_the_budget_clock_starts() -> None:
    # Warm-ups far longer than the budget: were they counted, no round past the minimum would fit.
    f = Fake(round_s=1.0, warm_s=1000.0)
    out = f.sample(sampling.Settings(2, None, 10.5, 1))
    assert f.log[0] == "warm" and f.log[1] == "round 0"
    assert (out.stopped, out.rounds) == ("budget", 10)
    assert out.looks[-1].elapsed_s == pytest.approx(10.0)   # measured from the end of the warm-ups


def test_an_interrupt_runs_the_cleanup_then_propagates() -> None:
    f = Fake(interrupt_at=2)
    with pytest.raises(KeyboardInterrupt):
        f.sample(sampling.Settings(5, None, None, 1))
    assert f.log == ["warm", "round 0", "round 1", "cleanup interrupted=True"]


def test_an_interrupt_during_the_warm_ups_runs_the_cleanup_and_no_round() -> None:
    f = Fake()

    def warm_up() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sampling.sample(sampling.Settings(3, None, None, 1), warm_up, f.do_round, f.look,
                        sequential.run, f.cleanup, clock=f.clock)
    assert f.log == ["cleanup interrupted=True"]


def test_another_error_runs_the_cleanup_as_not_interrupted_and_propagates() -> None:
    f = Fake()

    def warm_up() -> None:
        raise UserError("every warm-up run failed")

    with pytest.raises(UserError, match="every warm-up run failed"):
        sampling.sample(sampling.Settings(3, None, None, 1), warm_up, f.do_round, f.look,
                        sequential.run, f.cleanup, clock=f.clock)
    assert f.log == ["cleanup interrupted=False"]


def test_the_rule_gets_the_settings_and_the_clock_after_the_warm_ups() -> None:
    f = Fake(warm_s=42.0)
    seen: dict = {}

    def rule(min_rounds, max_rounds, budget_s, looks, do_round, analyze, started=None, clock=None,
             compares=True):
        seen.update(args=(min_rounds, max_rounds, budget_s, looks, compares), started=started)
        return "outcome"

    got = sampling.sample(sampling.Settings(3, None, 60.0, 4, compares=False), f.warm_up, f.do_round,
                          f.look, rule, f.cleanup, clock=f.clock)
    assert got == "outcome"
    assert seen == {"args": (3, 10_000, 60.0, 4, False), "started": 42.0}


def test_the_record_summary_keeps_the_key_order_of_both_callers() -> None:
    out = Fake().sample(sampling.Settings(2, None, None, 1))
    run = out.summary({"threshold": 0.1}, None, min_repetitions=2, max_repetitions=2)
    assert list(run)[:5] == ["design", "budget_s", "min_repetitions", "max_repetitions", "rounds"]
    check = out.summary({"threshold": 0.1}, 60.0)
    assert list(check)[:3] == ["design", "budget_s", "rounds"]
    assert check["stopped"] == "fixed" and check["budget_s"] == 60.0
