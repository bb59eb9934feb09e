"""Plans: warm-ups first and marked, arms interleaved per repetition, start arm rotated."""

from __future__ import annotations

from pathlib import Path

from harness_helpers import command_arm, write_suite

from harness.collect.plan import build_plan
from harness.collect.suite import load_suite


def _suite(tmp: Path, **settings):
    arms = [command_arm("a"), command_arm("b", 2), command_arm("c", 3)]
    prompts = [{"name": "p1", "text": "x"}, {"name": "p2", "text": "y"}]
    return load_suite(write_suite(tmp, arms, prompts=prompts, **settings))


def test_counts_and_indices(tmp_path: Path) -> None:
    plan = build_plan(_suite(tmp_path, repetitions=3, warmups=1))
    assert len(plan) == 3 * 1 + 3 * 2 * 3
    assert [p.index for p in plan] == list(range(len(plan)))


def test_warmups_first_and_marked(tmp_path: Path) -> None:
    plan = build_plan(_suite(tmp_path, repetitions=2, warmups=2))
    flags = [p.warmup for p in plan]
    assert flags == [True] * 6 + [False] * 12
    assert {p.arm for p in plan[:3]} == {"a", "b", "c"}


def test_interleaved_and_rotated(tmp_path: Path) -> None:
    plan = [p for p in build_plan(_suite(tmp_path, repetitions=4, warmups=0))]
    for r in range(4):
        rep = [p for p in plan if p.repetition == r]
        for prompt in ("p1", "p2"):
            order = [p.arm for p in rep if p.prompt == prompt]
            assert sorted(order) == ["a", "b", "c"]                  # every arm once
            assert order[0] == ["a", "b", "c"][r % 3]                # start rotates
    # the interleaving: no arm runs twice in a row within a repetition's prompt block
    assert [p.arm for p in plan[:3]] == ["a", "b", "c"]
    assert [p.arm for p in plan[6:9]] == ["b", "c", "a"]


def test_deterministic(tmp_path: Path) -> None:
    # Two suites loaded from two files give the same plan, run for run (no randomness, no
    # dependence on object identity), and the order is the documented rotation.
    (tmp_path / "one").mkdir(), (tmp_path / "two").mkdir()
    a = build_plan(_suite(tmp_path / "one", repetitions=2, warmups=1))
    b = build_plan(_suite(tmp_path / "two", repetitions=2, warmups=1))
    assert a == b
    measured = [(p.arm, p.prompt, p.repetition) for p in a if not p.warmup]
    assert measured == [("a", "p1", 0), ("b", "p1", 0), ("c", "p1", 0), ("a", "p2", 0), ("b", "p2", 0), ("c", "p2", 0),
                        ("b", "p1", 1), ("c", "p1", 1), ("a", "p1", 1), ("b", "p2", 1), ("c", "p2", 1), ("a", "p2", 1)]
