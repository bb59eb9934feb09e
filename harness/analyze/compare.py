"""Two records side by side: before/after on one host, or the same components across hosts.

Each component is compared per arm and prompt from per-run values (ms per round, or per token
for classic decode), median with min-max. A before/after change is called "noise" unless it
clears both runs' spreads: the after median must lie outside the before run's min-max range
and the before median outside the after run's. With 2-5 runs on a noisy host most changes
are noise, and the report says so rather than calling a win.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analyze.rounds import RoundSplit, all_splits, median_range
from harness.core.errors import UserError


def pairing_key(p: dict[str, Any]) -> tuple[str, str, str]:
    # Directory names, not absolute paths: the same model lives at other paths on other hosts.
    return (p["name"], Path(p["target"]).name, Path(p["drafter"]).name if p.get("drafter") else "")


def _describe_pairings(rec: dict[str, Any]) -> str:
    return ", ".join(f"{n} ({t} + {d or 'no drafter'})" for n, t, d in map(pairing_key, rec["suite"]["pairings"]))


def check_comparable(a: dict[str, Any], b: dict[str, Any], path_a: str, path_b: str) -> None:
    """UserError unless the records share a pairing and at least one arm on it."""
    ka = {pairing_key(p) for p in a["suite"]["pairings"]}
    kb = {pairing_key(p) for p in b["suite"]["pairings"]}
    if not ka & kb:
        raise UserError(f"cannot compare {path_a} with {path_b}: they measure different pairings "
                        f"({_describe_pairings(a)} vs {_describe_pairings(b)})")
    common = {k[0] for k in ka & kb}
    # Same names can hide other weights: where both records hashed them (schema 4), they must agree.
    for name in sorted(common):
        for role in ("target", "drafter"):
            ha = (((a.get("models") or {}).get(name) or {}).get(role) or {}).get("sha256")
            hb = (((b.get("models") or {}).get(name) or {}).get(role) or {}).get("sha256")
            if ha and hb and ha != hb:
                raise UserError(f"cannot compare {path_a} with {path_b}: pairing {name!r} has other {role} "
                                f"weights (sha256 {ha[:12]} vs {hb[:12]}); compare records of the same models")
    arms_a = {x["name"] for x in a["suite"]["arms"] if x["pairing"] in common}
    arms_b = {x["name"] for x in b["suite"]["arms"] if x["pairing"] in common}
    if not arms_a & arms_b:
        raise UserError(f"cannot compare {path_a} with {path_b}: no arm name in common on the shared pairing")


def host_key(rec: dict[str, Any]) -> tuple[str, ...]:
    h = rec.get("host") or {}

    def g(sec: str, key: str) -> str:
        s = h.get(sec)
        return str(s.get(key, "unknown")) if isinstance(s, dict) else "unknown"
    return (g("os", "hostname"), g("cpu", "model"), g("gpu", "name"), g("mlx", "default_device"))


def same_host(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return host_key(a) == host_key(b)


@dataclass
class Cell:
    median: float
    lo: float
    hi: float


@dataclass
class ComponentChange:
    arm: str
    prompt: str
    component: str
    unit: str
    before: Cell
    after: Cell

    @property
    def change(self) -> float:
        return self.after.median / self.before.median - 1.0 if self.before.median else 0.0

    @property
    def noise(self) -> bool:
        a, b = self.after, self.before
        return b.lo <= a.median <= b.hi or a.lo <= b.median <= a.hi

    @property
    def verdict(self) -> str:
        # Every component here is a time: lower is better.
        if self.noise:
            return "noise"
        return "faster" if self.change < 0 else "slower"


def _cells(s: RoundSplit) -> list[tuple[str, Cell]]:
    out = [("round total" if s.unit == "round" else "decode step", Cell(*median_range(s.per_run_unit_ms)))]
    for c in s.components:
        out.append((c.label, Cell(*median_range(c.per_run))))
    return out


def component_changes(a: dict[str, Any], b: dict[str, Any]) -> list[ComponentChange]:
    """Every component of every (arm, prompt) split present in both records, in a's order."""
    sb = {(s.arm, s.prompt): s for s in all_splits(b)}
    out = []
    for s in all_splits(a):
        t = sb.get((s.arm, s.prompt))
        if t is None or t.unit != s.unit:
            continue
        after = dict(_cells(t))
        for name, cell in _cells(s):
            if name in after and cell.median > 0:
                out.append(ComponentChange(s.arm, s.prompt, name, s.unit, cell, after[name]))
    return out
