"""The quiet wait sized to the work: where a suite leaves [quiet] settle_s and
timeout_s unset, each run's gate waits clamp(k x the arm's previous run, floor, the old fixed
default), so a 20 ms run never waits 120 s for a quiet host; a suite's own values are kept; the
values each run's gate used are recorded and the waiting line says them."""

from __future__ import annotations

import json

import pytest
from harness_helpers import cli_in_process, command_arm, write_suite

from harness.analyze.summary import waiting_lines
from harness.collect.host import quiet as host_quiet
from harness.collect.host.quiet import wait_limits
from harness.collect.suite import load_suite, suite_from_record


@pytest.mark.parametrize("expected, settle, timeout", [
    (0.02, 0.5, 1.0),       # a 20 ms run: the floors, not 3 s and 120 s
    (0.2, 0.5, 4.0),        # 20 runs' length
    (1.0, 2.0, 20.0),
    (6.0, 3.0, 120.0),      # a run of 6 s or more: the old fixed defaults
    (60.0, 3.0, 120.0),
    (None, 0.5, 1.0),       # a session's first run: nothing to size from
])
def test_unset_limits_scale_with_the_expected_run(expected, settle, timeout):
    lim = wait_limits(None, None, expected)
    assert (lim.settle_s, lim.timeout_s) == pytest.approx((settle, timeout))
    assert lim.sized == ("settle_s", "timeout_s")


def test_limits_the_suite_sets_are_used_as_they_are():
    lim = wait_limits(7.0, 300.0, 0.02)
    assert (lim.settle_s, lim.timeout_s, lim.sized) == (7.0, 300.0, ())
    one = wait_limits(None, 300.0, 0.02)
    assert (one.settle_s, one.timeout_s, one.sized) == (0.5, 300.0, ("settle_s",))


def test_unset_quiet_limits_load_as_none_and_survive_the_record(tmp_path):
    unset = load_suite(write_suite(tmp_path, [command_arm("a")], quiet={"enabled": True}))
    assert (unset.settings.quiet.settle_s, unset.settings.quiet.timeout_s) == (None, None)
    again = suite_from_record(json.loads(json.dumps(unset.to_dict())), "rec.json")
    assert again.settings.quiet.timeout_s is None
    fixed = load_suite(write_suite(tmp_path, [command_arm("a")], quiet={"timeout_s": 45, "settle_s": 2}))
    assert (fixed.settings.quiet.settle_s, fixed.settings.quiet.timeout_s) == (2.0, 45.0)


def _timed_out_wait(self, cooldown_s=0.0, on_tick=None):
    return {"waited_s": 0.0, "cooldown_s": cooldown_s, "total_s": 0.0, "timed_out": True,
            "samples": 2, "busy_samples": 2, "timeout_s": self.timeout_s, "settle_s": self.settle_s}


def test_each_run_records_the_limits_its_gate_used_sized_to_the_arms_previous_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(host_quiet.QuietWait, "wait", _timed_out_wait)
    suite = write_suite(tmp_path, [command_arm("a"), command_arm("b")], repetitions=3, warmups=1,
                        quiet={"enabled": True})
    rec = tmp_path / "r.json"
    r = cli_in_process(["run", str(suite), "--record", str(rec)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = json.loads(rec.read_text())["runs"]
    walls: dict[str, float] = {}
    last = None
    for run in runs:
        gate = run["load"]["quiet_wait"]
        expected = walls.get(run["arm"], last)
        want = wait_limits(None, None, expected)
        assert gate["sized"] == ["settle_s", "timeout_s"]
        # The first run has no prediction: its expected_wall_s is left out (a load reading omits nulls).
        assert gate.get("expected_wall_s") == (None if expected is None else pytest.approx(expected, abs=1e-4))
        assert (gate["settle_s"], gate["timeout_s"]) == pytest.approx((want.settle_s, want.timeout_s))
        walls[run["arm"]] = last = run["wall_s"]
    assert max(run["load"]["quiet_wait"]["timeout_s"] for run in runs) < 120.0
    lines = r.stdout.splitlines()
    assert "[quiet] timeout_s (unset: sized to each run, " in lines[1]
    assert all(len(x) <= 80 for x in lines[:3])


def test_waiting_line_names_the_sized_span_and_the_setting():
    gate = {"sized": ["settle_s", "timeout_s"], "settle_s": 0.5, "threshold_pct": 15.0}
    runs = [{"index": i, "status": "ok", "wall_s": 0.02, "quiet_wait_s": t, "cooldown_s": 0.0,
             "marks": ["quiet_wait_timeout"], "load": {"quiet_wait": {**gate, "timeout_s": t}}}
            for i, t in enumerate((1.0, 2.4))]
    rec = {"schema_version": 5, "kind": "harness.record", "session_id": "t", "created": "2026-12-07T00:00:00",
           "session_wall_s": 4.0, "runs": runs,
           "suite": {"name": "s", "pairings": [], "arms": [], "prompts": [], "settings": {"quiet": {"enabled": True, "threshold_pct": 15.0,
                                            "settle_s": None, "timeout_s": None}}}}
    lines = waiting_lines(rec)
    assert lines[0] == "waited 3.4 s of 4.0 s for a quiet machine (2 quiet-wait timeouts);"
    assert lines[1] == "  [quiet] timeout_s (unset: sized to each run, 1-2.4 s here) governs it:"
    assert lines[2] == "  lower it on a busy host (the suite file)"
