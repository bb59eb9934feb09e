"""What differs between the environments of two records (two commits, two sessions, two hosts):
listed before any figure is compared, since a changed mlx, BLAS or driver explains a change in
speed as well as a change in the engine does.

Each field is read from the record's host section (harness.collect.host.info) and from its
runs' engine reports; a field unknown on both sides is not a difference, one unknown on one
side only is. The host's MLX and BLAS fields describe the harness's own process: they are
compared only where an engine uses them (it runs in that process, declares or reports MLX, or
the dispatch measurement times MLX work), so nothing of MLX is said of an engine that has none.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from harness.core.declare import Declared
from harness.core.hostinfo import HostInfo
from harness.core.runs import RecordData
from harness.core.schema import EngineInfo, Record, Run

# (what, its value in the record's host section). Library paths differ between checkouts of the
# same files, so BLAS is compared by library file names, not paths.
HOST_FIELDS: tuple[tuple[str, Callable[[HostInfo], Any]], ...] = (
    ("mlx", lambda h: h.mlx.mlx),
    ("mlx-lm", lambda h: h.mlx.mlx_lm),
    ("MLX device", lambda h: h.mlx.default_device),
    ("BLAS", lambda h: h.blas.name),
    ("BLAS libraries", lambda h: h.blas.libraries),
    ("OS", lambda h: h.os.system),
    ("OS release", lambda h: h.os.platform),
    ("OS distribution", lambda h: h.os.distribution),
    ("macOS", lambda h: h.os.macos_version),
    ("MLX backend", lambda h: h.gpu.mlx_backend),
    ("GPU", lambda h: h.gpu.name),
    ("MLX device info", lambda h: h.gpu.mlx_device_info),
    ("NVIDIA GPUs and driver", lambda h: h.gpu.nvidia),
    ("Python", lambda h: h.python.version),
    ("Python implementation", lambda h: h.python.implementation),
    ("CPU", lambda h: h.cpu.model),
    ("logical cores", lambda h: h.cpu.logical_cores),
    ("memory GiB", lambda h: h.memory.total_gib),
    ("host spec", lambda h: h.spec.name if h.spec is not None else None),
    ("harness", lambda h: h.harness.version),
)
UNKNOWN = "unknown"
# Fields of the harness's own process, read only where an engine uses it (above).
IN_PROCESS = {"mlx", "mlx-lm", "MLX device", "MLX backend", "MLX device info", "BLAS", "BLAS libraries"}
# The word each field goes by in "no difference in ...", in this order.
WORDS = {"mlx": "mlx", "mlx-lm": "mlx-lm", "MLX device": "MLX device", "MLX backend": "MLX device",
         "MLX device info": "MLX device", "BLAS": "BLAS", "BLAS libraries": "BLAS", "OS": "OS",
         "OS release": "OS", "OS distribution": "OS", "macOS": "OS", "GPU": "GPU",
         "NVIDIA GPUs and driver": "driver", "Python": "Python", "Python implementation": "Python",
         "CPU": "CPU", "logical cores": "CPU", "memory GiB": "memory", "host spec": "host spec",
         "harness": "harness"}
# Keys that change between sessions of one unchanged machine: not an environment difference.
VOLATILE = {"free_memory", "pci_bus_id", "uuid"}


@dataclass(frozen=True)
class EnvDifference:
    what: str
    a: str
    b: str


class _Arm(msgspec.Struct, kw_only=True):
    engine: str | None = None


class _Settings(msgspec.Struct, kw_only=True):
    dispatch_measurement: bool = False


class _Suite(msgspec.Struct, kw_only=True):
    """What envdiff reads of a record's suite: the engines it declared and used, and whether
    the dispatch measurement timed MLX work."""
    engines: dict[str, Declared] = {}
    arms: list[_Arm] = []
    settings: _Settings = msgspec.field(default_factory=_Settings)


class _Compared(msgspec.Struct, kw_only=True):
    """A record as envdiff reads it: its host section, suite and runs."""
    host: HostInfo = msgspec.field(default_factory=HostInfo)
    suite: _Suite = msgspec.field(default_factory=_Suite)
    runs: list[Run] = []


def _read(rec: RecordData | _Compared) -> _Compared:
    if isinstance(rec, _Compared):
        return rec
    if isinstance(rec, Record):
        return _Compared(host=rec.host, suite=msgspec.convert(rec.suite, _Suite, from_attributes=True), runs=rec.runs)
    return msgspec.convert(rec, _Compared)


def _text(what: str, x: Any) -> str:
    if isinstance(x, msgspec.Struct):
        x = msgspec.structs.asdict(x)
    if x is None or x == "" or x == []:
        return UNKNOWN
    if what == "BLAS libraries" and isinstance(x, list):
        return ", ".join(sorted({os.path.basename(str(p)) for p in x}))
    if isinstance(x, list):
        return "; ".join(_text(what, g) if isinstance(g, (dict, msgspec.Struct)) else str(g) for g in x)
    if isinstance(x, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(x.items()) if k not in VOLATILE)
    return str(x)


def _engine_line(e: EngineInfo) -> str:
    """"name version, mlx M, ..." of an engine's report ("?" for a name or version not given)."""
    parts = [f"{e.name if e.name != UNKNOWN else '?'} {e.version if e.version != UNKNOWN else '?'}"]
    parts += [f"{k} {v}" for k, v in (("mlx", e.mlx), ("mlx_lm", e.mlx_lm), ("device", e.device),
                                      ("numerics", e.numerics), ("blas", e.blas)) if v]
    return ", ".join(parts)


def engines_of(runs: list[Run]) -> dict[str, str]:
    """{arm: "name version, numerics N, blas B"} from the runs' own engine reports."""
    out: dict[str, set[str]] = {}
    for r in runs:
        if r.engine_info == EngineInfo():   # a failed run: no engine report
            continue
        out.setdefault(str(r.arm), set()).add(_engine_line(r.engine_info))
    return {arm: " | ".join(sorted(v)) for arm, v in out.items()}


def uses_harness_process(rec: RecordData | _Compared) -> bool:
    """Whether the host's MLX and BLAS fields bear on this record's engines: one runs in the
    harness's process (not a command), declares MLX numerics, reports MLX in its runs, or the
    dispatch measurement times MLX work after each run."""
    r = _read(rec)
    engines = list(r.suite.engines.values())
    if any(e.adapter != "command" or "mlx" in str(e.numerics).lower() for e in engines):
        return True
    if not engines and any(a.engine in (None, "", "embedded") for a in r.suite.arms):
        return True   # a record from before engines were declared: the embedded MLX engine
    if r.suite.settings.dispatch_measurement:
        return True
    return any("mlx" in v.lower() for v in engines_of(r.runs).values())


def _fields(a: _Compared, b: _Compared) -> list[tuple[str, Callable[[HostInfo], Any]]]:
    own = uses_harness_process(a) or uses_harness_process(b)
    return [(w, f) for w, f in HOST_FIELDS if own or w not in IN_PROCESS]


def env_diff(a: RecordData, b: RecordData) -> list[EnvDifference]:
    """Every environment field in which record b differs from record a, host fields first, then
    each arm's engine as it reported itself."""
    ra, rb = _read(a), _read(b)
    out = []
    for what, field in _fields(ra, rb):
        x, y = _text(what, field(ra.host)), _text(what, field(rb.host))
        if x != y:
            out.append(EnvDifference(what, x, y))
    ea, eb = engines_of(ra.runs), engines_of(rb.runs)
    for arm in sorted(set(ea) & set(eb)):
        if ea[arm] != eb[arm]:
            out.append(EnvDifference(f"engine ({arm})", ea[arm], eb[arm]))
    return out


def compared(a: RecordData, b: RecordData) -> list[str]:
    """What env_diff compared and found known on a side, in the words of diff_sentence: only
    the packages the engines use, the host, the harness, and the engines' own reports."""
    ra, rb = _read(a), _read(b)
    out: list[str] = []
    for what, field in _fields(ra, rb):
        if _text(what, field(ra.host)) == _text(what, field(rb.host)) == UNKNOWN:
            continue
        if WORDS[what] not in out:
            out.append(WORDS[what])
    if set(engines_of(ra.runs)) & set(engines_of(rb.runs)):
        out.append("engine versions")
    return out


def diff_sentence(diffs: list[EnvDifference], fields: list[str] | None = None) -> str:
    """One line for a headline or a comment: what changed, or that nothing did in `fields`
    (compared()'s words; None, from a check made before they were kept: not named)."""
    if not diffs:
        if fields is None:
            return "Environment: no difference in what the records hold of host, harness and engines."
        if not fields:
            return "Environment: neither record says what its host, harness or engine are."
        return ("Environment: no difference in " + ", ".join(fields[:-1])
                + (" or " if len(fields) > 1 else "") + fields[-1] + ".")
    return (f"Environment: {len(diffs)} difference{'s' if len(diffs) > 1 else ''}, listed first: "
            + "; ".join(f"{d.what} {d.a} -> {d.b}" for d in diffs[:4]) + ("; ..." if len(diffs) > 4 else "") + ".")
