"""The macOS collectors on real published outputs (tests/fixtures/macos/, sources in its
README): each parser on each fixture, then the readers with sys.platform and the tool runner
replaced, so they run on any host."""

import plistlib
import sys
from pathlib import Path

import pytest
from msgspec import to_builtins

from harness.collect.host import applegpu, info, macos, thermal
from harness.collect.host.applegpu import AppleGpu
from harness.collect.host.info import UNKNOWN
from harness.collect.host.ioregtext import parse_ioreg_text, parse_property

FIXTURES = Path(__file__).parent / "fixtures" / "macos"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def as_plist(text: str) -> bytes:
    """What `ioreg -a` prints for these entries: an array of dicts, as an XML plist (the keys
    plistlib can write; ioreg's own plist holds the same values)."""
    keep = ("IOObjectClass", "IORegistryEntryName", "PerformanceStatistics", "gpu-core-count", "model")
    return plistlib.dumps([{k: v for k, v in e.items() if k in keep} for e in parse_ioreg_text(text)])


# ---------------------------------------------------------------- GPU (ioreg)

IOREG = {
    "ioreg_gpu_m1pro.txt": AppleGpu(device_pct=2, renderer_pct=2, tiler_pct=2,
                                    in_use_bytes=340983808, alloc_bytes=1214005248),
    "ioreg_gpu_m3max.txt": AppleGpu(device_pct=48, renderer_pct=47, tiler_pct=48,
                                    in_use_bytes=1221361664, alloc_bytes=4869685248),
    # "In use system memory (driver)"=0 sits beside "In use system memory": the latter is read.
    "ioreg_gpu_m4.txt": AppleGpu(device_pct=17, renderer_pct=15, tiler_pct=15,
                                 in_use_bytes=430571520, alloc_bytes=4597121024),
}


@pytest.mark.parametrize("name", sorted(IOREG))
def test_ioreg_gpu_from_the_published_text(name):
    assert applegpu.parse_ioreg_gpu(fixture(name)) == IOREG[name]


@pytest.mark.parametrize("name", sorted(IOREG))
def test_ioreg_gpu_from_the_plist_form(name):
    # The reader runs `ioreg -a`: the same values through plistlib, not through the text reader.
    xml = as_plist(fixture(name))
    assert xml.startswith(b"<?xml")
    assert applegpu.parse_ioreg_gpu(xml) == IOREG[name]


# `ioreg -a` itself, as published (trimmed by their authors): an M5 Pro's and an M4 Pro's plist.
IOREG_PLIST = {
    "ioreg_gpu_m5pro.plist": AppleGpu(device_pct=12, renderer_pct=12, tiler_pct=5,
                                      in_use_bytes=1046872064, alloc_bytes=6614056960),
    "ioreg_gpu_m4pro.plist": AppleGpu(device_pct=12, renderer_pct=12, tiler_pct=7,
                                      in_use_bytes=1270726656, alloc_bytes=8970174464),
}


@pytest.mark.parametrize("name", sorted(IOREG_PLIST))
def test_ioreg_gpu_from_a_published_plist(name):
    data = (FIXTURES / name).read_bytes()
    assert data.startswith(b"<?xml")
    assert applegpu.parse_ioreg_gpu(data) == IOREG_PLIST[name]
    assert applegpu.ioreg_gpu_core_count(data) == 16


def test_ioreg_gpu_core_count():
    assert applegpu.ioreg_gpu_core_count(fixture("ioreg_gpu_m3max.txt")) == 30
    assert applegpu.ioreg_gpu_core_count(as_plist(fixture("ioreg_gpu_m4.txt"))) == 10
    assert applegpu.ioreg_gpu_core_count(fixture("ioreg_gpu_m1pro.txt")) is None


def test_ioreg_gpu_without_a_reading():
    assert applegpu.parse_ioreg_gpu(None) is None
    assert applegpu.parse_ioreg_gpu(b"") is None
    assert applegpu.parse_ioreg_gpu(b"<?xml version='1.0'?><plist><array><dict>") is None
    assert applegpu.parse_ioreg_gpu(plistlib.dumps([{"IOClass": "AGXAcceleratorG13X"}])) is None
    # A key the driver does not publish is None, never 0.
    stats = {"Device Utilization %": 9, "In use system memory": 5, "Tiler Utilization %": True}
    got = applegpu.parse_ioreg_gpu(plistlib.dumps([{"PerformanceStatistics": stats}]))
    assert got == AppleGpu(device_pct=9, renderer_pct=None, tiler_pct=None, in_use_bytes=5, alloc_bytes=None)


def test_ioreg_text_values():
    entry = parse_ioreg_text(fixture("ioreg_gpu_m4.txt"))[0]
    assert entry["IOObjectClass"] == "AGXAcceleratorG16G"
    assert entry["IOMatchedAtBoot"] is True and entry["vendor-id"] == bytes.fromhex("6b100000")
    assert entry["IONameMatch"][-1] == "gpu,t8132" and entry["SurfaceList"] == []
    assert entry["GPUConfigurationVariable"]["core_mask_list"] == [1023]
    assert entry["SchedulerState"]["BusyWorkQueues"][1]["aborted"] is False
    # ioreg cuts long values without -w 0: such a line is skipped, not guessed at.
    with pytest.raises(ValueError):
        parse_property('"PerformanceStatisticsAccum" = {"textureCount"=1710,"freeDat#')


# ---------------------------------------------------------------- thermal pressure

@pytest.mark.parametrize("name", ["pmset_therm_m1pro.txt", "pmset_therm_m3ultra.txt",
                                  "pmset_therm_arm64_mtplx.txt", "pmset_therm_intel_notes.txt"])
def test_pmset_notes_are_no_warnings(name):
    assert thermal.parse_pmset_therm(fixture(name)).warnings == []


def test_pmset_pressure():
    # Apple silicon publishes no level at all: that says nothing either way.
    assert macos.parse_pmset_pressure(fixture("pmset_therm_m1pro.txt")) == UNKNOWN
    assert macos.parse_pmset_pressure(fixture("pmset_therm_m3ultra.txt")) == UNKNOWN
    assert thermal.parse_pmset_therm(fixture("pmset_therm_m3ultra.txt")).limits == UNKNOWN
    assert macos.parse_pmset_pressure(fixture("pmset_therm_arm64_mtplx.txt")) == UNKNOWN
    assert macos.parse_pmset_pressure(fixture("pmset_therm_intel_notes.txt")) == "nominal"
    assert macos.parse_pmset_pressure(fixture("pmset_thermlog_intel_throttled.txt")) == "serious"
    assert thermal.parse_pmset_therm(fixture("pmset_thermlog_intel_throttled.txt")).limits == {
        "CPU_Scheduler_Limit": 40, "CPU_Available_CPUs": 8, "CPU_Speed_Limit": 28}
    # The line pmset.m prints once a level is recorded (IOPMLib: danger 5, crisis 10).
    assert macos.parse_pmset_pressure("Thermal Warning Level = 10\n") == "critical"
    assert thermal.parse_pmset_therm("Thermal Warning Level = 5\n").warnings == ["Thermal Warning Level = 5"]
    assert macos.parse_pmset_pressure(None) == UNKNOWN


# powermetrics' thermal sampler on Apple silicon: its Moderate is ProcessInfo's fair.
POWERMETRICS_LEVELS = {
    "powermetrics_thermal.txt": "nominal",
    "powermetrics_thermal_m1max.txt": "nominal",
    "powermetrics_thermal_moderate_mac17_3.txt": "fair",   # full header, above Nominal
}


@pytest.mark.parametrize("name", sorted(POWERMETRICS_LEVELS))
def test_powermetrics_pressure_published(name):
    assert macos.parse_thermal_pressure_powermetrics(fixture(name)) == POWERMETRICS_LEVELS[name]


def test_powermetrics_pressure():
    assert macos.parse_thermal_pressure_powermetrics(fixture("powermetrics_not_root.txt")) == UNKNOWN
    assert macos.parse_thermal_pressure_powermetrics("Current pressure level: Heavy\n") == "serious"
    assert macos.parse_thermal_pressure_powermetrics(None) == UNKNOWN
    assert macos.level_of_thermal_state(2) == "serious" and macos.level_of_thermal_state(7) == UNKNOWN


@pytest.fixture
def darwin(monkeypatch):
    monkeypatch.setattr(sys, "platform", "darwin")
    monkeypatch.setitem(sys.modules, "pynvml", None)     # no NVML: nvidia unknown


class Tools:
    """The tool runner: argv -> published output, None for a tool that is missing or fails."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def __call__(self, argv, timeout=3.0):
        self.calls.append(argv[0])
        return self.answers.get(tuple(argv))


POWERMETRICS = ("powermetrics", "-s", "thermal", "-n", "1", "-i", "1")


def test_thermal_pressure_sources(darwin):
    pm, therm = fixture("powermetrics_thermal.txt"), ("pmset", "-g", "therm")
    unknown = lambda: UNKNOWN  # noqa: E731  (no PyObjC)
    got = macos.thermal_pressure(Tools({}), process_info=lambda: "serious", is_root=lambda: False)
    assert got == ("serious", "ProcessInfo.thermalState")
    got = macos.thermal_pressure(Tools({POWERMETRICS: pm}), process_info=unknown, is_root=lambda: True)
    assert got == ("nominal", "powermetrics")
    # Without root powermetrics is not asked; Apple silicon's pmset publishes no level.
    tools = Tools({POWERMETRICS: pm, therm: fixture("pmset_therm_m1pro.txt")})
    assert macos.thermal_pressure(tools, process_info=unknown, is_root=lambda: False) == (UNKNOWN, "none")
    assert "powermetrics" not in tools.calls
    # Root-only output run without root (an error, no level): the next source answers.
    tools = Tools({POWERMETRICS: fixture("powermetrics_not_root.txt"), therm: fixture("pmset_therm_intel_notes.txt")})
    assert macos.thermal_pressure(tools, process_info=unknown, is_root=lambda: True) == ("nominal", "pmset")


def test_thermal_pressure_off_macos(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    assert macos.thermal_pressure(Tools({}), process_info=lambda: "critical") == (UNKNOWN, "none")


# ---------------------------------------------------------------- memory, swap, backup, Spotlight

MIB = 2**20
SWAP = {
    # Mac17,5, Apple A18 Pro, 8 GiB
    "sysctl_swapusage_a18pro.txt": {
        "total_bytes": 2048 * MIB, "used_bytes": round(982.69 * MIB), "free_bytes": round(1065.31 * MIB)},
    # arm64, 64 GiB
    "sysctl_swapusage_arm64_64g.txt": {
        "total_bytes": 10240 * MIB, "used_bytes": round(9460.62 * MIB), "free_bytes": round(779.38 * MIB)},
    # No swap file yet: zeros, not "unknown".
    "sysctl_swapusage_zero_fastfetch.txt": {"total_bytes": 0, "used_bytes": 0, "free_bytes": 0},
}


@pytest.mark.parametrize("name", sorted(SWAP))
def test_swapusage_published(name):
    assert to_builtins(macos.parse_swapusage(fixture(name))) == SWAP[name]


def test_swapusage():
    assert to_builtins(macos.parse_swapusage(fixture("sysctl_swapusage_px80.txt"))) == {
        "total_bytes": 4096 * 2**20, "used_bytes": 2876768256, "free_bytes": 1352 * 2**20 + 2**19}
    assert to_builtins(macos.parse_swapusage(fixture("sysctl_swapusage_comma_locale.txt")))["used_bytes"] == 397672448
    assert to_builtins(macos.parse_swapusage(fixture("sysctl_memory_18core_loaded.txt")))["total_bytes"] == 13958643712
    assert macos.parse_swapusage("sysctl: unknown oid 'vm.swapusage'") == UNKNOWN
    assert macos.parse_swapusage(None) == UNKNOWN


MEMORY_FREE_PCT = {
    "memory_pressure_macmini_32g.txt": 88,       # the full report, 16 KiB pages
    "memory_pressure_q_a18pro.txt": 38,          # -Q
    "memory_pressure_q_arm64_64g.txt": 93,
    "memory_pressure_q_bytes_form.txt": 40,      # "... bytes of physical memory." first line
    "memory_pressure_stats3159.txt": 66,
}


@pytest.mark.parametrize("name", sorted(MEMORY_FREE_PCT))
def test_memory_pressure_published(name):
    assert macos.parse_memory_pressure(fixture(name)) == MEMORY_FREE_PCT[name]


def test_memory_pressure():
    assert macos.parse_vm_pressure_level(fixture("sysctl_vm_pressure_light.txt")) == "normal"
    assert macos.parse_vm_pressure_level(fixture("sysctl_vm_pressure_heavy.txt")) == "critical"
    assert macos.parse_vm_pressure_level(fixture("sysctl_memory_18core_loaded.txt")) == "warn"
    assert macos.parse_vm_pressure_level("1\n") == "normal"              # sysctl -n
    assert macos.parse_vm_pressure_level("3\n") == UNKNOWN
    assert macos.parse_memory_pressure(fixture("memory_pressure_stats3159.txt")) == 66
    assert macos.parse_memory_pressure(None) == UNKNOWN


def test_memory_state_from_one_sysctl():
    state = macos.memory_state(Tools({tuple(macos.MEMORY_SYSCTL): fixture("sysctl_memory_18core_loaded.txt")}))
    assert to_builtins(state) == {"memory_pressure": "warn", "swap_used_bytes": 12190419517}
    assert to_builtins(macos.memory_state(Tools({}))) == {"memory_pressure": UNKNOWN, "swap_used_bytes": UNKNOWN}


def test_backup_status():
    assert thermal.parse_tmutil_status(fixture("tmutil_status_idle.txt")) is False
    # During a backup: Running = 1 beside the nested Progress dict's keys.
    assert thermal.parse_tmutil_status(fixture("tmutil_status_copying.txt")) is True
    assert thermal.parse_tmutil_status(None) == UNKNOWN


def test_power_source():
    assert thermal.parse_pmset_batt(fixture("pmset_batt_m1.txt")) == "AC Power"
    assert thermal.parse_pmset_batt(fixture("pmset_batt_on_battery.txt")) == "Battery Power"
    assert thermal.parse_pmset_batt(None) == UNKNOWN


def test_spotlight():
    assert macos.spotlight_busy([("mds_stores", 61.0), ("Finder", 3.0)]) is True
    assert macos.spotlight_busy([("mds", 4.0), ("mdworker_shared", 5.9), ("kernel_task", 80.0)]) is False
    assert macos.spotlight_busy([("mds", 4.0), ("mdworker_shared", 6.0)]) is True
    ps = "  1  0  0.3 /sbin/launchd\n 319  1 88.0 /System/Library/Frameworks/CoreServices.framework" \
         "/Versions/A/Frameworks/Metadata.framework/Versions/A/Support/mds_stores\n"
    assert macos.spotlight_indexing(Tools({tuple(macos.PS): ps})) is True
    assert macos.spotlight_indexing(Tools({})) == UNKNOWN


# ---------------------------------------------------------------- cores

def test_core_counts():
    assert to_builtins(applegpu.parse_core_counts(fixture("sysctl_hw_m1pro.txt"))) == {
        "performance_cores": 8, "efficiency_cores": 2,
        "core_levels": {"Performance": 8, "Efficiency": 2}}       # macOS 12: no level names
    assert to_builtins(applegpu.parse_core_counts(fixture("sysctl_hw_m3max.txt"))) == {
        "performance_cores": 10, "efficiency_cores": 4,
        "core_levels": {"Performance": 10, "Efficiency": 4}}
    assert to_builtins(applegpu.parse_core_counts(fixture("sysctl_hw_m5.txt"))) == {
        "performance_cores": 4, "efficiency_cores": 6, "core_levels": {"Super": 4, "Efficiency": 6}}
    assert applegpu.parse_core_counts(None).performance_cores == UNKNOWN


def test_gpu_cores():
    assert applegpu.parse_gpu_cores(fixture("system_profiler_displays_m3max.json")) == 40
    assert applegpu.parse_gpu_cores(fixture("system_profiler_displays_m2max.json")) == 30
    assert applegpu.parse_gpu_cores('{"SPDisplaysDataType": [{"sppci_model": "Intel Iris Pro"}]}') == UNKNOWN
    assert applegpu.parse_gpu_cores(None) == UNKNOWN


# ---------------------------------------------------------------- the readers

def published_mac(*, process_info=UNKNOWN):
    """A Mac whose tools answer with the published outputs."""
    return Tools({
        ("pmset", "-g", "therm"): fixture("pmset_therm_m1pro.txt"),
        ("pmset", "-g", "batt"): fixture("pmset_batt_m1.txt"),
        ("tmutil", "status"): fixture("tmutil_status_idle.txt"),
        tuple(macos.MEMORY_SYSCTL): fixture("sysctl_memory_18core_loaded.txt"),
        tuple(applegpu.IOREG_GPU): as_plist(fixture("ioreg_gpu_m4.txt")).decode(),
        tuple(applegpu.SYSCTL_HW): fixture("sysctl_hw_m3max.txt"),
        tuple(applegpu.GPU_CORES): fixture("system_profiler_displays_m3max.json"),
    })


def test_darwin_thermal_state(darwin, monkeypatch):
    tools = published_mac()
    monkeypatch.setattr(thermal, "run_quiet", tools)
    monkeypatch.setattr(macos, "_process_info_state", lambda: "fair")
    state = to_builtins(thermal.thermal_state())
    assert state["thermal_pressure"] == "fair"
    assert state["thermal_pressure_source"] == "ProcessInfo.thermalState"
    assert state["memory_pressure"] == "warn" and state["swap_used_bytes"] == 12190419517
    assert state["backup_running"] is False and state["spotlight_indexing"] == UNKNOWN  # no ps answer
    assert state["power_source"] == "AC Power" and state["pmset_therm"]["warnings"] == []
    assert tools.calls.count("pmset") == 2          # therm once (pressure reuses it), batt once
    verdict = thermal.thermal_verdict(state)
    assert verdict == thermal.ThermalVerdict(checked=True, nominal=False,
                                             reason="thermal pressure fair (ProcessInfo.thermalState)")


def test_darwin_thermal_state_with_every_tool_missing(darwin, monkeypatch):
    monkeypatch.setattr(thermal, "run_quiet", Tools({}))
    monkeypatch.setattr(macos, "_is_root", lambda: True)
    monkeypatch.setitem(sys.modules, "Foundation", None)     # no PyObjC
    state = to_builtins(thermal.thermal_state())
    assert (state["thermal_pressure"], state["thermal_pressure_source"]) == (UNKNOWN, "none")
    for key in ("memory_pressure", "swap_used_bytes", "spotlight_indexing", "backup_running", "power_source"):
        assert state[key] == UNKNOWN
    assert thermal.thermal_verdict(state).checked is False


def test_linux_thermal_state_has_no_macos_keys(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    state = to_builtins(thermal.thermal_state())
    for key in ("thermal_pressure", "thermal_pressure_source", "spotlight_indexing", "memory_pressure",
                "swap_used_bytes"):
        assert key not in state


def test_gpu_utilization_reader(darwin, monkeypatch):
    monkeypatch.setattr(applegpu, "run_quiet", published_mac())
    assert applegpu.gpu_utilization() == IOREG["ioreg_gpu_m4.txt"]
    assert macos.gpu_utilization is applegpu.gpu_utilization
    monkeypatch.setattr(applegpu, "run_quiet", Tools({}))
    assert applegpu.gpu_utilization() is None


def test_gpu_utilization_off_macos(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(applegpu, "run_quiet", published_mac())
    assert applegpu.gpu_utilization() is None


def test_host_metadata_cores(darwin, monkeypatch):
    tools = published_mac()
    monkeypatch.setattr(applegpu, "run_quiet", tools)
    monkeypatch.setattr(info, "run_quiet", tools)
    cpu = info.cpu_info()
    assert (cpu.performance_cores, cpu.efficiency_cores) == (10, 4)
    assert info.gpu_info().gpu_cores == 40
    # system_profiler missing: ioreg's gpu-core-count answers.
    del tools.answers[tuple(applegpu.GPU_CORES)]
    assert applegpu.gpu_cores() == 10
    monkeypatch.setattr(applegpu, "run_quiet", Tools({}))
    assert applegpu.gpu_cores() == UNKNOWN
    assert applegpu.core_counts().efficiency_cores == UNKNOWN


def test_linux_host_metadata_has_no_core_split(monkeypatch):
    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert "performance_cores" not in to_builtins(info.cpu_info())
    assert "gpu_cores" not in to_builtins(info.gpu_info())
