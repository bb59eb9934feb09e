"""The words for an arm's verdict (harness.analyze.verdict), the same in every output: the
report's finding and arms table, the terminal summary, the dashboard's badge.

A verdict reads as the hand-written studies give speeds: a speed against classic (1.19x: classic's
ms/token over the arm's, paired by prompt and repetition) with its interval. What the data could
not see is said as the smallest change it could have seen, never as "no change".
"""

from __future__ import annotations

from typing import Any

import msgspec

from harness.analyze import compare as cmp
from harness.analyze import paired as pd
from harness.analyze import verdict as V
from harness.analyze.compare import ComponentChange
from harness.analyze.design import share_text
from harness.analyze.paired import Paired
from harness.analyze.verdict import ArmVerdict

# Past this, an interval says more about how few pairs there were than about the arm.
UNSEEABLE = 1.0

# One word per outcome: the terminal's column and the dashboard's badge.
CODES = {V.SLOWER: "slower", V.FASTER: "faster", V.SAME: "same", V.INCONCLUSIVE: "inconclusive",
         V.DECLINED: "declined", V.REFERENCE: "reference", V.PROFILED: "profiled",
         V.NO_REFERENCE: "-", V.NO_RUNS: "no runs"}


class _Contended(msgspec.Struct, kw_only=True):
    """A clean reading set aside for its contended runs (Paired.contended,
    harness.analyze.contended.unclean): the verdict it was, and how many of how many runs."""
    reading: str
    contended: int
    runs: int
    limit: float | None = None


def _contended(block: dict[str, Any]) -> _Contended:
    return msgspec.convert(block, _Contended)


def pct(x: float) -> str:
    """A share as people read it: 0.1234 -> "12%", 0.0123 -> "1.2%", 0.00012 -> "0.0%"."""
    a = abs(x) * 100
    return f"{a:.0f}%" if a >= 9.95 else f"{a:.1f}%"


def times(x: float) -> str:
    """A speed ratio as the hand-written studies give it: 1.19x, 0.85x, 4.3x."""
    return f"{x:.1f}x" if x >= 9.95 else f"{x:.2f}x"


def speed(v: ArmVerdict) -> str | None:
    """The paired reading as a speed against classic (classic's ms/token over the arm's): "0.81x"."""
    r = v.reading   # v.judged, spelled out so that mypy sees the ratio is there
    return None if r is None or r.ratio is None else times(1.0 / r.ratio)


def interval(v: ArmVerdict) -> str | None:
    """"0.76x to 0.87x": the paired interval as a speed against classic; None without one."""
    r = v.reading
    if r is None or r.lo is None or r.hi is None or r.lo <= 0:
        return None
    return f"{times(1.0 / r.hi)} to {times(1.0 / r.lo)}"


def code(v: ArmVerdict) -> str:
    return CODES[v.outcome]


def too_few(v: ArmVerdict) -> bool:
    """The reading exists but its pairs are too few to see anything (its smallest detectable
    change is past doubling, or there is none)."""
    d = v.detectable
    return v.judged and (d is None or d > UNSEEABLE) and v.outcome == V.INCONCLUSIVE


def cannot_see(v: ArmVerdict) -> str:
    """Why an inconclusive verdict is one: "could not see under 24%"."""
    if too_few(v):
        return "too few runs to judge"
    if v.reading is not None and v.reading.contended:
        return f"{v.contended_runs} of {v.paired_runs} runs contended"
    d = v.detectable
    return "no pairs" if d is None else f"could not see under {pct(d)}"


def phrase(v: ArmVerdict) -> str:
    """The verdict as a phrase that follows the arm's name: "runs at 0.81x classic, slower
    (0.76x to 0.87x)". Speeds are classic's paired ms/token over the arm's."""
    o, ref = v.outcome, v.classic or "classic"
    ci = interval(v)
    at = f"runs at {speed(v)} {ref}" if v.judged else ""
    if o in (V.SLOWER, V.FASTER):
        return f"{at}, {o}" + (f" ({ci})" if ci else "")
    if o == V.SAME:
        return f"{at}, the same within ±{pct(v.threshold)}" + (f" ({ci})" if ci else "")
    if o == V.INCONCLUSIVE:
        return (f"{at}, inconclusive: " if v.judged and not too_few(v) else "is inconclusive: ") + cannot_see(v)
    if o == V.DECLINED:
        return "declined: its gate chose classic decode, so it has no speculative figure"
    if o == V.REFERENCE:
        return "is the classic reference"
    if o == V.PROFILED:
        return "ran in profile mode (slowed on purpose): not judged"
    if o == V.NO_REFERENCE:
        return "is not judged: no classic arm of its pairing ran"
    return "has no measured run that finished"


def cell(v: ArmVerdict) -> str:
    """The verdict for a table cell or a terminal column: "0.81x slower (0.76x to 0.87x)"."""
    o = v.outcome
    ci = interval(v)
    if o in (V.SLOWER, V.FASTER, V.SAME):
        word = "same" if o == V.SAME else o
        return f"{speed(v)} {word}" + (f" ({ci})" if ci else "")
    if o == V.INCONCLUSIVE:
        return (f"{speed(v)} inconclusive: " if v.judged and not too_few(v) else "inconclusive: ") + cannot_see(v)
    return code(v)


def label(v: ArmVerdict) -> str:
    """"shipping" or what makes the arm not a shipping configuration."""
    if v.shipping:
        return "shipping"
    if v.overrides:
        return "not shipping: " + ", ".join(f"{k}={x}" for k, x in v.overrides.items())
    return "not shipping: " + ("gate declined" if v.outcome == V.DECLINED else "not the engine's default")


def change(c: ComponentChange) -> str:
    """A figure of two records (after over before, a time: lower is better), judged paired:
    "+24.0% (+20.1% to +28.2%), slower", "+3.1% (-2.0% to +8.5%), inconclusive (smallest
    detectable 14.2%)", "+15.0%, below the floor (moved 0.0020 ms, floor 0.070 ms)"."""
    j = c.judged
    head = pd.ratio_text(j) if j.ratio is not None else f"{100 * c.change:+.1f}%"
    v = c.verdict
    if v == cmp.BELOW_FLOOR:
        moved = abs(c.after.median - c.before.median)
        return f"{100 * c.change:+.1f}%, below the floor (moved {moved:.4f} ms, floor {c.floor_ms:.3f} ms)"
    if v == cmp.INCONCLUSIVE and j.contended:
        ct = _contended(j.contended)
        return f"{head}, inconclusive ({ct.contended} of {ct.runs} runs contended)"
    if v == cmp.INCONCLUSIVE:
        det = pd.detectable_text(j)
        det = f"smallest detectable {det}" if det != "-" else f"smallest detectable unknown: {j.note}"
        return f"{head}, inconclusive ({det})"
    if v == cmp.UNCHANGED:
        return f"{head}, unchanged (under the {share_text(c.design.min_effect)} the check calls a change)"
    return f"{head}, {v}"


def change_short(c: ComponentChange) -> str:
    """A change in a list that already says its verdict: "+24.0% (+20.1% to +28.2%)"."""
    return pd.ratio_text(c.judged) if c.judged.ratio is not None else f"{100 * c.change:+.1f}%"


# --- a figure of HEAD against BASE (pr-check, compare-commits): the paired head/base ratio ---

def is_timing(figure: str) -> bool:
    """A figure in ms (ms/token, ms/round, a phase's ms/round): higher is slower."""
    return figure.startswith(("ms/", "phase ms/")) or figure.endswith(" ms")


def moved(figure: str, verdict: str) -> str:
    """A head/base verdict as a word: "slower"/"faster" for a time, "worse"/"better" for
    another figure; "unchanged" and "inconclusive" as they are."""
    worse, better = ("slower", "faster") if is_timing(figure) else ("worse", "better")
    return {"worse": worse, "improved": better}.get(verdict, verdict)


def ratio_interval(p: Paired) -> str:
    """"+8.1% to +16.4%": the paired interval of head/base; "" without one."""
    if p.lo is None or p.hi is None:
        return ""
    return f"{p.lo - 1.0:+.1%} to {p.hi - 1.0:+.1%}"


def unseen(p: Paired, threshold: float, figure: str = "ms/token") -> str:
    """Why a head/base figure is inconclusive: "could not see under 14%", "read slower (+29.5%),
    but 40 of 48 runs contended", "too few pairs", or the interval past a threshold it could see."""
    if p.contended:
        c = _contended(p.contended)
        read = "" if p.ratio is None else f"read {moved(figure, c.reading)} ({p.ratio - 1.0:+.1%}), but "
        return f"{read}{c.contended} of {c.runs} runs contended"
    d = p.detectable
    if p.n < 2 or d is None or not d <= UNSEEABLE:
        return f"too few pairs ({p.n}) to see any change"
    if d > threshold:
        return f"could not see under {pct(d)}"
    return f"interval {ratio_interval(p)} reaches past ±{pct(threshold)}"


def head_change(arm: str, figure: str, p: Paired, ack: str | None = None) -> str:
    """A figure that moved, as a headline states it: "12.3% slower on classic ms/token (+8.1%
    to +16.4%)", "acknowledged" where an acknowledgement covers it. One decimal: a 2.1% said
    as 2% would read as inside a 2% threshold."""
    ci = ratio_interval(p)
    size = "" if p.ratio is None else f"{abs(p.ratio - 1.0):.1%} "
    out = f"{size}{moved(figure, p.verdict)} on {arm} {figure}" + (f" ({ci})" if ci else "")
    return out + (", acknowledged" if ack else "")


EXACT_SUFFIX = " (exact)"   # the name of a figure judged with no statistics


def change_sentence(figures: list[tuple[str, str, Paired, str | None]], threshold: float) -> str:
    """The gated figures of HEAD against BASE, (arm, figure, reading, acknowledgement) each, in
    one clause per verdict: "HEAD is 12.3% slower on classic ms/token (+8.1% to +16.4%); 2
    figures unchanged; 1 inconclusive: block3 ms/token, could not see under 14%". What could
    not be seen is never counted as unchanged."""
    worse, improved, unchanged = ([f for f in figures if f[2].verdict == v] for v in ("worse", "improved", "unchanged"))
    unsure = [f for f in figures if f[2].verdict not in ("worse", "improved", "unchanged")]
    moves = [head_change(*f) for f in worse + improved]
    parts = ["HEAD is " + and_join(moves)] if moves else []
    # An exact figure (rejection rate, a work counter) held exactly: it is not "within" anything.
    exact = sum(1 for f in unchanged if f[1].endswith(EXACT_SUFFIX))
    n = len(unchanged) - exact
    if n:
        parts.append(f"{n} figure{'s' if n != 1 else ''} unchanged" + ("" if moves else f" within ±{pct(threshold)}"))
    if exact:
        parts.append(f"{exact} exact figure{'s' if exact != 1 else ''} identical")
    if unsure:
        # Arms that could not see the same figure for the same reason are named together.
        why: dict[tuple[str, str], list[str]] = {}
        for a, f, p, _ in unsure:
            why.setdefault((f, unseen(p, threshold, f)), []).append(a)
        parts.append(f"{len(unsure)} inconclusive: " + "; ".join(f"{and_join(arms)} {f}, {w}"
                                                               for (f, w), arms in why.items()))
    return "; ".join(parts)


def and_join(xs: list[str]) -> str:
    """"a", "a and b", "a, b and c"."""
    return ", ".join(xs[:-1]) + " and " + xs[-1] if len(xs) > 1 else "".join(xs)


def change_cell(figure: str, p: Paired, threshold: float, ack: str | None = None) -> str:
    """The verdict column of a head/base table: "slower", "slower, acknowledged", "faster",
    "unchanged", "inconclusive: could not see under 14%"."""
    if p.verdict == "inconclusive":
        return f"inconclusive: {unseen(p, threshold, figure)}"
    return moved(figure, p.verdict) + (", acknowledged" if ack and p.verdict == "worse" else "")
