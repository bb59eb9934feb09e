"""How big a suite's plan is, from its counts alone, and the bounds a session is held to.

The plan is a list of runs (harness.collect.plan), and every run lands in the record; a suite
that asks for 10^17 repetitions used to build that list until memory ran out, with no word said.
So the size is computed arithmetically first, before any list exists:

- above MAX_RUNS runs, or above MAX_HOURS of estimated time, a session is refused in one line
  unless `--yes` is given (a long soak is allowed, a typo is caught);
- above ABSURD_RUNS runs, or ABSURD_S of budget or estimate, it is refused even with `--yes`:
  no session finishes it (at a second a run, a million runs is 11 days, and a record of that many
  runs is gigabytes).

The estimate is a floor, so it errs short: every measured run's cooldown floor, and every run's
max_tokens at FAST_S_PER_TOKEN (a fast engine), or the time budget where that is longer.
"""

from __future__ import annotations

from harness.collect.suite.model import Settings
from harness.core.errors import UserError

MAX_RUNS = 10_000
MAX_HOURS = 24.0
ABSURD_RUNS = 1_000_000
ABSURD_S = 366 * 24 * 3600.0
FAST_S_PER_TOKEN = 0.001


def plan_runs(arms: int, prompts: int, warmups: int, repetitions: int) -> int:
    """build_plan's length: one warm-up per arm per warm-up round, every arm on every prompt per repetition."""
    return arms * warmups + arms * prompts * repetitions


def estimate_s(s: Settings, arms: int, prompts: int) -> float:
    measured = arms * prompts * s.repetitions
    runs = measured + arms * s.warmups
    floor = measured * s.cooldown_s + runs * s.max_tokens * FAST_S_PER_TOKEN
    # With a budget, rounds are added after the warm-ups until it is spent (the minimum always runs).
    return floor if s.budget_s is None else max(floor, arms * s.warmups * s.max_tokens * FAST_S_PER_TOKEN
                                                + s.budget_s)


def _shape(arms: int, prompts: int, warmups: int, repetitions: int) -> str:
    return (f"{arms} arm(s) x {prompts} prompt(s) x {repetitions:,} repetition(s)"
            + (f" + {arms * warmups:,} warm-up run(s)" if warmups else ""))


def absurd(s: Settings, arms: int, prompts: int) -> tuple[str, str] | None:
    """(key, what is wrong) when the suite asks for what no session finishes; None otherwise."""
    runs = plan_runs(arms, prompts, s.warmups, s.repetitions)
    if runs > ABSURD_RUNS:
        key = "warmups" if arms * s.warmups > ABSURD_RUNS else "repetitions"
        return key, (f"{_shape(arms, prompts, s.warmups, s.repetitions)} is {runs:,} runs, more than any session "
                     f"can finish (at most {ABSURD_RUNS:,}); lower it")
    if s.max_repetitions is not None and plan_runs(arms, prompts, s.warmups, s.max_repetitions) > ABSURD_RUNS:
        n = plan_runs(arms, prompts, s.warmups, s.max_repetitions)
        return "max_repetitions", (f"{_shape(arms, prompts, s.warmups, s.max_repetitions)} is {n:,} runs, more "
                                   f"than any session can finish (at most {ABSURD_RUNS:,}); lower it")
    if s.budget_s is not None and s.budget_s > ABSURD_S:
        return "budget_s", f"{s.budget_s:g} s is more than a year, which no session finishes; lower it"
    return None


def check_size(s: Settings, arms: int, prompts: int, where: str, yes: bool) -> None:
    """One line (UserError) when the session is too big: above the bounds unless `yes`, absurd always."""
    bad = absurd(s, arms, prompts)
    if bad is not None:
        raise UserError(f"{where}: {bad[0]}: {bad[1]}")
    runs = plan_runs(arms, prompts, s.warmups, s.repetitions)
    est = estimate_s(s, arms, prompts)
    if est > ABSURD_S:
        raise UserError(f"{where}: the session would take at least {est / 86400:,.0f} days "
                        f"({runs:,} runs, max_tokens {s.max_tokens:,}); no session finishes that; lower it")
    if yes:
        return
    if runs > MAX_RUNS:
        raise UserError(f"{where}: the plan is {runs:,} runs ({_shape(arms, prompts, s.warmups, s.repetitions)}), "
                        f"above the bound of {MAX_RUNS:,}; pass --yes to run it anyway, or lower repetitions")
    if est > MAX_HOURS * 3600:
        raise UserError(f"{where}: the session would take at least {est / 3600:,.1f} h ({runs:,} runs, a "
                        f"{s.cooldown_s:g} s cooldown before each measured one, max_tokens {s.max_tokens:,}"
                        + (f", budget_s {s.budget_s:g}" if s.budget_s is not None else "")
                        + f"), above the bound of {MAX_HOURS:g} h; pass --yes to run it anyway")
