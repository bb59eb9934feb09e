"""What differs between the environments of two records (two commits, two sessions, two hosts):
listed before any figure is compared, since a changed mlx, BLAS or driver explains a change in
speed as well as a change in the engine does.

Each field is read from the record's host section (harness.collect.host.info) and from its
runs' engine reports; a field unknown on both sides is not a difference, one unknown on one
side only is.
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
    ("host profile", ("profile", "name")),
    ("harness", ("harness", "version")),
)
UNKNOWN = "unknown"
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


def env_diff(a: dict[str, Any], b: dict[str, Any]) -> list[EnvDifference]:
    """Every environment field in which record b differs from record a, host fields first, then
    each arm's engine as it reported itself."""
    ha, hb = a.get("host") or {}, b.get("host") or {}
    out = []
    for what, path in HOST_FIELDS:
        x, y = _text(what, _get(ha, path)), _text(what, _get(hb, path))
        if x != y:
            out.append(EnvDifference(what, x, y))
    ea, eb = engines_of(a.get("runs") or []), engines_of(b.get("runs") or [])
    for arm in sorted(set(ea) & set(eb)):
        if ea[arm] != eb[arm]:
            out.append(EnvDifference(f"engine ({arm})", ea[arm], eb[arm]))
    return out


def diff_sentence(diffs: list[EnvDifference]) -> str:
    """One line for a headline or a comment: what changed, or that nothing did."""
    if not diffs:
        return ("Environment: no difference in mlx, mlx-lm, BLAS, OS, driver, Python, host profile, "
                "harness or engine versions.")
    return (f"Environment: {len(diffs)} difference{'s' if len(diffs) > 1 else ''}, listed first: "
            + "; ".join(f"{d.what} {d.a} -> {d.b}" for d in diffs[:4]) + ("; ..." if len(diffs) > 4 else "") + ".")
