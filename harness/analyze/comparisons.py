"""Which runs pair with which: within one session (an arm against its classic reference) and
between two sessions that ran side by side (a base and a head commit).

Two runs pair when they share arm (or pairing), prompt and repetition: the plan puts them in
the same round, next to each other in time. Reads records; runs nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.analyze import contended, paired, spoiled
from harness.analyze.design import Design
from harness.core.recordsections import Scaling
from harness.core.runs import AnyRecord, as_runs, measured_ok_runs, record_core
from harness.core.schema import Run, SuiteSection
from harness.core.suitespec import Arm

Key = tuple[str, str, int]           # (arm, prompt, repetition)

MS_PER_TOKEN = "ms/token"
MS_PER_ROUND = "ms/round"
PHASE = "phase ms/round: "
PROBE = "dispatch measurement ms"   # the covariate's own pairs (harness.collect.host.dispatch): shown, not gated


def _rounds(r: Run) -> float | None:
    n = r.diagnostics.rounds
    if r.diagnostics.mode != "speculative" or n is None or n <= 0:
        return None
    return float(n)


def run_figures(r: Run) -> dict[str, float]:
    """Every figure one run gives: ms/token always; for a speculative run ms/round and each of
    the engine's own phases per round (whatever names the engine reports)."""
    out: dict[str, float] = {}
    if r.ms_per_token is not None:
        out[MS_PER_TOKEN] = float(r.ms_per_token)
    n = _rounds(r)
    if n is not None:
        if r.diagnostics.decode_ms is not None:
            out[MS_PER_ROUND] = float(r.diagnostics.decode_ms) / n
        for phase, ms in r.diagnostics.phase_ms.items():
            out[PHASE + str(phase)] = float(ms) / n
    return out


def _by_key(runs: Iterable[Run | Mapping[str, Any]], usable: bool = True) -> dict[Key, Run]:
    """The runs a verdict may use by key, typed; usable False: every measured ok run (the
    contended share counts those). A record's run dicts are converted here, once a call."""
    typed = as_runs(runs)
    kept = spoiled.usable_runs(typed) if usable else measured_ok_runs(typed)
    return {(str(r.arm), str(r.prompt), r.repetition or 0): r for r in kept}


Pairs = tuple[list[float], list[float]]


@dataclass(frozen=True)
class SessionPairs:
    """Two sessions' pairs: (arm, figure) -> (base values, head values) in plan order; the
    dispatch measurement's (base, head) times of the same pairs, for each figure whose every pair has a
    probe on both sides (suite `dispatch_measurement`); and each pair's worker generation ("base/head"
    generation numbers), for each figure whose every run names its worker's generation."""

    table: dict[tuple[str, str], Pairs]
    probes: dict[tuple[str, str], Pairs]
    blocks: dict[tuple[str, str], list[str]]


def between_sessions(base: Sequence[Run | Mapping[str, Any]], head: Sequence[Run | Mapping[str, Any]]
                     ) -> dict[tuple[str, str], Pairs]:
    """(arm, figure) -> (base values, head values), one pair per (prompt, repetition) present on
    both sides, in plan order."""
    return pair_sessions(base, head).table


def _probe(r: Run) -> float | None:
    p = r.dispatch_measurement_ms
    return float(p) if p is not None and p > 0 else None


def pair_sessions(base: Sequence[Run | Mapping[str, Any]], head: Sequence[Run | Mapping[str, Any]]) -> SessionPairs:
    """Every pair of the two sessions, with its probe readings and worker generations."""
    b, h = _by_key(base), _by_key(head)
    out: dict[tuple[str, str], Pairs] = {}
    probes: dict[tuple[str, str], tuple[list[float | None], list[float | None]]] = {}
    gens: dict[tuple[str, str], list[tuple[int | None, int | None]]] = {}
    for key in sorted(set(b) & set(h), key=lambda k: (k[2], k[0], k[1])):
        fb, fh = run_figures(b[key]), run_figures(h[key])
        for fig in sorted(set(fb) & set(fh)):
            xs, ys = out.setdefault((key[0], fig), ([], []))
            xs.append(fb[fig])
            ys.append(fh[fig])
            ps, qs = probes.setdefault((key[0], fig), ([], []))
            ps.append(_probe(b[key]))
            qs.append(_probe(h[key]))
            gens.setdefault((key[0], fig), []).append((b[key].worker_generation or None, h[key].worker_generation or None))
    complete = {k: ([float(x) for x in ps if x is not None], [float(y) for y in qs if y is not None])
                for k, (ps, qs) in probes.items()
                if None not in ps and None not in qs}
    blocks = {k: [f"{gb}/{gh}" for gb, gh in g] for k, g in gens.items()
              if all(gb is not None and gh is not None for gb, gh in g)}
    return SessionPairs(out, complete, blocks)


def classic_arm_for(arm: Arm, arms: Sequence[Arm], targets: Mapping[str, str] | None = None) -> Arm | None:
    """The classic (block 1) arm of the same pairing, else of a pairing with the same target
    (classic decode runs the target alone); the same engine preferred. `targets`: pairing ->
    its target, from the suite."""
    cands = [a for a in arms if a.block == 1 and a.pairing == arm.pairing and a is not arm]
    if not cands and targets and targets.get(arm.pairing) is not None:
        cands = [a for a in arms if a.block == 1 and a is not arm
                 and targets.get(a.pairing) == targets[arm.pairing]]
    same = [a for a in cands if a.engine == arm.engine]
    found = same or cands
    return found[0] if found else None


def pairing_targets(record: AnyRecord | SuiteSection) -> dict[str, str]:
    """Pairing -> its target, from a record's suite (or the typed suite itself)."""
    suite = record if isinstance(record, SuiteSection) else record_core(record).suite
    return {p.name: p.target for p in suite.pairings}


def scaling_for(record: AnyRecord, pairing: str | None) -> Scaling | None:
    """The record's scaling block when it was measured on this pairing's target (pairings that
    share a target share its probe and dispatch floor; a block naming no pairing is the record's
    one target's), else None."""
    rec = record_core(record)
    sc = rec.scaling
    if sc is None:
        return None
    targets: dict[Any, str] = pairing_targets(rec.suite)   # looked up with keys that may be None
    if sc.pairing is not None and targets.get(sc.pairing) != targets.get(pairing):
        return None
    return sc


def vs_classic(record: AnyRecord) -> dict[str, tuple[str, list[float], list[float]]]:
    """Speculative arm -> (its classic arm, classic ms/token, arm ms/token), paired by prompt and
    repetition (the same round of the plan)."""
    return {arm: (c, xs, ys) for arm, (c, xs, ys, _) in _vs_classic(record).items()}


def _vs_classic(record: AnyRecord) -> dict[str, tuple[str, list[float], list[float], Pairs | None]]:
    """vs_classic(), with the dispatch measurement's pairs when every pair has them."""
    rec = record_core(record)
    suite = rec.suite
    runs = _by_key(rec.runs)
    targets = pairing_targets(suite)
    out: dict[str, tuple[str, list[float], list[float], Pairs | None]] = {}
    for a in suite.arms:
        if a.block == 1:
            continue
        c = classic_arm_for(a, suite.arms, targets)
        if c is None:
            continue
        xs, ys, ps, qs = [], [], [], []
        for (arm, prompt, rep), r in sorted(runs.items(), key=lambda kv: (kv[0][2], kv[0][1])):
            ref = runs.get((c.name, prompt, rep))
            if arm != a.name or ref is None:
                continue
            x, y = ref.ms_per_token, r.ms_per_token
            if x is not None and y is not None:
                xs.append(float(x))
                ys.append(float(y))
                ps.append(_probe(ref))
                qs.append(_probe(r))
        probes: Pairs | None = None
        if xs and None not in ps and None not in qs:
            probes = ([float(p) for p in ps if p is not None], [float(q) for q in qs if q is not None])
        out[a.name] = (c.name, xs, ys, probes)
    return out


def judge_vs_classic(record: AnyRecord, design: Design) -> dict[str, paired.Paired]:
    """Each speculative arm's ms/token against its classic arm, judged paired (adjusted for the
    dispatch measurement when the runs have it); no clean verdict where the pairs' runs are contended
    past the suite's share (contended.unclean), runs set aside for their host counted there too."""
    rec = record_core(record)
    share = contended.share_limit(rec.suite.settings)
    runs = _by_key(rec.runs, usable=False)
    out = {}
    for arm, (c, xs, ys, probes) in _vs_classic(rec).items():
        both = [x for (a, p, i), r in runs.items() if a == arm and (ref := runs.get((c, p, i)))
                for x in (ref, r)]
        out[arm] = contended.unclean(paired.analyze(xs, ys, design, probes),
                                     sum(map(contended.is_contended, both)), len(both), share)
    return out
