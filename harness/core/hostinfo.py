"""The record's host section and a run's load section, typed (msgspec).

The host section is what harness.collect.host.info.collect_host saw of the machine (one
section per concern), and the host spec it matched; a run's `load` is what the runner read
around that run (load snapshots, the quiet wait, the contention watch, thermal state and its
wait, the GPU idle readings). Producers build these types and write them with
`msgspec.to_builtins`; readers convert a record's dict once (`as_host`, `as_load`) and read
attributes.

Shape on disk: a host section is written with every field its producer sets, "unknown" where
the host cannot tell (never a guess); a field only some hosts or versions have defaults to
UNSET, which is never written. Older records lack whole sections or fields: they decode to the
defaults here ("unknown", None), which read as "not reported". A section a collector could not
read is {"error": "..."}: every other field at its default.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
from msgspec import UNSET, UnsetType

UNKNOWN = "unknown"


class _Section(msgspec.Struct, kw_only=True):
    """A host reading: every field it sets is written (defaults too), UNSET ones never."""


class _Load(msgspec.Struct, kw_only=True, omit_defaults=True):
    """A run's load reading: a field at its default is left out, as the runner leaves it out."""


# ---------------------------------------------------------------- host spec

class Cooldown(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Before a measured run, cool down for clamp(ratio x the previous run's wall time, floor_s,
    cap_s); cap_s null: no cap."""
    floor_s: float
    ratio: float
    cap_s: float | None

    def describe(self) -> str:
        """"floor 5 s, 9 x previous run, cap 90 s" for cooldown_source and reports."""
        parts = [f"floor {self.floor_s:g} s"]
        if self.ratio:
            parts.append(f"{self.ratio:g} x previous run")
        if self.cap_s is not None:
            parts.append(f"cap {self.cap_s:g} s")
        return ", ".join(parts)


class HostSpec(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One lab host (harness/hosts_data/): what the vendor promises and how to recognise the
    machine (`match`: rule -> the words any of which must appear; specs.MATCH_RULES). Other keys
    in the file are not read."""
    name: str
    asv_machine: str
    chip: str
    gpu_generation: str
    memory_gb: int | float | None
    peak_bandwidth_gbs: int | float | None
    peak_bandwidth_source: str
    match: dict[str, Any]
    cooldown: Cooldown
    description: str | None = None
    backend: str | None = None
    memory_source: str | None = None
    cooldown_note: str | None = None
    generic: bool = False      # a fallback: any specific spec that matches wins over it

    def as_dict(self) -> dict[str, Any]:
        """The spec as a record's host section keeps it."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


# ---------------------------------------------------------------- host sections

class HostCpu(_Section, kw_only=True):
    model: str = UNKNOWN
    arch: str = UNKNOWN
    logical_cores: int | str = UNKNOWN
    physical_cores: int | str = UNKNOWN
    apple_chip: str = UNKNOWN              # the chip name on Apple silicon ("Apple M3 Ultra")
    # macOS (sysctl hw): cores by performance level, name -> physical cores, fastest first.
    performance_cores: int | str | UnsetType = UNSET
    efficiency_cores: int | str | UnsetType = UNSET
    core_levels: dict[str, int] | str | UnsetType = UNSET
    error: str | UnsetType = UNSET


class NvidiaGpu(_Section, kw_only=True):
    """One NVIDIA GPU, in nvidia-smi's strings."""
    name: str = UNKNOWN
    driver_version: str = UNKNOWN
    memory_total: str = UNKNOWN            # "143771 MiB"
    compute_cap: str = UNKNOWN             # "9.0"
    generation: str = UNKNOWN             # "sm_90"


class CudaStack(_Section, kw_only=True):
    """The CUDA version the driver supports, and the runtime, cuBLAS and cuDNN versions."""
    cuda_driver_api: str = UNKNOWN
    cuda_runtime: str = UNKNOWN
    cublas: str = UNKNOWN
    cudnn: str = UNKNOWN


class HostGpu(_Section, kw_only=True):
    mlx_backend: str = UNKNOWN             # "metal", "cuda", "none"
    name: str = UNKNOWN
    generation: str = UNKNOWN             # sm_90, applegpu_g15s, ...
    family: str = UNKNOWN
    mlx_device_info: dict[str, str | int | float] | str = UNKNOWN
    nvidia: list[NvidiaGpu] | str = UNKNOWN
    gpu_cores: int | str | UnsetType = UNSET            # macOS
    cuda: CudaStack | UnsetType = UNSET                 # an MLX CUDA build or an NVIDIA GPU
    error: str | UnsetType = UNSET

    @property
    def nvidia_gpus(self) -> list[NvidiaGpu]:
        """The NVIDIA GPUs read ([] where NVML could not answer)."""
        return self.nvidia if isinstance(self.nvidia, list) else []


class HostMemory(_Section, kw_only=True):
    total_bytes: int | str = UNKNOWN
    total_gib: float | str = UNKNOWN
    error: str | UnsetType = UNSET


class HostOs(_Section, kw_only=True):
    system: str = UNKNOWN
    platform: str = UNKNOWN
    kernel_release: str = UNKNOWN
    macos_version: str = UNKNOWN
    distribution: str = UNKNOWN
    hostname: str = UNKNOWN
    error: str | UnsetType = UNSET


class HostPython(_Section, kw_only=True):
    version: str = UNKNOWN
    implementation: str = UNKNOWN
    executable: str = UNKNOWN
    error: str | UnsetType = UNSET


class HostMlx(_Section, kw_only=True):
    mlx: str = UNKNOWN
    mlx_lm: str = UNKNOWN
    default_device: str = UNKNOWN
    error: str | UnsetType = UNSET


class HostBlas(_Section, kw_only=True):
    """The BLAS the harness's own process maps (an in-process engine's)."""
    name: str = UNKNOWN
    libraries: list[str] | str = UNKNOWN
    source: str = UNKNOWN
    scope: str = UNKNOWN
    # Records before `libraries`: the mapped libraries' paths.
    mapped_libraries: list[str] | str | UnsetType = UNSET
    error: str | UnsetType = UNSET


class RepoInfo(_Section, kw_only=True):
    """The repository under test (harness.collect.provenance)."""
    path: str = UNKNOWN
    commit: str = UNKNOWN
    short_commit: str = UNKNOWN
    branch: str = UNKNOWN
    dirty: bool | str = UNKNOWN
    source: str = "git"                    # "git": the working tree; "asv": $ASV_COMMIT
    error: str | UnsetType = UNSET


class HarnessInfo(_Section, kw_only=True):
    """The harness that measured: its commit and tree state only from a git checkout."""
    version: str = UNKNOWN
    location: str = UNKNOWN
    commit: str = UNKNOWN
    dirty: bool | str = UNKNOWN
    error: str | UnsetType = UNSET


class HostInfo(msgspec.Struct, kw_only=True):
    """A record's host section as read (harness.collect.host.info.collect_host writes it)."""
    cpu: HostCpu = msgspec.field(default_factory=HostCpu)
    gpu: HostGpu = msgspec.field(default_factory=HostGpu)
    memory: HostMemory = msgspec.field(default_factory=HostMemory)
    os: HostOs = msgspec.field(default_factory=HostOs)
    python: HostPython = msgspec.field(default_factory=HostPython)
    mlx: HostMlx = msgspec.field(default_factory=HostMlx)
    blas: HostBlas = msgspec.field(default_factory=HostBlas)
    repo: RepoInfo = msgspec.field(default_factory=RepoInfo)
    harness: HarnessInfo = msgspec.field(default_factory=HarnessInfo)
    spec: HostSpec | None = None           # the host spec matched when the record was made
    spec_error: str | None = None


def as_host(host: HostInfo | Mapping[str, Any] | None) -> HostInfo:
    """A record's host section (a dict, or absent) as a HostInfo; a HostInfo passes through."""
    if isinstance(host, HostInfo):
        return host
    return msgspec.convert(host or {}, HostInfo)


# ---------------------------------------------------------------- a run's load section

class LoadSnapshot(_Load, kw_only=True):
    """Load averages and overall CPU percent since the previous snapshot."""
    timestamp: float | None = None
    loadavg_1: float | str | None = None
    loadavg_5: float | str | None = None
    loadavg_15: float | str | None = None
    cpu_pct: float | None = None
    cpu_pct_window_s: float | None = None


class ProcessReading(_Section, kw_only=True):
    """One foreign process's CPU, as the naming scan read it."""
    pid: int
    name: str
    cpu_pct: float
    source: str = "psutil"


class Offender(_Section, kw_only=True):
    """A foreign process over the threshold: its highest reading and how many samples it was over."""
    pid: int
    name: str
    max_cpu_pct: float = 0.0
    samples_over: int = 0


class GpuReading(_Section, kw_only=True):
    """One IOAccelerator's PerformanceStatistics (harness.collect.host.applegpu.AppleGpu)."""
    device_pct: int | None = None
    renderer_pct: int | None = None
    tiler_pct: int | None = None
    in_use_bytes: int | None = None
    alloc_bytes: int | None = None


class QuietGpuResult(_Section, kw_only=True):
    """The quiet wait's GPU samples."""
    samples: int
    busy_samples: int
    device_pct_max: float | None
    limit_pct: float
    last: GpuReading | None = None


class _ForeignCpu(_Load, kw_only=True):
    """What a quiet wait and a contention watch both read: samples of foreign CPU, the processes
    they named, their limits and which sampler read them."""
    samples: int | None = None
    short_samples: int | None = None
    foreign_pct_max: float | None = None
    window_s_min: float | None = None
    busiest: ProcessReading | None = None
    offenders: list[Offender] = []
    named: bool | None = None
    naming_window_s: float | None = None
    top_processes: list[ProcessReading] = []
    unreadable_processes: int | None = None
    threshold_pct: float | None = None
    busy_at_pct: float | None = None
    interval_s: float | None = None
    min_window_s: float | None = None
    sampler: str | None = None
    enabled: bool | None = None


class QuietWaitResult(_ForeignCpu, kw_only=True):
    """The quiet wait before a run (harness.collect.host.quiet.QuietWait; {"enabled": false}
    when the suite turns it off): how long it waited past the cooldown, its samples of foreign
    CPU (and of the GPU, where the host reads it), the processes it named, and its limits."""
    waited_s: float | None = None
    cooldown_s: float | None = None
    total_s: float | None = None
    timed_out: bool | None = None
    busy_samples: int | None = None
    foreign_pct_last: float | None = None
    settle_s: float | None = None
    timeout_s: float | None = None
    gpu: QuietGpuResult | None = None
    expected_wall_s: float | None = None     # the run's predicted length its limits were sized to
    sized: list[str] = []                    # which limits were sized to it


class ContentionResult(_ForeignCpu, kw_only=True):
    """The contention watch during a run (harness.collect.host.quiet.ContentionWatch; {"enabled":
    false} when the suite turns it off): its samples of foreign CPU, the processes it named, its
    schedule, and which watcher ran it ("process", or "thread: " and why)."""
    contended_samples: int | None = None
    contended_fraction: float | None = None
    foreign_pct_mean: float | None = None
    predicted_wall_s: float | None = None
    duration_s: float | None = None
    watch_cpu_s: float | None = None
    watcher: str | None = None


class ThermalZone(_Section, kw_only=True):
    """A Linux thermal zone with a readable temperature; passive_c: its lowest passive trip."""
    zone: str
    type: str = UNKNOWN
    temp_c: float
    passive_c: float | None = None


class PmsetTherm(_Section, kw_only=True):
    """`pmset -g therm`: its "CPU_Speed_Limit = 100" lines, and recorded warning levels."""
    limits: dict[str, int] | str = UNKNOWN
    warnings: list[str] | str = UNKNOWN


class NvidiaState(_Section, kw_only=True):
    """Clocks, temperature, power and clock-event reasons of one NVIDIA GPU, in nvidia-smi's strings."""
    sm_clock_mhz: str = UNKNOWN
    mem_clock_mhz: str = UNKNOWN
    temperature_c: str = UNKNOWN
    power_draw_w: str = UNKNOWN
    throttle_reasons_active: str = UNKNOWN
    throttle_reasons: list[str] | str = UNKNOWN


class ThermalState(_Section, kw_only=True):
    """Thermal, power and backup state before a run; "unknown" where unreadable. The macOS
    readings are there on macOS only; `error` says a platform's readings failed."""
    cpu_speed_limit: int | str = UNKNOWN
    pmset_therm: PmsetTherm | str = UNKNOWN
    power_source: str = UNKNOWN
    backup_running: bool | str = UNKNOWN
    temperatures_c: dict[str, float] | str = UNKNOWN
    thermal_zones: list[ThermalZone] | str = UNKNOWN
    power_plugged: bool | str = UNKNOWN
    cpu_freq_mhz: int | str = UNKNOWN
    thermal_pressure: str | UnsetType = UNSET
    thermal_pressure_source: str | UnsetType = UNSET
    spotlight_indexing: bool | str | UnsetType = UNSET
    memory_pressure: str | UnsetType = UNSET
    swap_used_bytes: int | str | UnsetType = UNSET
    error: str | UnsetType = UNSET
    nvidia: list[NvidiaState] | str | UnsetType = UNSET
    reused_age_s: float | UnsetType = UNSET    # a recent reading reused, this old


class ThermalWait(_Section, kw_only=True):
    """The wait for a nominal thermal state: the verdict, how long it waited, how many reads."""
    checked: bool
    nominal: bool | str                     # "unknown" where nothing was readable
    reason: str
    waited_s: float = 0.0
    reads: int = 1


class GpuLoad(_Section, kw_only=True):
    """The GPU read while our engine was idle either side of the run, and the limit held to."""
    limit_pct: float
    settle_s: float | None = None
    before: GpuReading
    after: GpuReading | None = None


class RunLoad(_Load, kw_only=True):
    """What the runner read around one run."""
    before: LoadSnapshot | None = None
    after: LoadSnapshot | None = None
    quiet_wait: QuietWaitResult | None = None
    contention: ContentionResult | None = None
    thermal: ThermalState | None = None
    thermal_wait: ThermalWait | None = None
    gpu: GpuLoad | None = None


def as_load(load: RunLoad | Mapping[str, Any] | None) -> RunLoad:
    """A run's load section (a dict, or absent) as a RunLoad; a RunLoad passes through."""
    if isinstance(load, RunLoad):
        return load
    return msgspec.convert(load or {}, RunLoad)
