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
from dataclasses import dataclass
from typing import Any

# (what, path in the record's host section). Library paths differ between checkouts of the
# same files, so BLAS is compared by library file names, not paths.
HOST_FIELDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("mlx", ("mlx", "mlx")),
    ("mlx-lm", ("mlx", "mlx_lm")),
    ("MLX device", ("mlx", "default_device")),
    ("BLAS", ("blas", "name")),
    ("BLAS libraries", ("blas", "libraries")),
    ("OS", ("os", "system")),
    ("OS release", ("os", "platform")),
    ("OS distribution", ("os", "distribution")),
    ("macOS", ("os", "macos_version")),
    ("MLX backend", ("gpu", "mlx_backend")),
    ("GPU", ("gpu", "name")),
    ("MLX device info", ("gpu", "mlx_device_info")),
    ("NVIDIA GPUs and driver", ("gpu", "nvidia")),
    ("Python", ("python", "version")),
    ("Python implementation", ("python", "implementation")),
    ("CPU", ("cpu", "model")),
    ("logical cores", ("cpu", "logical_cores")),
    ("memory GiB", ("memory", "total_gib")),
    ("host spec", ("spec", "name")),
    ("harness", ("harness", "version")),
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


def _get(host: dict[str, Any], path: tuple[str, ...]) -> Any:
    x: Any = host
    for k in path:
        if not isinstance(x, dict):
            return None
        x = x.get(k)
    return x


def _text(what: str, x: Any) -> str:
    if x is None or x == "" or x == []:
        return UNKNOWN
    if what == "BLAS libraries" and isinstance(x, list):
        return ", ".join(sorted({os.path.basename(str(p)) for p in x}))
    if isinstance(x, list):
        return "; ".join(_text(what, g) if isinstance(g, dict) else str(g) for g in x)
    if isinstance(x, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(x.items()) if k not in VOLATILE)
    return str(x)


def engines_of(runs: list[dict[str, Any]]) -> dict[str, str]:
    """{arm: "name version, numerics N, blas B"} from the runs' own engine reports."""
    out: dict[str, set[str]] = {}
    for r in runs:
        e = r.get("engine_info") or r.get("engine") or {}
        if not isinstance(e, dict) or not e:
            continue
        parts = [f"{e.get('name', '?')} {e.get('version', '?')}"]
        parts += [f"{k} {e[k]}" for k in ("mlx", "mlx_lm", "device", "numerics", "blas") if e.get(k)]
        out.setdefault(str(r.get("arm")), set()).add(", ".join(parts))
    return {arm: " | ".join(sorted(v)) for arm, v in out.items()}


def uses_harness_process(rec: dict[str, Any]) -> bool:
    """Whether the host's MLX and BLAS fields bear on this record's engines: one runs in the
    harness's process (not a command), declares MLX numerics, reports MLX in its runs, or the
    dispatch measurement times MLX work after each run."""
    suite = rec.get("suite") or {}
    engines = [e for e in (suite.get("engines") or {}).values() if isinstance(e, dict)]
    if any(e.get("adapter", "command") != "command" or "mlx" in str(e.get("numerics", "")).lower()
           for e in engines):
        return True
    if any(a.get("engine") in (None, "", "embedded") and not engines for a in suite.get("arms") or []
           if isinstance(a, dict)):
        return True   # a record from before engines were declared: the embedded MLX engine
    if (suite.get("settings") or {}).get("dispatch_measurement"):
        return True
    return any("mlx" in str(v).lower() for v in engines_of(rec.get("runs") or []).values())


def _fields(a: dict[str, Any], b: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    own = uses_harness_process(a) or uses_harness_process(b)
    return [(w, p) for w, p in HOST_FIELDS if own or w not in IN_PROCESS]


def env_diff(a: dict[str, Any], b: dict[str, Any]) -> list[EnvDifference]:
    """Every environment field in which record b differs from record a, host fields first, then
    each arm's engine as it reported itself."""
    ha, hb = a.get("host") or {}, b.get("host") or {}
    out = []
    for what, path in _fields(a, b):
        x, y = _text(what, _get(ha, path)), _text(what, _get(hb, path))
        if x != y:
            out.append(EnvDifference(what, x, y))
    ea, eb = engines_of(a.get("runs") or []), engines_of(b.get("runs") or [])
    for arm in sorted(set(ea) & set(eb)):
        if ea[arm] != eb[arm]:
            out.append(EnvDifference(f"engine ({arm})", ea[arm], eb[arm]))
    return out


def compared(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What env_diff compared and found known on a side, in the words of diff_sentence: only
    the packages the engines use, the host, the harness, and the engines' own reports."""
    ha, hb = a.get("host") or {}, b.get("host") or {}
    out: list[str] = []
    for what, path in _fields(a, b):
        if _text(what, _get(ha, path)) == _text(what, _get(hb, path)) == UNKNOWN:
            continue
        if WORDS[what] not in out:
            out.append(WORDS[what])
    if set(engines_of(a.get("runs") or [])) & set(engines_of(b.get("runs") or [])):
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
