"""Contention said first, and never a clean verdict on contended data.

A run is contended when the contention watch saw a foreign process over [watch] threshold_pct
in more than `contention_threshold` of its samples (the runner's "contended" mark). On a busy
host most runs of a check can be contended, and their figures read whatever the other
processes did: in one pr-check 39 of 48 runs were contended and a +13% change read +31.7%,
phases it did not touch worse too. So:

- when a side's contended runs are more than the share its suite allows ([watch]
  contended_share, CONTENDED_SHARE by default), the summary, compare-commits and the PR comment
  say so before anything else (`contention_lines`);
- a paired verdict whose runs are contended past that share is not given as worse, improved or
  unchanged: it is "inconclusive" (exit 3), with the reading kept and said ("worse (+31.7%),
  but 39 of 48 runs were contended: not a clean verdict; rerun on a quiet host").

Pure functions of records and readings; nothing here runs or measures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import msgspec

from harness.analyze import paired, spoiled
from harness.core.runs import AnyRecord, as_runs, record_core
from harness.core.schema import Run
from harness.core.suitespec import Settings

# Past a quarter of its runs contended, a verdict no longer rests on the quiet ones: the Huber
# location (estimators.huber_location) sets aside a few disturbed pairs, but with a quarter or
# more of them disturbed the location moves with them (its breakdown in practice).
CONTENDED_SHARE = 0.25
CLEAN = ("worse", "improved", "unchanged")
RERUN = "not a clean verdict; rerun on a quiet host"


def is_contended(run: Run) -> bool:
    """Marked contended by the watch, or set aside for its host (analyze.spoiled: a backup,
    battery power, thermal pressure, another process's GPU work): counted alike in the share."""
    return "contended" in run.marks or bool(spoiled.reasons(run))


def as_settings(settings: Mapping[str, Any] | Settings) -> Settings:
    """A suite's settings, typed (a record's or a suite file's settings dict converted)."""
    return settings if isinstance(settings, Settings) else msgspec.convert(settings, Settings)


def share_limit(settings: Mapping[str, Any] | Settings) -> float:
    """The suite's [watch] contended_share (CONTENDED_SHARE unless the suite says otherwise)."""
    return as_settings(settings).watch.contended_share


def count(runs: Iterable[Run]) -> tuple[int, int]:
    """(contended, all) of the measured runs."""
    ms = [r for r in runs if not r.warmup]
    return sum(map(is_contended, ms)), len(ms)


@dataclass
class SideCount:
    contended: int     # measured runs contended or set aside for the host
    runs: int          # measured runs


@dataclass
class SetAside:
    runs: int                     # measured runs set aside for their host (analyze.spoiled)
    reasons: dict[str, int]       # reason code -> runs, in spoiled.REASONS' order


@dataclass
class SidesContention:
    """Each side's contended and measured runs, the share a side may have, the watch's threshold,
    the sides over the share (in the order given), and the sides with runs set aside."""
    limit: float
    threshold_pct: float | None
    sides: dict[str, SideCount]
    over: list[str]
    set_aside: dict[str, SetAside] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """As the JSON summaries give it ("set_aside" only where a host reason occurs)."""
        d = asdict(self)
        if not self.set_aside:
            del d["set_aside"]
        return d


def sides_info(sides: Mapping[str, Iterable[Run | Mapping[str, Any]]],
               settings: Mapping[str, Any] | Settings) -> SidesContention:
    """The contention of each side's measured runs (a side: a commit, or an arm of a session);
    a record's run dicts are converted here, once a call."""
    watch = as_settings(settings).watch
    limit, pct = watch.contended_share, watch.threshold_pct
    listed = {name: as_runs(runs) for name, runs in sides.items()}
    counted = {name: SideCount(*count(runs)) for name, runs in listed.items()}
    host = {n: SetAside(spoiled.set_aside_runs(rs), spoiled.counts(rs)) for n, rs in listed.items()}
    return SidesContention(limit=limit, threshold_pct=pct, sides=counted,
                           over=[n for n, c in counted.items() if c.runs and c.contended / c.runs > limit],
                           set_aside={n: h for n, h in host.items() if h.runs})


def contention_lines(info: SidesContention | None) -> list[str]:
    """The lines said first when a side is over its share, e.g.
    "contended: 39 of 48 runs of head (81%), 30 of 48 of base (62%);" and
    "  over the 25% a side may have: [watch] threshold_pct = 15 marks a run;" and
    "  figures here are not clean verdicts; rerun on a quiet host". [] otherwise."""
    if not info or not info.over:
        return []
    sides = info.sides
    order = list(info.over) + [n for n in sides if n not in info.over and sides[n].runs]
    said = ", ".join(f"{sides[n].contended} of {sides[n].runs} runs of {n} "
                     f"({sides[n].contended / sides[n].runs:.0%})" for n in order)
    pct = info.threshold_pct
    pct_s = f"{pct:g}" if isinstance(pct, (int, float)) else "?"
    what = "contended or set aside" if info.set_aside else "contended"
    return [f"{what}: {said};",
            f"  over the {info.limit:.0%} a side may have ([watch] contended_share);",
            f"  [watch] threshold_pct = {pct_s} marks a run contended: rerun on a quiet host"]


def unclean(p: paired.Paired, contended: int, runs: int, limit: float) -> paired.Paired:
    """p, or (a clean verdict whose runs are contended past the limit) p as inconclusive, its
    reading kept in `contended` and said first in its note."""
    if p.verdict not in CLEAN or not runs or contended / runs <= limit:
        return p
    info = ContendedReading(reading=p.verdict, contended=contended, runs=runs, limit=limit)
    q = replace(p, verdict="inconclusive", contended=msgspec.to_builtins(info))
    return replace(q, note="; ".join(x for x in (reading_text(q), p.note) if x))


class ContendedReading(msgspec.Struct, kw_only=True):
    """A Paired's `contended` (unclean() writes it): the clean verdict it was, its runs contended
    of all, and the share the suite allows."""
    reading: str
    contended: int
    runs: int
    limit: float


def reading_text(p: paired.Paired) -> str:
    """'worse (+31.7%), but 39 of 48 runs were contended: not a clean verdict; rerun on a quiet
    host' for a verdict set aside for contention; '' otherwise."""
    if not p.contended:
        return ""
    c = msgspec.convert(p.contended, ContendedReading)
    change = "" if p.ratio is None else f" ({p.ratio - 1.0:+.1%})"
    return f"{c.reading}{change}, but {c.contended} of {c.runs} runs were contended: {RERUN}"


def record_info(record: AnyRecord) -> SidesContention:
    """sides_info() of one session, each arm a side (its runs are what its figures rest on)."""
    rec = record_core(record)
    arms: dict[str, list[Run]] = {}
    for r in rec.runs:
        if r.arm is not None:
            arms.setdefault(r.arm, []).append(r)
    return sides_info(arms, rec.suite.settings)


def pair_counts(base: Iterable[Run], head: Iterable[Run], arm: str) -> tuple[int, int]:
    """(contended, all) runs of one arm's pairs: measured ok runs of both sides that share
    prompt and repetition (comparisons.pair_sessions' pairs)."""
    def keyed(runs: Iterable[Run]) -> dict[tuple[str | None, int], Run]:
        return {(r.prompt, r.repetition or 0): r for r in runs if r.arm == arm and r.measured_ok}
    b, h = keyed(base), keyed(head)
    both = [x for k in set(b) & set(h) for x in (b[k], h[k])]
    return sum(map(is_contended, both)), len(both)
