"""NVIDIA readings through NVML (nvidia-ml-py): the same dicts the nvidia-smi CSV path recorded.

A fake pynvml answers with the values behind committed records' readings (an H100 and an H200
session, read by nvidia-smi's CSV output), and the collectors must give those records' dicts
back exactly; "unknown" where NVML cannot start or a board does not expose a field.
"""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from msgspec import to_builtins

from harness.collect.host import info, thermal
from harness.collect.host.info import UNKNOWN

REPO = Path(__file__).resolve().parents[1]
# Sessions measured on the lab's GPUs, their host and thermal sections read by nvidia-smi.
H100 = REPO / "reports/20261205-135043-random-8b-spec-cudnn-on-h100.json"
H200 = REPO / "reports/20261205-032041-mtp-study-h200.json"

NOT_SUPPORTED = 3
FUNCTION_NOT_FOUND = 13
LIBRARY_NOT_FOUND = 12


class FakeNVML(types.ModuleType):
    """pynvml as the collectors call it, answering from per-GPU values; an exception instance
    as a value is raised by that call (NVMLError_NotSupported: the board lacks the field)."""

    def __init__(self, gpus: list[dict[str, Any]], *, driver: str = "580.159.04", cuda: int = 13000,
                 init_error: int | None = None, event_reasons: bool = True) -> None:
        super().__init__("pynvml")
        self.gpus, self.driver, self.cuda, self.init_error = gpus, driver, cuda, init_error
        self.inits = self.shutdowns = 0

        class NVMLError(Exception):
            def __init__(self, value: int) -> None:
                super().__init__(value)
                self.value = value

        def sub(name: str, code: int) -> type:
            return type(name, (NVMLError,), {"__init__": lambda s: NVMLError.__init__(s, code)})

        self.NVMLError = NVMLError
        self.NVMLError_NotSupported = sub("NVMLError_NotSupported", NOT_SUPPORTED)
        self.NVMLError_FunctionNotFound = sub("NVMLError_FunctionNotFound", FUNCTION_NOT_FOUND)
        self.NVMLError_LibraryNotFound = sub("NVMLError_LibraryNotFound", LIBRARY_NOT_FOUND)
        self.NVML_CLOCK_SM, self.NVML_CLOCK_MEM, self.NVML_TEMPERATURE_GPU = 1, 2, 0
        if not event_reasons:   # an older driver: only the throttle-reasons call
            def missing(handle: int) -> int:
                raise self.NVMLError_FunctionNotFound()
            self.nvmlDeviceGetCurrentClocksEventReasons = missing  # type: ignore[method-assign]

    def _get(self, handle: int, key: str) -> Any:
        value = self.gpus[handle][key]
        if isinstance(value, BaseException):
            raise value
        return value

    def nvmlInit(self) -> None:
        if self.init_error is not None:
            raise self.NVMLError(self.init_error)
        self.inits += 1

    def nvmlShutdown(self) -> None:
        self.shutdowns += 1

    def nvmlDeviceGetCount(self) -> int:
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlSystemGetDriverVersion(self) -> str:
        return self.driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return self.cuda

    def nvmlDeviceGetName(self, h: int) -> str:
        return self._get(h, "name")

    def nvmlDeviceGetMemoryInfo(self, h: int) -> Any:
        return types.SimpleNamespace(total=self._get(h, "memory_bytes"), free=0, used=0)

    def nvmlDeviceGetCudaComputeCapability(self, h: int) -> tuple[int, int]:
        return self._get(h, "cc")

    def nvmlDeviceGetClockInfo(self, h: int, clock: int) -> int:
        return self._get(h, "sm_mhz" if clock == self.NVML_CLOCK_SM else "mem_mhz")

    def nvmlDeviceGetTemperature(self, h: int, sensor: int) -> int:
        assert sensor == self.NVML_TEMPERATURE_GPU
        return self._get(h, "temp_c")

    def nvmlDeviceGetPowerUsage(self, h: int) -> int:
        return self._get(h, "power_mw")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h: int) -> int:
        return self._get(h, "reasons")

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, h: int) -> int:
        return self._get(h, "reasons")


def _install(monkeypatch: pytest.MonkeyPatch, fake: FakeNVML | None) -> FakeNVML | None:
    monkeypatch.setitem(sys.modules, "pynvml", fake)   # None: `import pynvml` fails
    return fake


def _record_gpu(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]], list[list[dict[str, Any]]]]:
    """(NVML's values behind the record's nvidia-smi strings, the host's nvidia list, every
    run's thermal nvidia list)."""
    rec = json.loads(path.read_text())
    nv = rec["host"]["gpu"]["nvidia"]
    thermals = [r["load"]["thermal"]["nvidia"] for r in rec["runs"]]
    row = nv[0]
    major, minor = row["compute_cap"].split(".")
    values = {"name": row["name"], "memory_bytes": int(row["memory_total"].split()[0]) * 2**20,
              "cc": (int(major), int(minor))}
    return values, nv, thermals


def _thermal_values(row: dict[str, Any]) -> dict[str, Any]:
    # nvidia-smi printed power.draw in W with two decimals, NVML gives mW.
    return {"sm_mhz": int(row["sm_clock_mhz"]), "mem_mhz": int(row["mem_clock_mhz"]),
            "temp_c": int(row["temperature_c"]), "power_mw": round(float(row["power_draw_w"]) * 1000),
            "reasons": int(row["throttle_reasons_active"], 16)}


@pytest.mark.parametrize("path", [H100, H200], ids=["h100", "h200"])
def test_committed_records_readings_come_back_the_same(monkeypatch, path):
    values, nv, thermals = _record_gpu(path)
    fake = _install(monkeypatch, FakeNVML([values], driver=nv[0]["driver_version"]))
    assert to_builtins(info.nvidia_gpus()) == nv
    distinct = {json.dumps(t, sort_keys=True): t for t in thermals}.values()
    assert len(distinct) > 1            # several readings (clocks, temperature, power) to compare
    for recorded in distinct:
        fake.gpus = [{**values, **_thermal_values(recorded[0])}]
        assert to_builtins(thermal.nvidia_state()) == recorded
    # Every session opened is closed again, as an nvidia-smi process ended.
    assert fake.inits == fake.shutdowns == 1 + len(distinct)


def test_cuda_driver_version_is_the_banners():
    # The records' "CUDA Version: 13.0" from nvidia-smi's banner; NVML says 13000.
    rec = json.loads(H200.read_text())
    assert rec["host"]["gpu"]["cuda"]["cuda_driver_api"] == "13.0"
    assert info.cuda_stack(13000, None).cuda_driver_api == "13.0"
    assert info.cuda_stack(12020, None).cuda_driver_api == "12.2"
    assert info.cuda_stack(None, None).cuda_driver_api == UNKNOWN


def test_cuda_driver_version_through_nvml(monkeypatch):
    _install(monkeypatch, FakeNVML([{"name": "NVIDIA H200"}], cuda=12080))
    assert info.cuda_driver_version() == 12080
    _install(monkeypatch, FakeNVML([], cuda=12080))
    assert info.cuda_driver_version() is None


def test_gb10_fields_it_lacks_are_unknown(monkeypatch):
    # nvidia-smi printed "NVIDIA GB10, 580.95.05, [N/A], 12.1": no separate VRAM on GB10.
    fake = FakeNVML([{"name": "NVIDIA GB10", "cc": (12, 1), "sm_mhz": 2418, "mem_mhz": 4266,
                      "temp_c": 47, "reasons": 0x1}], driver="580.95.05")
    fake.gpus[0]["memory_bytes"] = fake.NVMLError_NotSupported()
    fake.gpus[0]["power_mw"] = fake.NVMLError_NotSupported()
    _install(monkeypatch, fake)
    assert to_builtins(info.nvidia_gpus()) == [{"name": "NVIDIA GB10", "driver_version": "580.95.05",
                                   "memory_total": UNKNOWN, "compute_cap": "12.1", "generation": "sm_121"}]
    assert to_builtins(thermal.nvidia_state()) == [{"sm_clock_mhz": "2418", "mem_clock_mhz": "4266", "temperature_c": "47",
                                       "power_draw_w": UNKNOWN, "throttle_reasons_active": "0x0000000000000001",
                                       "throttle_reasons": ["gpu_idle"]}]


def test_unreadable_clock_reasons_are_unknown_and_unchecked(monkeypatch):
    fake = FakeNVML([{"sm_mhz": 1980, "mem_mhz": 2619, "temp_c": 41, "power_mw": 121470}])
    fake.gpus[0]["reasons"] = fake.NVMLError(999)     # nvidia-smi's "[Unknown Error]"
    _install(monkeypatch, fake)
    rows = thermal.nvidia_state()
    assert isinstance(rows, list)
    assert rows[0].throttle_reasons_active == rows[0].throttle_reasons == UNKNOWN
    assert thermal.thermal_verdict({"nvidia": rows}).checked is False


def test_older_driver_throttle_reasons_are_read(monkeypatch):
    # A driver without the clock-events call: its throttle-reasons call answers instead.
    _install(monkeypatch, FakeNVML([{"sm_mhz": 1980, "mem_mhz": 2619, "temp_c": 41, "power_mw": 121470,
                                     "reasons": 0x44}], event_reasons=False))
    rows = thermal.nvidia_state()
    assert isinstance(rows, list)
    row = rows[0]
    assert row.sm_clock_mhz == "1980" and row.power_draw_w == "121.47"
    assert row.throttle_reasons_active == "0x0000000000000044"
    assert row.throttle_reasons == ["sw_power_cap", "hw_thermal_slowdown"]
    assert thermal.thermal_verdict({"nvidia": [row]}).nominal is False


@pytest.mark.parametrize("fake", [FakeNVML([], init_error=LIBRARY_NOT_FOUND), FakeNVML([]), None],
                         ids=["no-driver", "no-gpu", "no-pynvml"])
def test_no_nvml_answer_is_unknown(monkeypatch, fake):
    # No driver (nvmlInit raises), no GPU, or no nvidia-ml-py: what nvidia-smi's absence gave.
    _install(monkeypatch, fake)
    assert info.nvidia_gpus() == UNKNOWN
    assert thermal.nvidia_state() == UNKNOWN
    assert info.cuda_driver_version() is None
    assert thermal.thermal_state().nvidia == UNKNOWN
    gpu = to_builtins(info.gpu_info())
    assert gpu["nvidia"] == UNKNOWN
    if gpu["mlx_backend"] != "cuda":
        assert "cuda" not in gpu
    if fake is not None:
        assert fake.inits == fake.shutdowns


def test_a_failing_device_query_is_unknown_and_closes_nvml(monkeypatch):
    fake = FakeNVML([{"name": "NVIDIA H200"}])

    def lost(i: int) -> int:
        raise fake.NVMLError(15)    # GPU is lost

    fake.nvmlDeviceGetHandleByIndex = lost  # type: ignore[method-assign]
    _install(monkeypatch, fake)
    assert info.nvidia_gpus() == UNKNOWN
    assert fake.inits == fake.shutdowns == 1


def test_two_gpus_in_index_order(monkeypatch):
    values, nv, _ = _record_gpu(H200)
    _install(monkeypatch, FakeNVML([values, {**values, "name": "NVIDIA H200 NVL"}]))
    rows = to_builtins(info.nvidia_gpus())
    assert rows[0] == nv[0] and rows[1] == {**nv[0], "name": "NVIDIA H200 NVL"}
