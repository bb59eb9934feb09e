"""Each older record version brought to the next: `MIGRATIONS[v]` takes a version-v record (a
dict, as read) to version v + 1; schema.load_record applies them in turn, then checks the
result against the current `Record`."""

from __future__ import annotations

import copy
from typing import Any

from harness.core import migrate_v5


def migrate_v1(data: dict[str, Any]) -> dict[str, Any]:
    """schema_version 1 -> 2: the same facts under the meanings above; nothing renders differently.

    v1 engines were read with fixed assumptions (the default engine's profile variable, its
    five phases and its prefixes); the suite's `engines` section states them so v2 readers agree."""
    from harness.core import declare
    out = copy.deepcopy(data)
    for r in out.get("runs") or []:
        ra = r.get("result_arm")
        if isinstance(ra, dict) and "drafter_quantized" in ra:
            q = ra.pop("drafter_quantized")
            ra.setdefault("drafter_quantization", None if q is None else {"quantized": bool(q)})
        d = r.get("diagnostics")
        if not isinstance(d, dict):
            continue
        if d.get("mode") == "classic" and d.get("rounds"):
            d["rounds"] = 0       # the v1 mlx-lm adapter counted classic tokens as rounds
        for e in d.get("rounds_log") or []:
            if isinstance(e, dict) and "proposed" not in e and isinstance(e.get("drafted"), list):
                e["proposed"] = len(e["drafted"])
    host = out.get("host")
    if isinstance(host, dict) and "harness" not in host and isinstance(host.get("repo"), dict):
        # v1's harness lived in the measured checkout: its commit and tree state were the repo's.
        repo = host["repo"]
        host["harness"] = {"version": "unknown", "location": "the measured checkout",
                           "commit": repo.get("commit", "unknown"), "dirty": repo.get("dirty", "unknown")}
    suite = out.get("suite")
    if isinstance(suite, dict) and "engines" not in suite:
        names = {a.get("engine", declare.default_engine()) for a in suite.get("arms") or [] if isinstance(a, dict)}
        suite["engines"] = {n: declare.v1_declaration(n).to_dict() for n in sorted(names)}
    out["schema_version"] = 2
    return out


def migrate_v2(data: dict[str, Any]) -> dict[str, Any]:
    """schema_version 2 -> 3: `gate_wait_s` is `quiet_wait_s` (the wait for a quiet host)."""
    out = copy.deepcopy(data)
    for r in out.get("runs") or []:
        if isinstance(r, dict) and "gate_wait_s" in r:
            r["quiet_wait_s"] = r.pop("gate_wait_s")
    out["schema_version"] = 3
    return out


def migrate_v3(data: dict[str, Any]) -> dict[str, Any]:
    """schema_version 3 -> 4: nothing to convert; `models` stays absent (not read at the time)."""
    return {**data, "schema_version": 4}


def migrate_v4(data: dict[str, Any]) -> dict[str, Any]:
    """schema_version 4 -> 5: a run's ms_per_token is kept once, at its top level; the copy in
    its diagnostics goes (the top level takes it where it has none). Keys renamed: a run's
    dispatch_probe_ms, load.quiet_gate and mark quiet_gate_timeout, and more (migrate_v5)."""
    def moved(r: Any) -> Any:
        if not isinstance(r, dict):
            return r
        r = migrate_v5.run(r)
        d = r.get("diagnostics")
        if not isinstance(d, dict) or "ms_per_token" not in d:
            return r
        # Copies of what changes only: every record of version 4 comes through here.
        out = {**r, "diagnostics": {k: v for k, v in d.items() if k != "ms_per_token"}}
        if out.get("ms_per_token") is None and d["ms_per_token"] is not None:
            out["ms_per_token"] = d["ms_per_token"]
        return out
    out = {**data, "schema_version": 5}
    if isinstance(out.get("runs"), list):
        out["runs"] = [moved(r) for r in out["runs"]]
    return migrate_v5.record(out)


MIGRATIONS = {1: migrate_v1, 2: migrate_v2, 3: migrate_v3, 4: migrate_v4}
