"""Acknowledgements: the file checked entry by entry, commits resolved with git, and what they cover."""

from __future__ import annotations

from pathlib import Path

import pytest
from asv_scratch import commit_all, git

from harness.analyze.acks import Ack, figure_names, find, parse
from harness.ci.ackfile import acks_for_check, load_acks
from harness.core.errors import UserError


@pytest.mark.parametrize("data, message", [
    ({"acknowledge": [{"commits": "abc", "reason": "x", "colour": "red"}]}, "acknowledge[0]: unknown key 'colour'"),
    ({"acknowledge": [{"commits": "abc"}]}, "acknowledge[0]: reason must be a non-empty string"),
    ({"acknowledge": [{"commits": "", "reason": "x"}]}, "acknowledge[0]: commits must be a non-empty string"),
    ({"acknowledge": [{"commits": "abc", "reason": "x", "arm": 3}]}, "acknowledge[0]: arm must be a string pattern"),
    ({"acknowledge": {"commits": "abc"}}, "acknowledge must be a list of tables"),
    ({"ack": []}, "expected only [[acknowledge]] entries"),
])
def test_a_malformed_entry_is_one_line_naming_it(data, message) -> None:
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse(data, "acks.toml")


def test_an_entry_covers_its_commits_figure_and_arm_only() -> None:
    a = Ack("c1", "ms/token", "block3*", "meant", frozenset({"c1"}))
    assert a.covers(["c0", "c1"], figure_names("ms/token"), "block3-inexact")
    assert a.covers(["c1"], figure_names("ms_per_token", "bench.Decode.track_ms_per_token"), "block3")
    assert not a.covers(["c2"], figure_names("ms/token"), "block3")           # another commit
    assert not a.covers(["c1"], figure_names("ms/token"), "classic")          # another arm
    assert not a.covers(["c1"], figure_names("ms/round"), "block3")           # another figure
    phase = Ack("c1", "phase ms/round: verify*", "*", "meant", frozenset({"c1"}))
    assert find([a, phase], ["c1"], figure_names("phase_ms_per_round:verify_forward"), "classic") is phase


def test_commits_resolve_with_git_one_or_a_range(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    shas = []
    for i in range(4):
        (repo / "f").write_text(str(i))
        shas.append(commit_all(repo, f"c{i}"))
    f = tmp_path / "acks.toml"
    f.write_text(f'[[acknowledge]]\ncommits = "{shas[1][:9]}..{shas[3][:9]}"\nreason = "two commits"\n'
                 f'[[acknowledge]]\ncommits = "{shas[0][:7]}"\nfigure = "ms/token"\nreason = "one"\n')
    ranged, one = load_acks(repo, f)
    assert ranged.commits == {shas[2], shas[3]} and one.commits == {shas[0]}
    acks, covered = acks_for_check(repo, f, shas[1], shas[3])
    assert sorted(covered) == sorted(shas[2:]) and len(acks) == 2
    f.write_text('[[acknowledge]]\ncommits = "deadbeef"\nreason = "x"\n')
    with pytest.raises(UserError, match=r"acknowledge\[0\]: commits 'deadbeef' names no commit"):
        load_acks(repo, f)
    f.write_text("[[acknowledge]\n")
    with pytest.raises(UserError, match="not valid TOML"):
        load_acks(repo, f)
    assert load_acks(repo, tmp_path / "absent.toml") == []
