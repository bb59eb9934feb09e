"""An engine's work counters (diagnostics.counters, harness.core.counters): per round of a round
split, and two sides of a check compared exactly.

Per round divides the counts summed over runs by the rounds summed the same way (classic decode:
by the tokens, its unit). The same code and inputs count the same at temperature 0, so a check
compares each counter per round of BASE and HEAD with no statistics: equal is unchanged, more
work is worse, less is improved. Runs of one side and prompt that count differently make the
counter nondeterministic there: shown, not gated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.analyze import spoiled
from harness.core import counters as core
from harness.core.declare import EngineDecl
from harness.core.runs import as_runs
from harness.core.schema import Run, RunDiagnostics

EXACT_NOTE = "exact at temperature 0: any change is a change"
NONDETERMINISTIC = "nondeterministic: runs of one side differ (not exact here; not gated)"
SUFFIX = " (exact)"


@dataclass(frozen=True)
class Count:
    name: str
    label: str          # as people read it: "host syncs"
    total: int          # summed over the runs
    per_unit: float     # per round (classic: per token)
    per_forward: float | None = None   # positions per forward, for the forward counters


@dataclass(frozen=True)
class SplitCounters:
    unit: str           # "round" | "token"
    units: int
    block: int
    counts: tuple[Count, ...]

    def get(self, name: str) -> Count | None:
        return next((c for c in self.counts if c.name == name), None)


def order(names: Sequence[str], decl: EngineDecl | None) -> list[str]:
    """Standard counters first, then the engine's declared ones, then any others as reported."""
    own = list(decl.counters) if decl is not None else []
    return ([n for n in core.STANDARD if n in names] + [n for n in own if n in names]
            + [n for n in names if n not in core.STANDARD and n not in own])


def units(d: RunDiagnostics) -> int:
    """A run's units: its rounds when it decoded speculatively, else its tokens."""
    return (d.rounds or 0) if d.mode == "speculative" else (d.generated_tokens or 0)


def split_counters(diags: Sequence[RunDiagnostics], block: int, decl: EngineDecl | None = None) -> SplitCounters | None:
    """The counters every run reported, per unit; None when a run reported none (an engine
    without counters, a record from before them) or counted no unit."""
    cs = [d.counters for d in diags if d.counters]
    if not diags or len(cs) < len(diags):
        return None
    total_units = sum(units(d) for d in diags)
    if total_units <= 0:
        return None
    names = order(list(dict.fromkeys(k for c in cs for k in c if all(k in x for x in cs))), decl)
    totals = {n: sum(c[n] for c in cs) for n in names}
    per_forward = {fwd: totals[tok] / totals[fwd] for tok, fwd in core.PER_FORWARD.items()
                   if tok in totals and totals.get(fwd)}
    shown = [n for n in names if n not in core.PER_FORWARD]   # positions: said per forward
    unit = "round" if diags[0].mode == "speculative" else "token"
    return SplitCounters(unit, total_units, block, tuple(
        Count(n, core.words(n), totals[n], totals[n] / total_units, per_forward.get(n)) for n in shown))


# --- two sides of a check --------------------------------------------------------------

@dataclass(frozen=True)
class Change:
    """One counter of one arm, per unit, BASE against HEAD."""
    arm: str
    figure: str          # "host syncs/round (exact)"
    verdict: str         # unchanged | worse | improved | inconclusive (nondeterministic)
    base: float
    head: float
    runs: int            # HEAD's runs counted
    gated: bool
    note: str

    @property
    def ratio(self) -> float:
        return self.head / self.base if self.base else (1.0 if self.head == self.base else float("inf"))


def is_counter_figure(figure: str) -> bool:
    """A figure this module made: "<counter words>/round (exact)" or "/token (exact)"."""
    return figure.endswith(("/round" + SUFFIX, "/token" + SUFFIX)) and not figure.startswith("tokens/")


# One run's counters and units, for a side whose every run reported counters.
_Tally = tuple[dict[str, int], int]


def _side(runs: list[Run], arm: str) -> dict[str, list[RunDiagnostics]]:
    """An arm's runs a verdict may use (analyze.spoiled.usable) at temperature 0, by prompt."""
    out: dict[str, list[RunDiagnostics]] = {}
    for r in runs:
        if r.arm == arm and spoiled.usable(r) and r.result_arm.temp in (0, 0.0, None):
            out.setdefault(str(r.prompt), []).append(r.diagnostics)
    return out


def _per_unit(side: dict[str, list[_Tally]], prompts: list[str], name: str) -> tuple[float, bool]:
    """(counter per unit over the prompts, deterministic): each prompt's runs must agree."""
    total = total_units = 0
    same = True
    for p in prompts:
        seen = {(counts[name], u) for counts, u in side[p]}
        same = same and len(seen) == 1
        c, u = min(seen)
        total, total_units = total + c, total_units + u
    return (total / total_units if total_units else 0.0), same


def _tallies(side: dict[str, list[RunDiagnostics]], prompts: list[str]) -> dict[str, list[_Tally]] | None:
    """The prompts' runs as tallies; None when one of them reported no counters."""
    out = {p: [(d.counters, units(d)) for d in side[p] if d.counters is not None] for p in prompts}
    return out if all(len(out[p]) == len(side[p]) for p in prompts) else None


def compare(base_runs: Sequence[Run | Mapping[str, Any]], head_runs: Sequence[Run | Mapping[str, Any]],
            arms: Sequence[str]) -> list[Change]:
    """Every counter both sides reported in every run of an arm, per unit, judged exactly."""
    base, head = as_runs(base_runs), as_runs(head_runs)
    out = []
    for arm in arms:
        b_diags, h_diags = _side(base, arm), _side(head, arm)
        prompts = [p for p in b_diags if p in h_diags]
        b, h = _tallies(b_diags, prompts), _tallies(h_diags, prompts)
        if not prompts or b is None or h is None:
            continue
        modes = {d.mode for p in prompts for d in b_diags[p] + h_diags[p]}
        if len(modes) != 1:        # the gate decided differently: per round and per token differ
            continue
        unit = "round" if modes.pop() == "speculative" else "token"
        every = [counts for side in (b, h) for p in prompts for counts, _ in side[p]]
        names = [n for n in every[0] if all(n in c for c in every)]
        for name in order(names, None):
            bv, b_same = _per_unit(b, prompts, name)
            hv, h_same = _per_unit(h, prompts, name)
            figure = f"{core.words(name)}/{unit}{SUFFIX}"
            runs = sum(len(h[p]) for p in prompts)
            if not (b_same and h_same):
                out.append(Change(arm, figure, "inconclusive", bv, hv, runs, False, NONDETERMINISTIC))
                continue
            verdict = "unchanged" if round(hv, 12) == round(bv, 12) else ("worse" if hv > bv else "improved")
            out.append(Change(arm, figure, verdict, bv, hv, runs, True, EXACT_NOTE))
    return out
