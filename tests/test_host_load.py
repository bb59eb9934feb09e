"""Quiet wait and contention watch against real busy processes and scripted readings, plus
thermal parsing and the thermal wait.

A busy loop started as our child must be ignored (it is the engine under test); one started
through a launcher that exits (a double fork, so it is orphaned) is foreign and must be seen.
The scripted tests drive the gate, the watch and the sampler with fake readings and a fake
clock, so they assert exact waits without depending on this host's timing.
"""

import os
import random
import signal
import subprocess
import sys
import time

import psutil
import pytest
from msgspec import to_builtins

from harness.collect.host import load, processes, thermal, watcher
from harness.collect.host.info import UNKNOWN
from harness.collect.host.load import ForeignCpuSampler, ForeignSample
from harness.collect.host.processes import ProcessSampler, Reading
from harness.collect.host.quiet import ContentionWatch, QuietWait

# Other tests running beside these would be the foreign load they measure: make test runs them alone.
pytestmark = pytest.mark.host_alone

# The loop ends itself after 30 s, so a test that dies cannot leave it spinning.
BUSY = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"
LAUNCHER = ("import subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-c', sys.argv[1]], start_new_session=True,"
            " stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            "print(p.pid)\n")


def _wait_spinning(pid: int) -> None:
    proc = psutil.Process(pid)
    deadline = time.monotonic() + 5
    while sum(proc.cpu_times()[:2]) < 0.05 and time.monotonic() < deadline:
        time.sleep(0.02)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@pytest.fixture
def foreign_busy():
    out = subprocess.run([sys.executable, "-c", LAUNCHER, BUSY], capture_output=True,
                         text=True, check=True, timeout=20)
    pid = int(out.stdout)
    try:
        # Orphaned: reparented away from us, so not our descendant.
        assert pid not in {c.pid for c in psutil.Process().children(recursive=True)}
        _wait_spinning(pid)
        yield pid
    finally:
        _kill(pid)


@pytest.fixture
def child_busy():
    p = subprocess.Popen([sys.executable, "-c", BUSY])
    try:
        _wait_spinning(p.pid)
        yield p.pid
    finally:
        p.kill()
        p.wait()


def _pids(result: dict) -> set[int]:
    return {o["pid"] for o in result["offenders"]}


# ---------------------------------------------------------------- real processes

def _host_busy_besides_us(seconds: float = 0.5) -> float:
    """Independent of ForeignCpuSampler: the host's busy CPU minus our tree's, from psutil
    alone, in percent of one core."""
    me = psutil.Process()

    def ours() -> float:
        total = 0.0
        for p in [me, *me.children(recursive=True), *me.parents()]:
            try:
                t = p.cpu_times()
                total += t.user + t.system + (t.children_user + t.children_system if p == me else 0)
            except psutil.Error:
                pass
        return total

    def busy(t) -> float:
        return sum(t) - t.idle - getattr(t, "iowait", 0) - getattr(t, "guest", 0) - getattr(t, "guest_nice", 0)

    c0, o0, w0 = psutil.cpu_times(), ours(), time.monotonic()
    time.sleep(seconds)
    c1, o1, w1 = psutil.cpu_times(), ours(), time.monotonic()
    return 100 * ((busy(c1) - busy(c0)) - (o1 - o0)) / (w1 - w0)


def test_foreign_busy_process_makes_the_gate_time_out(foreign_busy):
    res = QuietWait(threshold_pct=15, settle_s=0.5, timeout_s=1.5, interval_s=0.25).wait(cooldown_s=0.3)
    assert res["timed_out"] is True and res["busy_samples"] >= 1
    assert res["waited_s"] >= 1.5 and res["cooldown_s"] == 0.3
    assert res["foreign_pct_max"] >= 15 and res["named"] is True
    assert foreign_busy in _pids(res)          # the per-process scan named it
    assert res["busiest"]["cpu_pct"] >= 15 and res["threshold_pct"] == 15


def test_watch_sees_a_foreign_process_and_ignores_our_child(foreign_busy, child_busy):
    with ContentionWatch(threshold_pct=15, interval_s=0.05) as w:
        time.sleep(1.2)
    res = w.result()
    assert res["samples"] >= 10
    assert res["contended_fraction"] >= 0.5 and res["contended_samples"] <= res["samples"]
    assert foreign_busy in _pids(res)
    assert child_busy not in _pids(res) and res["busiest"]["pid"] != child_busy
    assert res["watch_cpu_s"] >= 0


def test_the_watch_process_sees_a_foreign_process_and_counts_our_child_as_ours(foreign_busy, child_busy):
    w = watcher.Watcher(ForeignCpuSampler)
    try:
        with w.watch(15.0, 0.05, None) as one:
            time.sleep(1.2)
        res = one.result()
    finally:
        w.close()
    assert res["watcher"] == "process" and res["samples"] >= 10
    assert res["contended_fraction"] >= 0.5
    assert foreign_busy in _pids(res) and child_busy not in _pids(res)


def _hold_the_gil(seconds: float) -> None:
    """A decode loop that holds the GIL through long C calls, as an engine's native calls that do
    not release it: sorting ~70 ms at a time, so another thread gets in only between calls
    (a pure-Python loop hands the GIL over every 5 ms, and on a loaded host that was enough)."""
    data = list(range(300_000))
    random.Random(0).shuffle(data)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sorted(data)


def test_an_engine_holding_the_gil_starves_a_thread_watch_but_not_the_watch_process():
    thread = ContentionWatch(interval_s=0.25, predicted_s=0.5)
    with thread:
        _hold_the_gil(0.5)
    w = watcher.Watcher(ForeignCpuSampler)
    try:
        with w.watch(15.0, 0.25, 0.5) as one:
            _hold_the_gil(0.5)
        res = one.result()
    finally:
        w.close()
    # Due: about 25 samples. A thread gets a few (it waits for the GIL at every read of /proc).
    assert res["watcher"] == "process" and res["samples"] >= 15
    assert thread.result()["samples"] < res["samples"] / 2


def test_a_lost_watch_process_falls_back_to_a_thread_and_says_so():
    w = watcher.Watcher(ForeignCpuSampler)
    try:
        with w.watch(15.0, 0.05, 0.2) as one:
            time.sleep(0.2)
        assert one.result()["watcher"] == "process"
        helper = w._proc._proc
        with w.watch(15.0, 0.05, 0.2) as one:
            helper.kill()      # dies during the run: nothing watched it
            helper.wait()
            time.sleep(0.1)
        assert one.result()["samples"] == 0
        assert one.result()["watcher"].startswith("lost during this run: the watch process")
        with w.watch(15.0, 0.05, 0.2) as one:
            time.sleep(0.2)
        got = one.result()
        assert got["watcher"].startswith("thread: the watch process") and got["samples"] >= 10
    finally:
        w.close()


def test_the_watch_process_ends_with_the_session_and_lets_ctrl_c_through():
    w = watcher.Watcher(ForeignCpuSampler)
    with pytest.raises(KeyboardInterrupt):
        with w.watch(15.0, 0.05, 0.2):
            raise KeyboardInterrupt
    helper = w._proc._proc
    assert helper is not None and helper.poll() is None
    with w.watch(15.0, 0.05, 0.2) as one:   # still serving after an interrupted run
        time.sleep(0.1)
    assert one.result()["watcher"] == "process"
    w.close()
    assert helper.wait(timeout=5) == 0


def test_the_cheap_sampler_counts_our_child_as_ours(child_busy):
    s = ForeignCpuSampler()
    s.prime()
    time.sleep(0.5)
    got = s.sample()
    assert got.window_s >= 0.5
    assert got.own_pct >= 30            # the child's loop is our CPU, not foreign


def test_exclude_pids_hides_a_named_foreign_process(foreign_busy):
    s = ForeignCpuSampler(exclude_pids=[foreign_busy])
    s.prime()
    time.sleep(0.5)
    assert s.sample().own_pct >= 30     # counted with our own tree
    with ContentionWatch(threshold_pct=15, interval_s=0.2, exclude_pids=[foreign_busy]) as w:
        time.sleep(0.6)
    assert foreign_busy not in _pids(w.result())


def test_gate_passes_when_no_reading_can_reach_the_threshold(child_busy):
    # Foreign CPU cannot exceed every core, so this gate must pass at the cooldown's end.
    res = QuietWait(threshold_pct=100.0 * psutil.cpu_count() + 1, settle_s=0.5,
                    timeout_s=5, interval_s=0.1).wait(cooldown_s=0.3)
    assert res["timed_out"] is False and res["busy_samples"] == 0 and res["waited_s"] == 0.0


def test_gate_passes_on_a_quiet_host_despite_a_busy_child(child_busy):
    res = QuietWait(threshold_pct=15, settle_s=0.5, timeout_s=3, interval_s=0.25).wait(cooldown_s=0.5)
    if res["busy_samples"]:
        # Shared 2-core box: fail only if an independent reading says the host was quiet.
        foreign = _host_busy_besides_us()
        if foreign >= 15:
            pytest.skip(f"host busy with foreign processes: {foreign:.0f}% of a core")
        assert child_busy not in _pids(res), "the gate waited on our own child"
        pytest.skip(f"host was busy during the gate: {res['top_processes']}")
    assert res["timed_out"] is False and res["waited_s"] == 0.0 and child_busy not in _pids(res)


def test_access_denied_processes_fall_back_to_ps(foreign_busy, monkeypatch):
    # macOS denies other users' CPU times; the sampler must still see them through ps.
    real = ProcessSampler._read

    def deny(self, pid):
        if pid == foreign_busy:
            raise psutil.AccessDenied(pid)
        return real(self, pid)

    monkeypatch.setattr(ProcessSampler, "_read", deny)
    sampler = ProcessSampler()
    sampler.prime()
    time.sleep(0.2)
    got = {r.pid: r for r in sampler.sample()}
    assert got[foreign_busy].source == "ps" and got[foreign_busy].cpu_pct >= 15
    assert sampler.denied == 0


def test_load_snapshot_windows():
    first = load.load_snapshot()
    time.sleep(0.3)
    second = load.load_snapshot()
    for snap in (first, second):
        assert 0.0 <= snap["cpu_pct"] <= 100.0
        assert isinstance(snap["loadavg_1"], float) or snap["loadavg_1"] == UNKNOWN
    assert 0.25 <= second["cpu_pct_window_s"] < 1.0
    assert second["timestamp"] > first["timestamp"]


# ---------------------------------------------------------------- gate logic, scripted

class FakeClock:
    """time.monotonic and time.sleep that only move when the code under test sleeps."""

    def __init__(self):
        self.t = 1000.0
        self.slept = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        assert s >= 0
        self.t += s
        self.slept += s


class ScriptedForeign:
    """Foreign-CPU readings by the fake clock's time: busy (pct) inside any (start, end) span
    measured from the first reading, quiet (2 %) elsewhere; every window 0.5 s unless set."""

    def __init__(self, clock, busy=(), pct=80.0, window_s=0.5, windows=None):
        self.clock, self.busy, self.pct, self.window_s = clock, list(busy), pct, window_s
        self.windows = list(windows or [])
        self.t0 = None
        self.calls = 0
        self.denied = 0
        self.min_window_s = 0.1

    def prime(self):
        if self.t0 is None:
            self.t0 = self.clock()

    def sample(self, min_window_s=None, recheck_pct=None):
        self.calls += 1
        t = self.clock() - self.t0
        busy = any(a <= t + 1e-9 and t < b - 1e-9 for a, b in self.busy)
        window = self.windows.pop(0) if self.windows else self.window_s
        return ForeignSample(self.pct if busy else 2.0, window)


class ScriptedProcesses:
    """The naming scan: per-process readings, one list per sample, then the last forever."""

    def __init__(self, script):
        self.script, self.denied, self.calls, self.primed = list(script), 0, 0, 0

    def prime(self):
        self.primed += 1

    def sample(self):
        self.calls += 1
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]


BUSY_R = [Reading(42, "mds_stores", 80.0), Reading(7, "idle", 1.0)]
QUIET_R = [Reading(7, "idle", 2.0)]


def _gate(clock, sampler, procs=None, **kw):
    kw = {"threshold_pct": 15.0, "settle_s": 0.5, "timeout_s": 10.0, "interval_s": 0.25, **kw}
    return QuietWait(sampler=sampler, process_sampler=procs or ScriptedProcesses([BUSY_R]),
                     clock=clock, sleep=clock.sleep, **kw)


def test_a_quiet_host_starts_exactly_when_the_cooldown_ends():
    clock = FakeClock()
    procs = ScriptedProcesses([BUSY_R])
    res = _gate(clock, ScriptedForeign(clock), procs, settle_s=3.0).wait(cooldown_s=2.0)
    assert res["timed_out"] is False and res["waited_s"] == 0.0
    assert clock.slept == pytest.approx(2.0) and res["total_s"] == pytest.approx(2.0)
    assert res["samples"] == 8 and res["busy_samples"] == 0      # every 0.25 s, the last at the end
    assert res["named"] is False and procs.primed == 0 and procs.calls == 0   # no process scan at all


def test_no_cooldown_on_a_quiet_host_means_no_wait_at_all():
    clock = FakeClock()
    res = _gate(clock, ScriptedForeign(clock), settle_s=3.0).wait(cooldown_s=0.0)
    assert res["timed_out"] is False and res["waited_s"] == 0.0 and clock.slept == 0.0
    assert res["samples"] == 1


def test_a_busy_sample_late_in_the_cooldown_extends_the_wait_by_the_settle_window():
    clock = FakeClock()
    sampler = ScriptedForeign(clock, busy=[(1.75, 2.0)])     # the sample at 1.75 s is busy
    procs = ScriptedProcesses([BUSY_R])
    res = _gate(clock, sampler, procs, settle_s=1.0).wait(cooldown_s=2.0)
    assert res["timed_out"] is False and res["busy_samples"] == 1
    assert res["waited_s"] == pytest.approx(0.75)           # quiet from 1.75 s until 2.75 s
    assert res["total_s"] == pytest.approx(2.75)
    # The busy sample primed the per-process scan; the next sample named the offender.
    assert procs.primed == 1 and procs.calls == 1 and res["named"] is True
    assert res["busiest"] == {"pid": 42, "name": "mds_stores", "cpu_pct": 80.0, "source": "psutil"}
    assert [o["pid"] for o in res["offenders"]] == [42]


def test_a_busy_sample_early_in_the_cooldown_settles_within_it():
    clock = FakeClock()
    res = _gate(clock, ScriptedForeign(clock, busy=[(0.25, 0.5)]), settle_s=1.0).wait(cooldown_s=2.0)
    assert res["busy_samples"] == 1 and res["timed_out"] is False
    assert res["waited_s"] == 0.0 and clock.slept == pytest.approx(2.0)


def test_always_busy_times_out_past_the_cooldown():
    clock = FakeClock()
    res = _gate(clock, ScriptedForeign(clock, busy=[(0, 1e9)]), timeout_s=3.0).wait(cooldown_s=1.0)
    assert res["timed_out"] is True and res["waited_s"] == pytest.approx(3.0)
    assert res["total_s"] == pytest.approx(4.0) and res["foreign_pct_max"] == 80.0


def test_a_short_window_decides_nothing():
    # A fresh sampler's first reading covers less than the minimum window: sample again.
    clock = FakeClock()
    sampler = ScriptedForeign(clock, windows=[0.02], pct=500.0, busy=[(0, 0.01)])
    res = _gate(clock, sampler).wait(cooldown_s=0.0)
    assert res["short_samples"] == 1 and res["busy_samples"] == 0 and res["samples"] == 1
    min_window = load.min_window_for(15.0)
    assert res["waited_s"] == pytest.approx(min_window - 0.02, abs=1e-3)   # until the window is long enough


class FakeCounters:
    """(busy_s, own_s) counters advanced by hand, for ForeignCpuSampler."""

    def __init__(self):
        self.busy = self.own = 0.0

    def __call__(self):
        return self.busy, self.own


def test_foreign_cpu_is_busy_minus_our_tree_over_at_least_the_minimum_window():
    clock, ctr = FakeClock(), FakeCounters()
    s = ForeignCpuSampler(min_window_s=0.1, counters=ctr, clock=clock)
    s.prime()
    got = []
    for _ in range(10):                          # every 20 ms: 1.5 cores busy, 1 of them ours
        clock.t += 0.02
        ctr.busy += 0.03
        ctr.own += 0.02
        got.append(s.sample())
    assert got[0].window_s == pytest.approx(0.02)                  # only the prime to go back to
    assert all(g.window_s == pytest.approx(0.1) for g in got[5:])  # reaches back five readings
    assert got[-1].foreign_pct == pytest.approx(50.0) and got[-1].busy_pct == pytest.approx(150.0)
    assert got[-1].own_pct == pytest.approx(100.0)
    ctr.own -= 0.5                               # a reaping race never reads as foreign CPU
    clock.t += 0.1
    assert s.sample().foreign_pct == 0.0


def test_short_windows_must_clear_the_threshold_by_a_tick():
    # Four ticks of rounding (0.04 s) must read as at most the threshold.
    assert load.min_window_for(15.0) == pytest.approx(0.04 / 0.15)
    assert load.min_window_for(5.0) == pytest.approx(0.8)
    assert load.min_window_for(80.0) == 0.1
    over = load.over_threshold
    assert over(ForeignSample(20.0, 0.3), 15.0, 0.27)
    assert not over(ForeignSample(14.9, 0.3), 15.0, 0.27)
    assert not over(ForeignSample(110.0, 0.04), 15.0, 0.27)    # four ticks over 40 ms read 100 %: 115 needed
    assert over(ForeignSample(116.0, 0.04), 15.0, 0.27)
    assert not over(ForeignSample(0.0, 0.0), 15.0, 0.27)


class ListForeign:
    """Watch readings in order, then the last forever."""

    def __init__(self, script):
        self.script, self.denied = list(script), 0

    def prime(self):
        pass

    def sample(self, min_window_s=None, recheck_pct=None):
        return self.script.pop(0) if len(self.script) > 1 else self.script[0]


def test_watch_counts_contended_samples_and_covers_a_short_body():
    busy, quiet = ForeignSample(80.0, 0.3), ForeignSample(2.0, 0.3)
    procs = ScriptedProcesses([BUSY_R])
    with ContentionWatch(interval_s=0.01, sampler=ListForeign([busy, quiet]), process_sampler=procs) as w:
        deadline = time.monotonic() + 5
        while w.samples < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
    res = w.result()
    assert res["samples"] >= 4 and res["contended_samples"] == 1
    assert res["contended_fraction"] == pytest.approx(1 / res["samples"], abs=1e-4)
    assert res["foreign_pct_max"] == 80.0 and res["named"] is True
    assert [o["pid"] for o in res["offenders"]] == [42]
    with ContentionWatch(interval_s=1.0, sampler=ListForeign([quiet])) as w:
        pass  # shorter than one interval: still one sample, not zero
    assert w.result()["samples"] == 1 and w.result()["contended_fraction"] == 0.0
    assert w.result()["named"] is False


def test_parse_ps():
    table = processes.parse_ps("  1  0  0.3 /sbin/launchd\n 88  1 97.5 /usr/libexec/backupd\nbad\n")
    assert table == {1: (0, 0.3, "launchd"), 88: (1, 97.5, "backupd")}


# ---------------------------------------------------------------- thermal

def test_thermal_state_has_every_key_and_unknown_where_unreadable():
    state = to_builtins(thermal.thermal_state())
    for key in ("cpu_speed_limit", "power_source", "backup_running", "temperatures_c",
                "power_plugged", "nvidia"):
        assert key in state
    if sys.platform.startswith("linux"):
        assert state["cpu_speed_limit"] == state["backup_running"] == UNKNOWN
        if not psutil.sensors_temperatures():
            assert state["temperatures_c"] == UNKNOWN


PMSET_THERM = """Note: No thermal warning level has been recorded
Note: No performance warning level has been recorded
2026-12-02 10:00:00 +0000 CPU Power notify
\tCPU_Scheduler_Limit \t= 100
\tCPU_Available_CPUs \t= 20
\tCPU_Speed_Limit \t= 72
"""
PMSET_BATT = "Now drawing from 'AC Power'\n"
TMUTIL = "Backup session status:\n{\n    BackupPhase = Copying;\n    Running = 1;\n}\n"


def test_macos_state_is_parsed(monkeypatch):
    answers = {("pmset", "-g", "therm"): PMSET_THERM, ("pmset", "-g", "batt"): PMSET_BATT,
               ("tmutil", "status"): TMUTIL}
    monkeypatch.setattr(thermal, "run_quiet", lambda argv, timeout=3.0: answers.get(tuple(argv)))
    monkeypatch.setattr(thermal.sys, "platform", "darwin")
    monkeypatch.setitem(sys.modules, "pynvml", None)     # no NVML: nvidia unknown
    state = to_builtins(thermal.thermal_state())
    assert state["cpu_speed_limit"] == 72 and state["power_source"] == "AC Power"
    assert state["backup_running"] is True and state["nvidia"] == UNKNOWN
    assert state["pmset_therm"]["limits"]["CPU_Available_CPUs"] == 20
    assert state["pmset_therm"]["warnings"] == []     # "Note: No ... recorded" is no warning
    assert thermal.parse_tmutil_status("{\n Running = 0;\n}") is False
    assert thermal.parse_tmutil_status(None) == UNKNOWN


def test_decode_throttle():
    # The NVML readings themselves: tests/test_host_nvml.py.
    assert thermal.decode_throttle("0x0000000000000044") == ["sw_power_cap", "hw_thermal_slowdown"]
    assert thermal.decode_throttle("[N/A]") == UNKNOWN


# ---------------------------------------------------------------- thermal verdict and wait

ZONES = {
    "thermal_zone0/type": "x86_pkg_temp\n", "thermal_zone0/temp": "71000\n",
    "thermal_zone0/trip_point_0_type": "critical\n", "thermal_zone0/trip_point_0_temp": "105000\n",
    "thermal_zone0/trip_point_1_type": "passive\n", "thermal_zone0/trip_point_1_temp": "90000\n",
    "thermal_zone0/trip_point_2_type": "passive\n", "thermal_zone0/trip_point_2_temp": "85000\n",
    "thermal_zone1/type": "acpitz\n", "thermal_zone1/temp": "27800\n",
    "thermal_zone1/trip_point_0_type": "critical\n", "thermal_zone1/trip_point_0_temp": "119000\n",
    "thermal_zone2/type": "iwlwifi_1\n", "thermal_zone2/temp": "\n",          # unreadable: skipped
    "thermal_zone10/type": "cpu-thermal\n", "thermal_zone10/temp": "86500\n",
    "thermal_zone10/trip_point_0_type": "passive\n", "thermal_zone10/trip_point_0_temp": "86000\n",
}


def test_parse_thermal_zones_takes_the_lowest_passive_trip():
    zones = to_builtins(thermal.parse_thermal_zones(ZONES))
    assert zones == [
        {"zone": "thermal_zone0", "type": "x86_pkg_temp", "temp_c": 71.0, "passive_c": 85.0},
        {"zone": "thermal_zone1", "type": "acpitz", "temp_c": 27.8, "passive_c": None},
        {"zone": "thermal_zone10", "type": "cpu-thermal", "temp_c": 86.5, "passive_c": 86.0},
    ]
    assert thermal.parse_thermal_zones({}) == []


def test_thermal_verdict_per_platform():
    v = thermal.thermal_verdict
    zones = thermal.parse_thermal_zones(ZONES)
    hot = v({"thermal_zones": zones})
    assert hot.checked is True and hot.nominal is False
    assert "thermal_zone10 (cpu-thermal) 86.5 C >= passive trip 86 C" in hot.reason
    assert v({"thermal_zones": zones[:2]}).nominal is True
    assert v({"thermal_zones": [zones[1]]}) == thermal.ThermalVerdict(checked=False, nominal=UNKNOWN,
                                                                      reason="no thermal state readable")
    limits = thermal.parse_pmset_therm(PMSET_THERM).limits
    assert isinstance(limits, dict)
    limit = limits["CPU_Speed_Limit"]
    assert v({"cpu_speed_limit": limit}).nominal is False
    assert "CPU_Speed_Limit 72 < 100" in v({"cpu_speed_limit": limit}).reason
    assert v({"cpu_speed_limit": 100}).nominal is True
    idle = [{"throttle_reasons": thermal.decode_throttle("0x0000000000000001")}]      # gpu_idle
    capped = [{"throttle_reasons": thermal.decode_throttle("0x0000000000000044")}]
    assert v({"nvidia": idle}).nominal is True
    got = v({"nvidia": idle + capped})
    assert got.nominal is False and got.reason == "GPU 1: sw_power_cap, hw_thermal_slowdown"
    assert v({"nvidia": [{"throttle_reasons": UNKNOWN}]}).checked is False
    assert v({"cpu_speed_limit": UNKNOWN, "nvidia": UNKNOWN, "thermal_zones": UNKNOWN}).nominal == UNKNOWN


def test_thermal_wait_polls_until_nominal():
    clock = FakeClock()
    states = [{"cpu_speed_limit": 60}, {"cpu_speed_limit": 80}, {"cpu_speed_limit": 100}]
    wait, last = thermal.wait_thermal(90.0, read=lambda: states.pop(0), clock=clock, sleep=clock.sleep)
    assert wait.nominal is True and wait.checked is True
    assert wait.reads == 3 and wait.waited_s == pytest.approx(2.0) and last.cpu_speed_limit == 100


def test_thermal_wait_gives_up_at_its_limit_and_never_waits_when_unreadable():
    clock = FakeClock()
    wait, _ = thermal.wait_thermal(2.5, read=lambda: {"cpu_speed_limit": 50}, clock=clock,
                                     sleep=clock.sleep)
    assert wait.nominal is False and wait.waited_s == pytest.approx(2.5) and wait.reads == 4
    clock = FakeClock()
    wait, _ = thermal.wait_thermal(120.0, read=lambda: {"nvidia": UNKNOWN}, clock=clock, sleep=clock.sleep)
    assert to_builtins(wait) == {"checked": False, "nominal": UNKNOWN, "reason": "no thermal state readable",
                                 "waited_s": 0.0, "reads": 1}
    assert clock.slept == 0.0
    # wait=False (a warm-up): one read, however hot.
    wait, _ = thermal.wait_thermal(120.0, read=lambda: {"cpu_speed_limit": 50}, wait=False)
    assert wait.nominal is False and wait.reads == 1 and wait.waited_s == 0.0


def test_a_recent_nominal_thermal_reading_is_reused_and_a_hot_one_never(monkeypatch) -> None:
    reads = []
    state = {"cpu_speed_limit": 100}
    monkeypatch.setattr(thermal, "thermal_state", lambda: reads.append(1) or thermal.as_thermal(state))
    monkeypatch.setattr(thermal, "_RECENT", thermal._Recent())
    t = [0.0]
    first = thermal.recent_thermal_state(2.0, clock=lambda: t[0])
    t[0] = 1.0
    again = thermal.recent_thermal_state(2.0, clock=lambda: t[0])
    assert len(reads) == 1 and "reused_age_s" not in to_builtins(first) and again.reused_age_s == 1.0
    t[0] = 3.5                      # too old: read again
    state["cpu_speed_limit"] = 50
    hot = thermal.recent_thermal_state(2.0, clock=lambda: t[0])
    t[0] = 3.6                      # a hot reading is never reused
    thermal.recent_thermal_state(2.0, clock=lambda: t[0])
    assert len(reads) == 3 and hot.cpu_speed_limit == 50
