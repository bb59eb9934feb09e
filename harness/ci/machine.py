"""This host's asv machine entry, from its host spec (`harness host register`, pr-check, nightly).

asv names a machine by a free-form entry in ~/.asv-machine.json and copies every key of it
into each result, where the dashboard offers them as filters. The entry written here uses the
matching hosts/*.json spec: its asv_machine name, chip, GPU generation and peak bandwidth.
A host no spec matches gets "unknown peak" and a warning, never a guessed figure.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from harness.collect.host.specs import HostSpec
from harness.core.errors import UserError
from harness.core.schema import section

UNKNOWN_PEAK = "unknown peak"
DEFAULT_MACHINE_FILE = Path("~/.asv-machine.json")


def default_machine_file() -> Path:
    return DEFAULT_MACHINE_FILE.expanduser()


def _known(v: Any) -> str | None:
    return None if v in (None, "", "unknown") else str(v)


class _Cpu(msgspec.Struct, kw_only=True):
    """What the machine entry reads of a host's cpu section (each value as collected)."""
    apple_chip: Any = None
    model: Any = None


class _Gpu(msgspec.Struct, kw_only=True):
    """What the machine entry reads of a host's gpu section (each value as collected)."""
    name: Any = None
    mlx_backend: Any = None
    family: Any = None
    generation: Any = None


def detected_chip(host: dict[str, Any]) -> str:
    cpu = msgspec.convert(section(host, "cpu"), _Cpu)
    gpu = msgspec.convert(section(host, "gpu"), _Gpu)
    return _known(cpu.apple_chip) or _known(gpu.name) or _known(cpu.model) or "unknown"


def detected_gpu_generation(host: dict[str, Any]) -> str:
    gpu = msgspec.convert(section(host, "gpu"), _Gpu)
    if gpu.mlx_backend == "none" and _known(gpu.name) is None:
        return "none"
    return _known(gpu.family) or _known(gpu.generation) or "unknown"


class MachineEntry(msgspec.Struct, kw_only=True):
    """An asv machine entry: asv's own fields (os, arch, cpu, num_cpu, ram), then what this
    harness adds from the host spec; every value a string, as asv stores them. An entry read
    from a machine file another tool wrote may lack any of them."""
    machine: str = ""
    os: str = ""
    num_cpu: str = ""
    arch: str = ""
    cpu: str = ""
    ram: str = ""
    chip: str = ""
    gpu_generation: str = ""
    peak_bandwidth: str = ""
    host_spec: str = ""

    def to_dict(self) -> dict[str, str]:
        return msgspec.to_builtins(self)  # type: ignore[no-any-return]  # a Struct of str fields


def peak_text(spec: HostSpec | None) -> str:
    peak = spec.peak_bandwidth_gbs if spec else None
    return UNKNOWN_PEAK if peak is None else f"{peak:g} GB/s"


def machine_entry(host: dict[str, Any], spec: HostSpec | None,
                  machine: str | None = None) -> tuple[MachineEntry, list[str]]:
    """(asv machine entry, warnings). asv's own fields (os, arch, cpu, num_cpu, ram) plus chip,
    gpu_generation, peak_bandwidth and host_spec, every value a string as asv stores them."""
    from asv.machine import Machine

    warnings: list[str] = []
    defaults = msgspec.convert({k: str(v) for k, v in Machine.get_defaults().items()}, MachineEntry)
    if spec is None:
        warnings.append("no host spec in hosts/ matches this host; its peak bandwidth is "
                        f"\"{UNKNOWN_PEAK}\" (add hosts/<name>.json with the vendor's figure)")
        chip, gen = detected_chip(host), detected_gpu_generation(host)
        name = machine or defaults.machine
    else:
        chip = spec.chip if _known(spec.chip) else detected_chip(host)
        gen = spec.gpu_generation if _known(spec.gpu_generation) else detected_gpu_generation(host)
        name = machine or spec.asv_machine
        if spec.peak_bandwidth_gbs is None:
            warnings.append(f"host spec {spec.name} has no peak bandwidth figure "
                            f"({spec.peak_bandwidth_source}); "
                            f"recorded as \"{UNKNOWN_PEAK}\"")
    entry = msgspec.structs.replace(defaults, machine=name, chip=chip, gpu_generation=gen,
                                    peak_bandwidth=peak_text(spec), host_spec=spec.name if spec else "none")
    return entry, warnings


def write_machine_entry(entry: MachineEntry, path: Path) -> None:
    """Add or replace this machine's entry, keeping the file's other machines (asv's writer)."""
    from asv.machine import MachineCollection

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        MachineCollection.save(entry.machine, entry.to_dict(), _path=str(path))
    except Exception as e:  # asv's UserError for a malformed file, or an OSError
        raise UserError(f"{path}: cannot write the asv machine entry: {e}") from None


class _MachineFile(msgspec.Struct):
    """What tells a machine file from a harness file (a record, baselines) at its top level."""
    kind: Any = None


def read_machine_file(path: Path) -> dict[str, dict[str, Any]]:
    """Machine name -> entry; {} when the file does not exist."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: not a readable asv machine file: {e}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: not an asv machine file (expected a JSON object)")
    kind = msgspec.convert(data, _MachineFile).kind
    if isinstance(kind, str) and kind.startswith("harness."):
        # A record or baselines file: its tables would read as machines, and registering would write into it.
        raise UserError(f"{path}: holds a {kind}, not an asv machine file; pass the machine file "
                        "(default ~/.asv-machine.json)")
    return {k: v for k, v in data.items() if k != "version" and isinstance(v, dict)}


def resolve_machine(path: Path, machine: str | None) -> MachineEntry | None:
    """The entry asv will use: the named one, or the only one; None when there is none."""
    entries = read_machine_file(path)
    if machine is not None:
        if machine not in entries:
            known = ", ".join(sorted(entries)) or "none"
            raise UserError(f"{path}: no machine named '{machine}' (known: {known}); "
                            f"run `harness host register`")
        return _entry(path, machine, entries[machine])
    if len(entries) == 1:
        return _entry(path, *next(iter(entries.items())))
    if not entries:
        return None
    raise UserError(f"{path}: several machines ({', '.join(sorted(entries))}); pass --machine")


def _entry(path: Path, name: str, raw: dict[str, Any]) -> MachineEntry:
    """A machine file's entry as typed: its name the file's key where the entry leaves it out,
    each value a string (asv writes them so; a hand-edited file may not)."""
    entry = msgspec.convert({k: str(v) for k, v in raw.items()}, MachineEntry)
    return entry if entry.machine else msgspec.structs.replace(entry, machine=name)


def register(spec_name: str | None = None, machine: str | None = None,
             machine_file: Path | None = None, repo: str = ".",
             host: dict[str, Any] | None = None,
             specs_dir: str | Path | None = None) -> tuple[MachineEntry, list[str], Path]:
    """Detect, match (or take --spec), write. Returns (entry, warnings, path)."""
    from harness.collect.host.specs import get_spec, load_specs, match_spec, matches

    path = machine_file or default_machine_file()
    read_machine_file(path)   # refuse what is not a machine file before writing into it
    spec = get_spec(spec_name, specs_dir) if spec_name else None  # unknown: UserError
    if host is None:
        from harness.collect.host.info import collect_host
        host = collect_host(repo)
    warnings: list[str] = []
    if spec is None:
        spec = match_spec(host, load_specs(specs_dir))
    elif not matches(spec, host):
        warnings.append(f"host spec {spec.name} was chosen with --spec, but its match "
                        f"rules {json.dumps(spec.match, sort_keys=True)} do not hold on this host")
    entry, more = machine_entry(host, spec, machine)
    write_machine_entry(entry, path)
    return entry, warnings + more, path
