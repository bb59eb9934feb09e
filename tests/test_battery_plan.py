"""The battery: a plan too big to finish is refused up front, through the real CLI in this process.

The plan's size is counted from the suite (arms x prompts x repetitions + warm-ups), never built
to be measured: above 10,000 runs or an estimated 24 h a session needs --yes (run, check,
baseline record); beyond what any session finishes (a million runs, a year) it is refused even
so, when the suite is read. Every refusal is one line, exit 2, before anything runs.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from harness_helpers import REPO, cli_in_process, command_arm, one_line, snapshot, write_suite

from harness.core.errors import UserError


def _wide(tmp: Path, arms: int, prompts: int, **settings) -> Path:
    """A suite of many arms and prompts (the fake engine never runs: the session is stopped first)."""
    return write_suite(tmp, [command_arm(f"a{i}") for i in range(arms)],
                       prompts=[{"name": f"p{i}", "text": f"prompt {i}"} for i in range(prompts)], **settings)


def _baselines(tmp: Path) -> Path:
    p = tmp / "baselines.json"
    p.write_text(json.dumps({"schema_version": 1, "kind": "harness.baselines", "entries": {}}))
    return p


def _session(command: str, suite: Path, tmp: Path, *extra: str) -> list[str]:
    argv = {"run": ["run"], "check": ["check"], "baseline": ["baseline", "record"]}[command]
    base = ["--baselines", str(_baselines(tmp))] if command == "check" else []
    return [*argv, str(suite), "--record", str(tmp / "r.json"), *base, *extra]


@pytest.fixture
def no_runs(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Building a plan list or measuring fails the test, unless a case lets the session start
    (then the measuring is a no-op and counted): every refusal must come first."""
    import harness.cli.session
    import harness.collect.plan
    import harness.collect.runner
    seen = {"executed": 0}

    def boom(*a, **k):
        raise AssertionError("a plan was built or measured before the one-line refusal")
    monkeypatch.setattr(harness.collect.runner, "execute", boom)
    monkeypatch.setattr(harness.collect.plan, "build_plan", boom)

    def executed(*a, **k):
        seen["executed"] += 1
    seen["allow"] = lambda: monkeypatch.setattr(harness.cli.session, "execute", executed)
    return seen


@dataclass
class Case:
    name: str
    command: str
    suite: Callable[[Path], Path]
    says: str
    extra: tuple[str, ...] = field(default_factory=tuple)


HUGE = 99999999999999999
REFUSED = [
    # Beyond any session: refused when the suite is read, --yes or not.
    Case("run huge repetitions", "run", lambda t: _wide(t, 1, 1, repetitions=HUGE),
         "repetitions: 1 arm(s) x 1 prompt(s) x 99,999,999,999,999,999 repetition(s) is "
         "99,999,999,999,999,999 runs, more than any session can finish (at most 1,000,000)"),
    Case("run huge repetitions with --yes", "run", lambda t: _wide(t, 1, 1, repetitions=HUGE),
         "more than any session can finish", ("--yes",)),
    Case("check huge repetitions in the suite", "check", lambda t: _wide(t, 1, 1, repetitions=HUGE),
         "more than any session can finish"),
    Case("baseline record huge warmups", "baseline", lambda t: _wide(t, 2, 1, warmups=HUGE),
         "warmups: 2 arm(s) x 1 prompt(s)"),
    Case("run huge max_repetitions with --yes", "run",
         lambda t: _wide(t, 2, 2, repetitions=2, max_repetitions=10 ** 9, budget_s=60),
         "max_repetitions: 2 arm(s) x 2 prompt(s) x 1,000,000,000 repetition(s)", ("--yes",)),
    Case("run budget of centuries with --yes", "run", lambda t: _wide(t, 1, 1, budget_s=1e10),
         "budget_s: 1e+10 s is more than a year", ("--yes",)),
    Case("run absurd max_tokens with --yes", "run", lambda t: _wide(t, 1, 1, max_tokens=10 ** 13),
         "no session finishes that", ("--yes",)),
    # Above the bounds: refused unless --yes.
    Case("run 10,001 runs", "run", lambda t: _wide(t, 1, 1, repetitions=10_001),
         "the plan is 10,001 runs (1 arm(s) x 1 prompt(s) x 10,001 repetition(s)), above the bound of 10,000; "
         "pass --yes to run it anyway"),
    Case("run huge prompts x arms", "run", lambda t: _wide(t, 40, 130, repetitions=2),
         "the plan is 10,400 runs (40 arm(s) x 130 prompt(s) x 2 repetition(s))"),
    Case("check huge prompts x arms", "check", lambda t: _wide(t, 80, 130),
         "the plan is 10,400 runs (80 arm(s) x 130 prompt(s) x 1 repetition(s))"),
    Case("baseline record huge prompts x arms", "baseline", lambda t: _wide(t, 40, 130),
         "the plan is 10,400 runs (40 arm(s) x 130 prompt(s) x 2 repetition(s))"),
    Case("run warm-ups push it over", "run", lambda t: _wide(t, 100, 1, repetitions=99, warmups=2),
         "the plan is 10,100 runs (100 arm(s) x 1 prompt(s) x 99 repetition(s) + 200 warm-up run(s))"),
    Case("run cooldowns over a day", "run", lambda t: _wide(t, 1, 2, repetitions=20, cooldown_s=3000),
         "the session would take at least 33.3 h (40 runs, a 3000 s cooldown before each measured one"),
    Case("run budget over a day", "run", lambda t: _wide(t, 1, 1, budget_s=100_000),
         "budget_s 100000), above the bound of 24 h; pass --yes"),
    Case("run max_tokens over a day", "run", lambda t: _wide(t, 1, 1, repetitions=2, max_tokens=50_000_000),
         "max_tokens 50,000,000), above the bound of 24 h"),
    Case("check max_tokens over a day", "check", lambda t: _wide(t, 1, 10, max_tokens=10_000_000),
         "the session would take at least 27.8 h (10 runs, a 0 s cooldown"),
    Case("baseline record max_tokens over a day", "baseline", lambda t: _wide(t, 1, 10, max_tokens=10_000_000),
         "the session would take at least 55.6 h (20 runs"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[c.name for c in REFUSED])
def test_refused_in_one_line_before_anything_runs(case: Case, tmp_path: Path, no_runs, monkeypatch,
                                                  capsys) -> None:
    argv = _session(case.command, case.suite(tmp_path), tmp_path, *case.extra)
    before = snapshot(tmp_path)
    t0 = time.monotonic()
    line = one_line(cli_in_process(argv, tmp_path, monkeypatch, capsys))
    assert time.monotonic() - t0 < 60, "the refusal took long: was the plan built?"
    assert case.says in line, line
    assert snapshot(tmp_path) == before, "a file changed or was written"
    assert no_runs["executed"] == 0


YES = [
    Case("run 10,001 runs with --yes", "run", lambda t: _wide(t, 1, 1, repetitions=10_001), "", ("--yes",)),
    # check and baseline record: a long generation per run (their few rows keep the summary short).
    Case("check max_tokens over a day with --yes", "check", lambda t: _wide(t, 1, 10, max_tokens=10_000_000), "",
         ("--yes",)),
    Case("baseline record max_tokens over a day with --yes", "baseline",
         lambda t: _wide(t, 1, 10, max_tokens=10_000_000), "", ("--yes",)),
    Case("run cooldowns over a day with --yes", "run",
         lambda t: _wide(t, 1, 2, repetitions=20, cooldown_s=3000), "", ("--yes",)),
]


@pytest.mark.parametrize("case", YES, ids=[c.name for c in YES])
def test_yes_lets_a_plan_above_the_bounds_start(case: Case, tmp_path: Path, no_runs, monkeypatch, capsys) -> None:
    import harness.collect.plan
    monkeypatch.undo()                    # building the plan is allowed here; measuring is counted
    no_runs["allow"]()
    argv = _session(case.command, case.suite(tmp_path), tmp_path, *case.extra)
    r = cli_in_process(argv, tmp_path, monkeypatch, capsys)
    assert "above the bound" not in r.stderr, r.stderr[-2000:]
    assert no_runs["executed"] == 1, r.stderr[-2000:]
    planned = json.loads((tmp_path / "r.json").read_text())["planned_runs"]
    assert planned == harness.collect.plan.plan_size(_suite_for(case, argv)), planned


def _suite_for(case: Case, argv: list[str]):
    """The suite the session planned: check and baseline record run 1 and 2 repetitions, no warm-up."""
    from harness.collect.suite import load_suite, with_settings
    s = load_suite(argv[2] if case.command == "baseline" else argv[1])
    reps = {"check": 1, "baseline": 2}.get(case.command)
    return s if reps is None else with_settings(s, repetitions=reps, warmups=0)


# --- the count itself ------------------------------------------------------------------------

@pytest.mark.parametrize("arms, prompts, warmups, reps", [(1, 1, 0, 1), (3, 2, 1, 5), (2, 4, 3, 2), (5, 1, 2, 7)],
                         ids=["one run", "three arms two prompts", "three warm-up rounds", "five arms"])
def test_the_counted_size_is_the_built_plans_length(arms, prompts, warmups, reps, tmp_path: Path) -> None:
    from harness.collect.plan import build_plan, plan_size
    from harness.collect.suite import load_suite
    suite = load_suite(_wide(tmp_path, arms, prompts, warmups=warmups, repetitions=reps))
    assert plan_size(suite) == len(build_plan(suite))
    assert plan_size(suite, 9) == len(build_plan(suite, 9))


def test_reading_a_suite_of_huge_repetitions_is_refused_at_once(tmp_path: Path) -> None:
    import tracemalloc

    from harness.collect.suite import load_suite
    path = _wide(tmp_path, 3, 2, repetitions=HUGE)
    tracemalloc.start()
    try:
        with pytest.raises(UserError, match=r"repetitions: .* more than any session can finish"):
            load_suite(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2 ** 20, peak


@pytest.mark.parametrize("suite", [REPO / "harness" / "suites" / "default.toml", REPO / "benchmarks" / "suite.toml",
                                   REPO / "harness" / "suites" / "cross-host.toml"],
                         ids=["default suite", "benchmarks suite", "cross-host suite"])
def test_the_shipped_suites_are_within_the_bounds(suite: Path) -> None:
    from harness.collect.plan import check_plan
    from harness.collect.suite import load_suite
    check_plan(load_suite(suite), yes=False)


def test_compare_commits_refuses_a_huge_suite_in_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    import harness.cli.compare_commits

    def boom(*a, **k):
        raise AssertionError("measuring started")
    monkeypatch.setattr(harness.cli.compare_commits, "compare_commits", boom)
    proj = tmp_path / "proj"
    proj.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=proj, check=True)
    suite = _wide(tmp_path, 1, 1, repetitions=HUGE)
    line = one_line(cli_in_process(["compare-commits", "HEAD", "HEAD", "--suite", str(suite), "--repo", str(proj)],
                                    proj, monkeypatch, capsys))
    assert "more than any session can finish" in line, line
