"""Which runs pair with which: within one session (an arm against its classic reference) and
between two sessions that ran side by side (a base and a head commit).

Two runs pair when they share arm (or pairing), prompt and repetition: the plan puts them in
the same round, next to each other in time. Reads records; runs nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from harness.analyze import paired

Run = dict[str, Any]
Key = tuple[str, str, int]           # (arm, prompt, repetition)
FigureFn = Callable[[Run], float | None]

MS_PER_TOKEN = "ms/token"
MS_PER_ROUND = "ms/round"
PHASE = "phase ms/round: "


def _ok(runs: list[Run]) -> list[Run]:
    return [r for r in runs if not r.get("warmup") and r.get("status") == "ok"]


def _rounds(r: Run) -> float | None:
    d = r.get("diagnostics") or {}
    n = d.get("rounds")
    if d.get("mode") != "speculative" or not isinstance(n, (int, float)) or n <= 0:
        return None
    return float(n)


def run_figures(r: Run) -> dict[str, float]:
    """Every figure one run gives: ms/token always; for a speculative run ms/round and each of
    the engine's own phases per round (whatever names the engine reports)."""
    out: dict[str, float] = {}
    if isinstance(r.get("ms_per_token"), (int, float)):
        out[MS_PER_TOKEN] = float(r["ms_per_token"])
    n = _rounds(r)
    d = r.get("diagnostics") or {}
    if n is not None:
        if isinstance(d.get("decode_ms"), (int, float)):
            out[MS_PER_ROUND] = float(d["decode_ms"]) / n
        for phase, ms in (d.get("phase_ms") or {}).items():
            if isinstance(ms, (int, float)):
                out[PHASE + str(phase)] = float(ms) / n
    return out


def _by_key(runs: list[Run]) -> dict[Key, Run]:
    return {(r["arm"], r["prompt"], int(r.get("repetition", 0))): r for r in _ok(runs)}


def between_sessions(base: list[Run], head: list[Run]) -> dict[tuple[str, str], tuple[list[float], list[float]]]:
    """(arm, figure) -> (base values, head values), one pair per (prompt, repetition) present on
    both sides, in plan order."""
    b, h = _by_key(base), _by_key(head)
    out: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for key in sorted(set(b) & set(h), key=lambda k: (k[2], k[0], k[1])):
        fb, fh = run_figures(b[key]), run_figures(h[key])
        for fig in sorted(set(fb) & set(fh)):
            xs, ys = out.setdefault((key[0], fig), ([], []))
            xs.append(fb[fig])
            ys.append(fh[fig])
    return out


def classic_arm_for(arm: dict[str, Any], arms: list[dict[str, Any]],
                    targets: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The classic (block 1) arm of the same pairing, else of a pairing with the same target
    (classic decode runs the target alone); the same engine preferred. `targets`: pairing ->
    its target, from the suite."""
    cands = [a for a in arms if a["block"] == 1 and a["pairing"] == arm["pairing"] and a is not arm]
    if not cands and targets and targets.get(arm["pairing"]) is not None:
        cands = [a for a in arms if a["block"] == 1 and a is not arm
                 and targets.get(a["pairing"]) == targets[arm["pairing"]]]
    same = [a for a in cands if a.get("engine") == arm.get("engine")]
    return (same or cands or [None])[0]


def pairing_targets(record: dict[str, Any]) -> dict[str, str]:
    return {p["name"]: p.get("target") for p in record["suite"].get("pairings") or []}


def scaling_for(record: dict[str, Any], pairing: str | None) -> dict[str, Any] | None:
    """The record's scaling block when it was measured on this pairing's target (pairings that
    share a target share its probe and dispatch floor; a block naming no pairing is the record's
    one target's), else None."""
    sc = record.get("scaling")
    if not isinstance(sc, dict):
        return None
    targets = pairing_targets(record)
    if sc.get("pairing") is not None and targets.get(sc.get("pairing")) != targets.get(pairing):
        return None
    return sc


def vs_classic(record: dict[str, Any]) -> dict[str, tuple[str, list[float], list[float]]]:
    """Speculative arm -> (its classic arm, classic ms/token, arm ms/token), paired by prompt and
    repetition (the same round of the plan)."""
    arms = record["suite"]["arms"]
    runs = _by_key(record["runs"])
    out: dict[str, tuple[str, list[float], list[float]]] = {}
    for a in arms:
        if a["block"] == 1:
            continue
        c = classic_arm_for(a, arms, pairing_targets(record))
        if c is None:
            continue
        xs, ys = [], []
        for (arm, prompt, rep), r in sorted(runs.items(), key=lambda kv: (kv[0][2], kv[0][1])):
            ref = runs.get((c["name"], prompt, rep))
            if arm != a["name"] or ref is None:
                continue
            x, y = ref.get("ms_per_token"), r.get("ms_per_token")
            if isinstance(x, (int, float)) and isinstance(y, (int, float)):
                xs.append(float(x))
                ys.append(float(y))
        out[a["name"]] = (c["name"], xs, ys)
    return out


def judge_vs_classic(record: dict[str, Any], design: paired.Design) -> dict[str, paired.Paired]:
    """Each speculative arm's ms/token against its classic arm, judged paired."""
    return {arm: paired.analyze(xs, ys, design) for arm, (_, xs, ys) in vs_classic(record).items()}
