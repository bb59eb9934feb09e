"""A budget adds no rounds when nothing is compared: a one-arm suite with budget_s
runs its repetitions and stops, where a nightly sampled 106-113 runs a commit instead of 7."""

from __future__ import annotations

from harness_helpers import cli_in_process, command_arm, load, write_suite

from harness.analyze import sequential


def test_one_arm_command_suite_with_budget_runs_its_repetitions_only(tmp_path, monkeypatch, capsys):
    suite = write_suite(tmp_path, [command_arm("classic")], repetitions=3, budget_s=20)
    rec = tmp_path / "r.json"
    r = cli_in_process(["run", str(suite), "--record", str(rec)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    data = load(rec)
    measured = [x for x in data["runs"] if not x.get("warmup")]
    assert len(measured) == 3
    seq = data["sequential"]
    assert (seq["stopped"], seq["rounds"], seq["budget_s"]) == ("nothing_to_compare", 3, 20)
    assert "a budget adds no rounds" in seq["stopped_because"]


def test_sequential_run_with_nothing_compared_takes_one_look_after_the_minimum():
    rounds: list[int] = []
    clock = iter(float(i) for i in range(1000))
    out = sequential.run(7, 10_000, 600.0, 4, rounds.append, lambda t, s: {},
                         clock=lambda: next(clock), compares=False)
    assert rounds == list(range(7))
    assert (out.rounds, out.stopped, len(out.looks)) == (7, "nothing_to_compare", 1)
