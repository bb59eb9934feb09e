"""Runner: marks, failures that do not stop the session, env isolation, ETA with cooldowns, the
cooldown rule, the watch's pacing, the thermal wait, and run_one driven from outside."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import msgspec
import pytest
from harness_helpers import command_arm, write_suite
from rich.console import Console

from harness.analyze.labels import annotate_label
from harness.collect import runner
from harness.collect.engines import Engines
from harness.collect.host import thermal as host_thermal
from harness.collect.host.quiet import watch_interval
from harness.collect.plan import PlannedRun, build_plan
from harness.collect.record import Record
from harness.collect.suite import load_suite
from harness.core.runs import as_run, as_runs
from harness.render import terminal
from harness.render.terminal import RunnerUI


@pytest.fixture(autouse=True)
def _no_inherited_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in list(os.environ):
        if k.startswith(("SPECDEC_", "MLX_", "FAKE_")):
            monkeypatch.delenv(k)


def _session(tmp: Path, suite_path: Path, engines: Engines | None = None) -> SimpleNamespace:
    """A session run to its end: its record as written (data, and its runs)."""
    suite = load_suite(suite_path)
    plan = build_plan(suite)
    rec = Record.create(tmp / "rec.json", suite.to_dict(), {}, ["test"], len(plan))
    runner.execute(plan, suite, rec, annotate_label, engines=engines,
                   ui=lambda total, done: RunnerUI(Console(file=io.StringIO()), total, done))
    rec.finish(len(plan))
    data = json.loads(rec.path.read_text())
    return SimpleNamespace(data=data, runs=data["runs"])


def test_crashing_and_hanging_arms_are_recorded_as_failed_and_the_session_goes_on(tmp_path: Path) -> None:
    arms = [command_arm("ok"), command_arm("crash", 2, {"FAKE_CRASH": "1"}),
            command_arm("hang", 2, {"FAKE_SLEEP_S": "30"}, timeout_s=0.5)]
    rec = _session(tmp_path, write_suite(tmp_path, arms, repetitions=1))
    by = {r["arm"]: r for r in rec.runs}
    assert rec.data["complete"] is True and len(rec.runs) == 3
    assert by["ok"]["status"] == "ok" and by["ok"]["decode_tokens_per_s"] == 100.0
    assert by["crash"]["status"] == "failed" and "status 3" in by["crash"]["error"]
    assert "something broke on purpose" in by["crash"]["stderr_tail"]
    assert "failed" in by["crash"]["marks"]
    assert by["hang"]["status"] == "failed" and "timed out" in by["hang"]["error"]
    assert by["hang"]["wall_s"] < 10


def test_tok_s_regex_for_engines_without_json(tmp_path: Path) -> None:
    arm = command_arm("plain", 1, {"FAKE_PLAIN": "1", "FAKE_TOK_S": "42.5"}, tok_s_regex=r"([0-9.]+) tok/s")
    rec = _session(tmp_path, write_suite(tmp_path, [arm], repetitions=1))
    r = rec.runs[0]
    assert r["status"] == "ok" and r["decode_tokens_per_s"] == 42.5
    assert r["token_ids"] is None and r["shipping"] is False   # no gate reported: no claim


def test_command_env_is_a_copy(tmp_path: Path) -> None:
    arms = [command_arm("inexact", 3, {"SPECDEC_ALLOW_INEXACT": "1"}), command_arm("plain", 3)]
    rec = _session(tmp_path, write_suite(tmp_path, arms, repetitions=2))
    for r in rec.runs:
        if r["arm"] == "inexact":
            assert r["overrides"] == {"SPECDEC_ALLOW_INEXACT": "1"}
            assert r["gate"]["outcome"] == "overridden" and r["shipping"] is False
        else:
            assert r["overrides"] == {} and r["gate"]["outcome"] == "passed" and r["shipping"] is True
    assert "SPECDEC_ALLOW_INEXACT" not in os.environ


def _inprocess_isolation(tmp_path: Path, engine: str) -> None:
    for d in ("target", "drafter"):
        (tmp_path / d).mkdir(exist_ok=True)
    pairing = [{"name": "fx", "target": "embedded", "drafter": "embedded"}]
    arms = [{"name": "inexact", "pairing": "fx", "engine": engine, "block": 3,
             "env": {"SPECDEC_ALLOW_INEXACT": "1"}},
            {"name": "plain", "pairing": "fx", "engine": engine, "block": 3}]
    rec = _session(tmp_path, write_suite(tmp_path, arms, pairings=pairing, repetitions=2, max_tokens=4))
    assert [r["status"] for r in rec.runs] == ["ok"] * 4, [r["error"] for r in rec.runs]
    for r in rec.runs:
        if r["arm"] == "inexact":
            assert r["overrides"].get("SPECDEC_ALLOW_INEXACT") == "1" and not r["shipping"]
        else:   # runs after the inexact arm (rotation puts it first in one repetition, second in the other)
            assert "SPECDEC_ALLOW_INEXACT" not in r["overrides"], r["overrides"]
    assert "SPECDEC_ALLOW_INEXACT" not in os.environ


@pytest.mark.real_engine
def test_inprocess_env_is_restored_mlx_lm(tmp_path: Path) -> None:
    _inprocess_isolation(tmp_path, "mlx-lm")


@pytest.mark.real_engine
def test_inprocess_env_is_restored_specdec(tmp_path: Path) -> None:
    _inprocess_isolation(tmp_path, "specdec")


class _Watch:
    def __init__(self, *a: Any, **k: Any) -> None: ...
    def __enter__(self) -> _Watch: return self
    def __exit__(self, *a: Any) -> None: ...
    def result(self) -> dict: return {"samples": 4, "contended_samples": 2, "contended_fraction": 0.5, "busiest": None}


class _Gate:
    calls: list[float] = []

    def __init__(self, *a: Any, **k: Any) -> None: ...

    def wait(self, cooldown_s: float = 0.0, on_tick: Any = None) -> dict:
        _Gate.calls.append(cooldown_s)
        return {"waited_s": 0.01, "timed_out": True, "busiest": {"pid": 4242, "name": "indexer", "cpu_pct": 90.0}}


class _QuietWait(_Gate):
    def wait(self, cooldown_s: float = 0.0, on_tick: Any = None) -> dict:
        _Gate.calls.append(cooldown_s)
        return {"waited_s": 0.0, "timed_out": False, "busiest": None}


def test_marks_contended_and_quiet_wait_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.Pacer, "contention_watch", lambda self, *a: _Watch())
    monkeypatch.setattr(runner.host_quiet, "QuietWait", _Gate)
    p = write_suite(tmp_path, [command_arm("a")], repetitions=1, quiet={"enabled": True, "timeout_s": 1},
                    watch={"enabled": True})
    r = _session(tmp_path, p).runs[0]
    # 4 samples: under the 10 a run needs, so the watch's verdict is marked as thin.
    assert r["marks"] == ["quiet_wait_timeout", "contended", "watch_undersampled"]
    assert r["load"]["quiet_wait"]["busiest"]["name"] == "indexer"
    assert r["load"]["contention"]["contended_fraction"] == 0.5
    assert r["quiet_wait_s"] == 0.01 and r["cooldown_s"] == 0.0
    assert set(r["load"]) == {"before", "after", "quiet_wait", "contention", "thermal", "thermal_wait"}
    assert terminal.mark_text(as_run(r)) == "quiet_wait_timeout,contended 2/4,watch_undersampled (4 samples)"


class _WellSampledWatch(_Watch):
    def result(self) -> dict: return {"samples": 12, "contended_samples": 0, "contended_fraction": 0.0}


def test_ten_samples_are_enough(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.Pacer, "contention_watch", lambda self, *a: _WellSampledWatch())
    p = write_suite(tmp_path, [command_arm("a")], repetitions=1, watch={"enabled": True})
    assert _session(tmp_path, p).runs[0]["marks"] == []


def test_real_load_watch_runs(tmp_path: Path) -> None:
    p = write_suite(tmp_path, [command_arm("a")], repetitions=1,
                    quiet={"enabled": True, "threshold_pct": 100.0, "settle_s": 0.0, "timeout_s": 2},
                    watch={"enabled": True, "interval_s": 0.05})
    r = _session(tmp_path, p).runs[0]
    c = r["load"]["contention"]
    assert r["status"] == "ok" and c["samples"] >= 1 and c["sampler"] == "foreign_cpu"
    # Watched from the watch's own process; the first run of an arm is predicted at 0.01 s, and
    # the suite's interval is the most between two samples.
    assert c["watcher"] == "process"
    assert c["predicted_wall_s"] == 0.01 and c["interval_s"] == 0.05
    assert ("watch_undersampled" in r["marks"]) == (c["samples"] < 10)
    assert r["load"]["quiet_wait"]["sampler"] == "foreign_cpu"
    before = r["load"]["before"]
    assert {"timestamp", "loadavg_1", "cpu_pct"} <= set(before)
    assert isinstance(before["loadavg_1"], float) and before["loadavg_1"] >= 0.0   # Linux: os.getloadavg()


def test_eta_counts_cooldowns(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, [command_arm("a"), command_arm("b", 2)], cooldown_s=10))
    plan = build_plan(suite)
    done = as_runs([{"index": 0, "status": "ok", "arm": "a", "wall_s": 2.0, "warmup": False},
                    {"index": 1, "status": "ok", "arm": "b", "wall_s": 4.0, "warmup": False}])
    remaining = [PlannedRun(0, "a", "fx", "p1", 0, False), PlannedRun(1, "b", "fx", "p1", 0, False),
                 PlannedRun(2, "c", "fx", "p1", 0, True)]
    assert runner.estimate_remaining_s(remaining, done, suite) == pytest.approx(2 + 10 + 4 + 10 + 3)
    assert runner.estimate_remaining_s(plan, [], suite) is None


def test_mlx_lm_rounds_rebuilt_from_from_draft() -> None:
    from harness.collect.adapters.mlx_lm import _mlx_lm_diagnostics
    # block 3 (2 drafts per round): R1 accepts 2 then the target token, R2 accepts 0, R3 accepts 1,
    # R4 accepts 2 and hits max_tokens=8, so it ends without a target token.
    flags = [True, True, False, False, True, False, True, True]
    d = _mlx_lm_diagnostics(flags, block=3, max_tokens=8)
    assert d["rounds"] == 4 and d["proposed"] == 8 and d["accepted"] == 5
    assert d["per_step_tested"] == 2 + 1 + 2 + 2          # a fully accepted round tests only its drafts
    assert d["first_miss_histogram"] == [1, 1, 2]
    assert d["proposed_by_position"] == [4, 3] and d["accepted_by_position"] == [3, 2]
    assert d["emitted_per_verify"] == 8 / 4
    assert [r["offset"] for r in d["rounds_log"]] == [0, 3, 4, 6]
    # Classic decode has no rounds (the schema's meaning; v1 counted tokens here).
    assert _mlx_lm_diagnostics([False] * 5, block=1, max_tokens=5)["rounds"] == 0


def test_cooldown_rule_clamps_ratio_times_the_previous_run() -> None:
    from harness.collect.suite import Settings
    rule = Settings(cooldown_s=5.0, cooldown_ratio=9.0, cooldown_cap_s=90.0)
    assert runner.cooldown_for(rule, None) == 5.0             # no previous run: the floor
    assert runner.cooldown_for(rule, 0.2) == 5.0              # 1.8 s < floor
    assert runner.cooldown_for(rule, 2.0) == 18.0
    assert runner.cooldown_for(rule, 10.0) == 90.0            # the lab's 90 s after a 10 s run
    assert runner.cooldown_for(rule, 60.0) == 90.0            # capped
    assert runner.cooldown_for(Settings(cooldown_s=5.0, cooldown_ratio=9.0), 60.0) == 540.0   # no cap
    assert runner.cooldown_for(Settings(cooldown_s=10.0), 60.0) == 10.0                       # ratio 0: fixed


def _samples_by(run_s: float, predicted_s: float, cap_s: float = 0.25) -> int:
    """How many samples watch_interval's schedule takes in a run of run_s (the tail one included)."""
    t, n = 0.0, 0
    while (t := t + watch_interval(predicted_s, t, cap_s)) <= run_s:
        n += 1
    return n + 1


def test_the_watch_schedule_samples_any_run_at_least_ten_times_and_a_long_one_sparsely() -> None:
    assert watch_interval(0.24, 0.0, 0.25) == 0.005            # every run starts at the floor
    assert watch_interval(0.24, 0.1, 0.25) == pytest.approx(0.012)   # then its prediction / 20
    assert watch_interval(0.24, 1.0, 0.25) == pytest.approx(0.05)    # past it, the time watched / 20
    assert watch_interval(60.0, 30.0, 0.25) == 0.25            # the suite's interval caps it
    assert watch_interval(None, 0.0, 0.1) == 0.1               # no prediction: a fixed interval
    # As predicted: about 20 samples. Predicted from a warm-up that loaded the model (27 s) but
    # 0.15 s long: still at least 10 (one sample, under the old schedule).
    assert 20 <= _samples_by(0.4, 0.4) <= 30
    assert _samples_by(0.05, 27.0) >= 9 and _samples_by(0.15, 27.0) >= 14
    # Predicted at 0.01 s but 3 s long: the interval grows with the time watched (600 samples
    # at a fixed 5 ms).
    assert _samples_by(3.0, 0.01) <= 110
    pacer = runner.Pacer()
    assert pacer.predicted_wall_s("a") == 0.01
    pacer.note(as_run({"index": 0, "status": "ok", "arm": "a", "wall_s": 1.2}))
    pacer.note(as_run({"index": 1, "status": "ok", "arm": "b", "wall_s": 0.06}))
    assert pacer.predicted_wall_s("a") == 1.2 and pacer.predicted_wall_s("b") == 0.06
    assert pacer.last_wall_s == 0.06
    resumed = runner.Pacer.from_runs(as_runs([{"index": 0, "status": "ok", "arm": "a", "wall_s": 3.0},
                                              {"index": 1, "status": "ok", "arm": "b", "wall_s": 1.0}]))
    assert resumed.arm_wall_s == {"a": 3.0, "b": 1.0} and resumed.last_wall_s == 1.0


def test_each_measured_run_cools_down_by_the_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.host_quiet, "QuietWait", _QuietWait)
    _Gate.calls = []
    p = write_suite(tmp_path, [command_arm("a"), command_arm("b", 2)], repetitions=2, warmups=1,
                    cooldown_s=0.001, cooldown_ratio=0.5, cooldown_cap_s=0.05,
                    quiet={"enabled": True})
    rec = _session(tmp_path, p)
    s = load_suite(p).settings
    assert len(_Gate.calls) == len(rec.runs) == 6
    prev = None
    for r, asked in zip(rec.runs, _Gate.calls):
        want = 0.0 if r["warmup"] else runner.cooldown_for(s, prev)
        assert asked == pytest.approx(want) and r["cooldown_s"] == pytest.approx(want, abs=1e-4)
        assert r["quiet_wait_s"] == 0.0
        prev = r["wall_s"]
    assert rec.data["duty"]["measured_run_s"] == pytest.approx(sum(r["wall_s"] for r in rec.runs if not r["warmup"]),
                                                               abs=1e-2)


def test_thermal_wait_is_recorded_and_a_hot_host_is_marked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.host_thermal, "thermal_state", lambda: host_thermal.as_thermal({"cpu_speed_limit": 100}))
    runner.host_thermal._RECENT.clear()   # a reading from before is not reused
    p = write_suite(tmp_path, [command_arm("a")], repetitions=1)
    r = _session(tmp_path, p).runs[0]
    assert r["load"]["thermal_wait"] == {"checked": True, "nominal": True, "reason": "nominal (CPU_Speed_Limit 100)",
                                         "waited_s": 0.0, "reads": 1}
    assert r["load"]["thermal"] == msgspec.to_builtins(host_thermal.as_thermal({"cpu_speed_limit": 100}))
    # Always hot: the warm-up is not waited for; the measured run waits up to the cap, then is marked.
    monkeypatch.setattr(runner.host_thermal, "thermal_state", lambda: host_thermal.as_thermal({"cpu_speed_limit": 40}))
    runner.host_thermal._RECENT.clear()   # a reading from before is not reused
    d = tmp_path / "hot"
    d.mkdir()
    p = write_suite(d, [command_arm("a")], repetitions=1, warmups=1, cooldown_s=0.0, cooldown_cap_s=0.02)
    warm, measured = _session(d, p).runs
    assert warm["load"]["thermal_wait"]["reads"] == 1 and "warm-up" in warm["load"]["thermal_wait"]["reason"]
    assert "thermal_not_nominal" not in warm["marks"]
    tw = measured["load"]["thermal_wait"]
    assert tw["nominal"] is False and tw["reads"] >= 2 and "thermal_not_nominal" in measured["marks"]
    # Nothing readable: no wait.
    monkeypatch.setattr(runner.host_thermal, "thermal_state", lambda: host_thermal.as_thermal({"nvidia": "unknown"}))
    runner.host_thermal._RECENT.clear()   # a reading from before is not reused
    d = tmp_path / "unknown"
    d.mkdir()
    r = _session(d, write_suite(d, [command_arm("a")], repetitions=1)).runs[0]
    assert r["load"]["thermal_wait"]["checked"] is False and r["load"]["thermal_wait"]["nominal"] == "unknown"
    assert r["load"]["thermal_wait"]["reads"] == 1


def test_run_one_with_a_null_ui_and_a_shared_pacer(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, [command_arm("a"), command_arm("b", 2)], repetitions=1,
                                   cooldown_s=0.0, cooldown_ratio=0.0))
    pacer = runner.Pacer()
    ui = runner.NullUI()
    ui.status("x", None)
    runs = [runner.run_one(p, suite, Engines(), ui, None, pacer) for p in build_plan(suite)]
    assert [r.status for r in runs] == ["ok", "ok"]
    assert pacer.arm_wall_s == {r.arm: r.wall_s for r in runs}
    assert pacer.last_wall_s == runs[-1].wall_s
    ui.finished_run(runs[0], None)


def test_eta_follows_the_cooldown_rule(tmp_path: Path) -> None:
    suite = load_suite(write_suite(tmp_path, [command_arm("a"), command_arm("b", 2)], cooldown_s=1.0,
                                   cooldown_ratio=2.0, cooldown_cap_s=5.0))
    done = as_runs([{"index": 0, "status": "ok", "arm": "a", "wall_s": 2.0, "warmup": False, "quiet_wait_s": 0.5},
                    {"index": 1, "status": "ok", "arm": "b", "wall_s": 4.0, "warmup": False}])
    remaining = [PlannedRun(0, "a", "fx", "p1", 0, False), PlannedRun(1, "b", "fx", "p1", 0, False)]
    # a: cooldown after b's 4 s (capped at 5) + 2.5; b: cooldown after a's 2 s (4) + 4
    assert runner.estimate_remaining_s(remaining, done, suite) == pytest.approx(5 + 2.5 + 4 + 4)
    pacer = runner.Pacer(last_wall_s=0.1)            # the run just before was short: the floor
    assert runner.estimate_remaining_s(remaining, done, suite, pacer) == pytest.approx(1 + 2.5 + 4 + 4)
