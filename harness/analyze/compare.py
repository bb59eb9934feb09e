"""Two records side by side: before/after on one host, or the same components across hosts.

Each component is compared per arm and prompt from per-run values (ms per round, or per token
for classic decode), median with min-max. A before/after change is judged by the harness's one
paired check (harness.analyze.paired, docs/statistics.md) on the two records' runs matched in
run order: "faster"/"slower" when its interval excludes no change and the change reaches the
check's floor; "noise" only when the check could have seen a change of the threshold (smallest
detectable change at most the threshold) and its interval, inside +-threshold, holds no change;
"inconclusive" otherwise, with the smallest detectable change. The two records did not run side
by side, so a pair carries both runs' spread and no shared drift: the check stays honest, only
less tight than within one session. A component whose median moves by less than an absolute
floor (`floor_ms`) is never called faster or slower, whatever its percentage. Runs set aside for
their host (analyze.spoiled) are left out of both sides' values and still count as contended.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analyze import contended as cont
from harness.analyze import paired, spoiled
from harness.analyze.design import Design
from harness.analyze.rounds import Groups, RoundSplit, all_splits, by_arm_prompt, median_range
from harness.core.errors import UserError
from harness.core.hostinfo import HostInfo, as_host
from harness.core.recordsections import ModelFiles
from harness.core.runs import RecordData, as_record
from harness.core.schema import Record, Run
from harness.core.suitespec import Pairing, Settings


def pairing_key(p: Pairing) -> tuple[str, str, str]:
    # Directory names, not absolute paths: the same model lives at other paths on other hosts.
    return (p.name, Path(p.target).name, Path(p.drafter).name if p.drafter else "")


def _describe_pairings(rec: Record) -> str:
    return ", ".join(f"{n} ({t} + {d or 'no drafter'})" for n, t, d in map(pairing_key, rec.suite.pairings))


def _weights(rec: Record, pairing: str, role: str) -> str | None:
    """The sha256 of a pairing's target or drafter weights, where the record hashed them."""
    files: ModelFiles | None = rec.models.get(pairing, {}).get(role)
    return files.sha256 if files is not None else None


def check_comparable(a_rec: RecordData, b_rec: RecordData, path_a: str, path_b: str) -> None:
    """UserError unless the records share a pairing and at least one arm on it."""
    a, b = as_record(a_rec), as_record(b_rec)
    ka = {pairing_key(p) for p in a.suite.pairings}
    kb = {pairing_key(p) for p in b.suite.pairings}
    if not ka & kb:
        raise UserError(f"cannot compare {path_a} with {path_b}: they measure different pairings "
                        f"({_describe_pairings(a)} vs {_describe_pairings(b)})")
    common = {k[0] for k in ka & kb}
    # Same names can hide other weights: where both records hashed them (schema 4), they must agree.
    for name in sorted(common):
        for role in ("target", "drafter"):
            ha, hb = _weights(a, name, role), _weights(b, name, role)
            if ha and hb and ha != hb:
                raise UserError(f"cannot compare {path_a} with {path_b}: pairing {name!r} has other {role} "
                                f"weights (sha256 {ha[:12]} vs {hb[:12]}); compare records of the same models")
    arms_a = {x.name for x in a.suite.arms if x.pairing in common}
    arms_b = {x.name for x in b.suite.arms if x.pairing in common}
    if not arms_a & arms_b:
        raise UserError(f"cannot compare {path_a} with {path_b}: no arm name in common on the shared pairing")


def host_key(host: HostInfo | Mapping[str, Any]) -> tuple[str, ...]:
    """What names a host (a record's `host` section): hostname, CPU, GPU and MLX device."""
    h = as_host(host)
    return (h.os.hostname, h.cpu.model, h.gpu.name, h.mlx.default_device)


def same_host(a: RecordData, b: RecordData) -> bool:
    return host_key(as_record(a).host) == host_key(as_record(b).host)


# The absolute floor of a component change, per unit (round, or token for classic decode): a
# component whose median moves by less than the larger of these is "below the floor", never
# faster or slower. 0.01 ms: the small phases (accept hook, rollback, residual) are a few
# microseconds of Python bookkeeping per round or token, and their run-to-run jitter alone moves
# them by tens of percent (a 3 us residual going "+23.5%" is under a microsecond). 1% of the round
# (or decode step) total: a component change below that moves tok/s by under 1%, beneath the 4%
# spread threshold and the paired check's 5% floor, so it cannot be a finding about the round.
ABS_FLOOR_MS = 0.01
REL_FLOOR = 0.01

# Verdicts of one component change (the render layer words them).
FASTER, SLOWER, NOISE, UNCHANGED, INCONCLUSIVE, BELOW_FLOOR = (
    "faster", "slower", "noise", "unchanged", "inconclusive", "below the floor")


def floor_ms(total_before: float, total_after: float) -> float:
    """The absolute floor for the components of one split: ABS_FLOOR_MS, or REL_FLOOR of the
    larger of the two sides' round (or decode step) totals, whichever is larger."""
    return max(ABS_FLOOR_MS, REL_FLOOR * max(total_before, total_after))


def design_for(settings: Settings) -> Design:
    """The check a component change gets: the suite's threshold and alpha, one look, one figure
    (as the summary judges an arm against classic decode)."""
    return Design(threshold=settings.threshold, alpha=settings.alpha, looks=1, figures=1)


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
    # Per-run values (ms per unit), in run order; the check matches them index by index.
    before_runs: tuple[float, ...] = ()
    after_runs: tuple[float, ...] = ()
    floor_ms: float = ABS_FLOOR_MS
    design: Design = Design(looks=1, figures=1)
    # The runs behind the pairs (both records) that were contended, of how many, and the share
    # past which a clean verdict is set aside as inconclusive (analyze.contended): a comparison of
    # two records obeys the rule a session's own verdicts do.
    contended: int = 0
    runs: int = 0
    share: float = 1.0

    @property
    def change(self) -> float:
        """The change of the medians (after / before - 1)."""
        return self.after.median / self.before.median - 1.0 if self.before.median else 0.0

    @functools.cached_property
    def judged(self) -> paired.Paired:
        """The paired check on the runs matched in run order (the shorter side's count)."""
        n = min(len(self.before_runs), len(self.after_runs))
        return cont.unclean(paired.analyze(self.before_runs[:n], self.after_runs[:n], self.design),
                            self.contended, self.runs, self.share)

    @property
    def below_floor(self) -> bool:
        return abs(self.after.median - self.before.median) < self.floor_ms

    @property
    def verdict(self) -> str:
        # Every component here is a time: lower is better.
        if self.below_floor:
            return BELOW_FLOOR
        j = self.judged
        if j.verdict == "worse":
            return SLOWER
        if j.verdict == "improved":
            return FASTER
        if j.verdict == "unchanged":
            # Resolved; "noise" only where the interval holds no change (else a significant
            # change below the check's floor).
            return NOISE if j.lo is not None and j.hi is not None and j.lo <= 1.0 <= j.hi else UNCHANGED
        return INCONCLUSIVE

    @property
    def real(self) -> bool:
        """Called faster or slower."""
        return self.verdict in (FASTER, SLOWER)


def _cells(s: RoundSplit) -> list[tuple[str, Cell, list[float]]]:
    out = [("round total" if s.unit == "round" else "decode step", Cell(*median_range(s.per_run_unit_ms)),
            list(s.per_run_unit_ms))]
    for c in s.components:
        out.append((c.label, Cell(*median_range(c.per_run)), list(c.per_run)))
    return out


def _contention(runs: list[Run]) -> tuple[int, int]:
    """How many of `runs` were contended, of how many."""
    return sum(map(cont.is_contended, runs)), len(runs)


def _split_runs(recs: tuple[Record, ...], arm: str, prompt: str) -> list[Run]:
    return [r for rec in recs for r in rec.runs if r.measured_ok and r.arm == arm and r.prompt == prompt]


def _usable_groups(data: RecordData, record: Record) -> Groups:
    """The runs a verdict may use (analyze.spoiled.usable), by (arm, prompt)."""
    return by_arm_prompt(data, spoiled.usable_runs(record.runs))


def component_changes(a_data: RecordData, b_data: RecordData) -> list[ComponentChange]:
    """Every component of every (arm, prompt) split present in both records (as loaded: the
    round splits read them so), in a's order."""
    a, b = as_record(a_data), as_record(b_data)
    sb = {(s.arm, s.prompt): s for s in all_splits(b_data, _usable_groups(b_data, b))}
    design = design_for(a.suite.settings)
    share = cont.share_limit(a.suite.settings)
    out = []
    for s in all_splits(a_data, _usable_groups(a_data, a)):
        t = sb.get((s.arm, s.prompt))
        if t is None or t.unit != s.unit:
            continue
        cells, tcells = _cells(s), _cells(t)
        after = {name: (cell, runs) for name, cell, runs in tcells}
        floor = floor_ms(cells[0][1].median, tcells[0][1].median)   # the round (or step) totals
        busy, n = _contention(_split_runs((a, b), s.arm, s.prompt))
        for name, cell, runs in cells:
            if name in after and cell.median > 0:
                out.append(ComponentChange(s.arm, s.prompt, name, s.unit, cell, after[name][0],
                                           tuple(runs), tuple(after[name][1]), floor, design, busy, n, share))
    return out


# The figure every run reports, whatever its engine: decode ms per generated token.
MS_PER_TOKEN = "ms/token"


@dataclass
class Throughput:
    """One arm in both records (on one prompt, or on every prompt when `prompt` is ""): tok/s as
    measured (median, min-max of its runs), and ms/token judged paired on the runs matched by
    prompt and repetition. A side the arm did not run on has no cell and no change."""

    arm: str
    prompt: str
    tok_s_before: Cell | None
    tok_s_after: Cell | None
    ms: ComponentChange | None


Keyed = dict[tuple[str, str, int], Run]


def _ms(r: Run) -> float:
    """A measured run's ms/token (`_measured` keeps only runs that have one)."""
    return float(r.ms_per_token or 0.0)


def _measured(rec: Record, usable: bool = True) -> Keyed:
    """(arm, prompt, repetition) -> the run with a ms/token a verdict may use (analyze.spoiled);
    usable False: every measured ok one (the contended share counts those)."""
    return {(str(r.arm), str(r.prompt), int(r.repetition or 0)): r
            for r in rec.runs if (spoiled.usable(r) if usable else r.measured_ok)
            and r.ms_per_token is not None and r.ms_per_token > 0}


def _tok_s(runs: list[Run]) -> Cell | None:
    xs = [float(r.decode_tokens_per_s or 1000.0 / _ms(r)) for r in runs]
    return Cell(*median_range(xs)) if xs else None


def _throughput(arm: str, prompt: str, ra: Keyed, rb: Keyed, design: Design, share: float,
                busy: tuple[int, int]) -> Throughput:
    """ra, rb: each side's runs of this arm (and prompt) a verdict may use, keyed (arm, prompt,
    repetition); busy: (contended, all) runs of the pairs before any was set aside."""
    # Plan order: repetition first, then prompt, as the runs were made.
    keys = sorted(set(ra) & set(rb), key=lambda k: (k[2], k[1]))
    xs = [_ms(ra[k]) for k in keys]
    ys = [_ms(rb[k]) for k in keys]
    ms = None
    if keys:
        a, b = Cell(*median_range(xs)), Cell(*median_range(ys))
        ms = ComponentChange(arm, prompt, MS_PER_TOKEN, "token", a, b, tuple(xs), tuple(ys),
                             floor_ms(a.median, b.median), design, *busy, share)
    return Throughput(arm, prompt, _tok_s(list(ra.values())), _tok_s(list(rb.values())), ms)


def _of(m: Keyed, arm: str, prompt: str | None = None) -> Keyed:
    return {k: r for k, r in m.items() if k[0] == arm and (prompt is None or k[1] == prompt)}


def _pairs_contention(xa: Keyed, xb: Keyed) -> tuple[int, int]:
    return _contention([side[k] for k in set(xa) & set(xb) for side in (xa, xb)])


def throughput_changes(a_rec: RecordData, b_rec: RecordData) -> tuple[list[Throughput], list[Throughput]]:
    """Every arm of either record (a's order, then b's own), over every prompt; and every
    (arm, prompt) both ran. What each record has, whether or not its engine reports phases."""
    a, b = as_record(a_rec), as_record(b_rec)
    design = design_for(a.suite.settings)
    share = cont.share_limit(a.suite.settings)
    ma, mb = _measured(a), _measured(b)
    every_a, every_b = _measured(a, usable=False), _measured(b, usable=False)
    arms = list(dict.fromkeys([x.name for x in a.suite.arms] + [x.name for x in b.suite.arms]))
    prompts = list(dict.fromkeys([p.name for p in a.suite.prompts] + [p.name for p in b.suite.prompts]))
    per_arm, per_prompt = [], []
    for arm in arms:
        ea, eb = _of(every_a, arm), _of(every_b, arm)
        if not ea and not eb:
            continue
        per_arm.append(_throughput(arm, "", _of(ma, arm), _of(mb, arm), design, share,
                                   _pairs_contention(ea, eb)))
        for p in prompts:
            pa, pb = _of(every_a, arm, p), _of(every_b, arm, p)
            if pa and pb:
                per_prompt.append(_throughput(arm, p, _of(ma, arm, p), _of(mb, arm, p), design, share,
                                              _pairs_contention(pa, pb)))
    return per_arm, per_prompt
