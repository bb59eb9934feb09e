"""Keys schema version 5 renamed, applied by migrations.migrate_v4: version 4's words meant something else too
(the engine's profile mode, its exactness gate and probe), so a record now says "host spec",
"quiet wait" and "dispatch measurement" where it said "profile", "quiet gate" and "dispatch probe"."""

from __future__ import annotations

from typing import Any

RUN = {"dispatch_probe_ms": "dispatch_measurement_ms"}     # a run's own keys
LOAD = {"quiet_gate": "quiet_wait"}                          # a run's load section
MARKS = {"quiet_gate_timeout": "quiet_wait_timeout"}         # a run's marks (values, not keys)
HOST = {"profile": "spec", "profile_error": "spec_error"}   # the record's host section
SETTINGS = {"dispatch_probe": "dispatch_measurement"}        # suite.settings, and a paired look's figure


def renamed(d: Any, names: dict[str, str]) -> Any:
    """d with each old key under its new name (a copy; d itself where nothing changes)."""
    if not isinstance(d, dict) or not any(k in d for k in names):
        return d
    return {names.get(k, k): v for k, v in d.items()}


def run(r: dict[str, Any]) -> dict[str, Any]:
    """A version-4 run with version 5's keys and marks."""
    r = renamed(r, RUN)
    if isinstance(r.get("load"), dict) and any(k in r["load"] for k in LOAD):
        r = {**r, "load": renamed(r["load"], LOAD)}
    if isinstance(r.get("marks"), list) and any(m in MARKS for m in r["marks"]):
        r = {**r, "marks": [MARKS.get(m, m) for m in r["marks"]]}
    return r


def _looks(seq: Any) -> Any:
    """A sequential section whose looks' figures say dispatch_measurement."""
    if not isinstance(seq, dict) or not isinstance(seq.get("looks"), list):
        return seq
    return {**seq, "looks": [{**lk, "figures": {a: renamed(f, SETTINGS) for a, f in lk["figures"].items()}}
                             if isinstance(lk, dict) and isinstance(lk.get("figures"), dict) else lk
                             for lk in seq["looks"]]}


def record(out: dict[str, Any]) -> dict[str, Any]:
    """A record's own sections (its runs done by run()) with version 5's keys; out is a copy."""
    if "host" in out:
        out["host"] = renamed(out["host"], HOST)
    if isinstance(suite := out.get("suite"), dict) and isinstance(suite.get("settings"), dict):
        out["suite"] = {**suite, "settings": renamed(suite["settings"], SETTINGS)}
    if "sequential" in out:
        out["sequential"] = _looks(out["sequential"])
    if isinstance(comp := out.get("comparison"), dict) and "sequential" in comp:
        out["comparison"] = {**comp, "sequential": _looks(comp["sequential"])}
    return out
