"""The PR comment's asv part: asv's own table over the same samples, its numbers rounded as
people read them ("9.80 ms ±20%" where asv prints "9.801419458334237±2"), and on each row
where asv's word differs from the paired verdict, why the two disagree.

asv's `compare` judges a benchmark from the medians of each side's runs, unpaired: a change
when the ratio passes its factor (pr-check gives it 1 + the threshold) and its Mann-Whitney U
test over the two sides' samples is significant. The harness judges the per-pair ratios of
runs made back to back, at a level spent over looks and figures. Both are shown; the paired
verdict decides.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

# asv's change marks, as a word each.
ASV_MARKS = {"+": "worse", "-": "improved", "!": "newly failing", "*": "fixed", "x": "not comparable"}
# Our figure -> the asv benchmark method that stores it (harness/asvbench.py).
ASV_BENCH = {"ms/token": "track_ms_per_token", "ms/round": "track_ms_per_round",
             "rejection rate (exact)": "track_rejection_rate"}
PHASE = "phase ms/round: "
# Units of the benchmark methods asv prints without one (its track_ benchmarks have none).
UNITS = {"track_ms_per_token": "ms", "track_ms_per_round": "ms", "track_phase_ms_per_round": "ms",
         "track_memory_mib": "MiB", "track_rejection_rate": "%"}
_VALUE = re.compile(r"^(?P<v>[-+0-9.eE]+|nan|inf)(?:±(?P<e>[-+0-9.eE]+))?$")


class AsvRow(Protocol):
    """One row of `asv compare` (harness.ci.asvtool.CompareRow). Read-only properties: a
    frozen dataclass's fields satisfy them, where plain attributes would ask for settable ones."""

    @property
    def mark(self) -> str: ...    # '+' worse, '-' improved, '' same, 'x' not comparable, '!' newly failed, '*' fixed
    @property
    def before(self) -> str: ...  # the cell as asv printed it: "9.801419458334237±2", "n/a", "failed"
    @property
    def after(self) -> str: ...
    @property
    def ratio(self) -> str: ...   # as printed; a leading '~': past the factor but not significant
    @property
    def name(self) -> str: ...    # the benchmark with its parameters

    @property
    def insignificant_change(self) -> bool: ...


def method(name: str) -> str:
    """"track_ms_per_token" of "bench.Decode.track_ms_per_token('classic')"."""
    return name.split("(", 1)[0].rsplit(".", 1)[-1]


def args(name: str) -> list[str]:
    """The benchmark's parameters, unquoted: ["block3-inexact [not shipping: ...]", "draft"]."""
    inner = name.split("(", 1)[1].rstrip(")") if "(" in name else ""
    return re.findall(r"'([^']*)'", inner)


def arm_of(param: str) -> str:
    """The arm of asv's first parameter: asv names a non-shipping arm "block3 [not shipping: ...]"."""
    return param.split(" [", 1)[0]


def row_for(rows: Sequence[AsvRow], arm: str, figure: str) -> AsvRow | None:
    """asv's row for one of our figures, or None where asv stores no such benchmark."""
    bench = "track_phase_ms_per_round" if figure.startswith(PHASE) else ASV_BENCH.get(figure)
    for r in rows if bench else ():
        a = args(r.name)
        if method(r.name) != bench or not a or arm_of(a[0]) != arm:
            continue
        if bench == "track_phase_ms_per_round" and a[1:2] != [figure[len(PHASE):]]:
            continue
        return r
    return None


def figure_of(r: AsvRow) -> tuple[str, str] | None:
    """(arm, figure) of ours that an asv row stores; None for benchmarks the check does not judge."""
    m, a = method(r.name), args(r.name)
    if not a:
        return None
    if m == "track_phase_ms_per_round" and len(a) > 1:
        return arm_of(a[0]), PHASE + a[1]
    if m == "track_counter_per_round" and len(a) > 1:
        # A speculative arm's counter as the check names it (a classic arm's reads per token there).
        return arm_of(a[0]), a[1].replace("_", " ") + "/round (exact)"
    fig = next((f for f, b in ASV_BENCH.items() if b == m), None)
    return None if fig is None else (arm_of(a[0]), fig)


def asv_word(r: AsvRow | None) -> str:
    """asv's reading of a row: "worse", "improved", "changed, not significant", "no change"."""
    if r is None:
        return ""
    return ASV_MARKS.get(r.mark) or ("changed, not significant" if r.insignificant_change else "no change")


def rounded(cell: str, unit: str = "") -> str:
    """asv's cell as people read it: "9.801419458334237±2" -> "9.80 ms ±20%" (asv's error
    estimate as a share of the value); "n/a", "failed" as they are."""
    m = _VALUE.match(cell.strip())
    if not m:
        return cell
    v = float(m.group("v"))
    out = f"{v:.1%}" if unit == "%" else sig(v) + (f" {unit}" if unit else "")
    if m.group("e") is not None and v:
        out += f" ±{abs(float(m.group('e')) / v):.0%}"
    return out


def sig(x: float) -> str:
    """Three significant digits, never in exponent form: 5.57, 17.5, 232, 0.0203."""
    a = abs(x)
    if a != a or a == float("inf"):
        return str(x)
    if a >= 100:
        return f"{x:.0f}"
    if a >= 10:
        return f"{x:.1f}"
    if a >= 1 or a == 0:
        return f"{x:.2f}"
    return f"{x:.3g}"


def reason(r: AsvRow, verdict: str | None, factor: float) -> str:
    """Why asv's word differs from the paired verdict ("" where they agree or nothing is judged).
    `verdict` is the paired one (worse|improved|unchanged|inconclusive); `factor` asv's."""
    word = ASV_MARKS.get(r.mark)
    if verdict is None or r.mark in ("x", "!", "*") or (word or "no change") == _AS_ASV.get(verdict):
        return ""
    f = f"{factor - 1.0:.0%}"
    if verdict == "inconclusive":
        return ("the paired interval could not settle it; asv reads the medians of unpaired runs, "
                "with no level spent over looks or figures" if word else "")
    if word in ("worse", "improved"):
        return (f"asv's U test over unpaired runs sees the medians move past {f}; the pairs, "
                f"made back to back, read the change as {verdict}")
    if r.insignificant_change:
        return (f"asv's medians moved past {f} but its unpaired U test found it not significant; "
                "pairing runs back to back takes out the drift that hides it")
    return (f"asv calls a change only past {f} on medians of unpaired runs; the paired ratio "
            f"resolved a smaller one")


# The paired verdict as the word asv would use for the same reading.
_AS_ASV = {"worse": "worse", "improved": "improved", "unchanged": "no change"}


def count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def section(rows: Sequence[AsvRow], raw: str, verdicts: dict[tuple[str, str], str],
            factor: float) -> list[str]:
    """asv's table, behind <details>: its counts in the summary line, then each row it could
    compare, rounded, with the reason wherever it disagrees with the paired verdict."""
    if not rows:
        if not raw.strip():
            return []
        return ["<details><summary>asv compare printed no table</summary>", "", "```",
                raw.strip()[-2000:], "```", "", "</details>"]
    shown = [r for r in rows if not (r.before == r.after == "n/a")]
    why = {id(r): reason(r, verdicts.get(figure_of(r) or ("", "")), factor) for r in shown}
    worse = sum(r.mark == "+" for r in rows)
    untouched = sum(r.mark not in ASV_MARKS for r in rows)
    said = [count(worse, "regression"), f"{untouched} untouched"]
    said += [f"{sum(r.mark == m for r in rows)} {w}" for m, w in ASV_MARKS.items()
             if m != "+" and any(r.mark == m for r in rows)]
    differ = sum(bool(w) for w in why.values())
    summary = f"asv over the same samples (Mann-Whitney U): {', '.join(said)}"
    summary += f"; {differ} differ{'s' if differ == 1 else ''} from the paired verdict" if differ else ""
    out = [f"<details><summary>{summary}</summary>", "",
           f"asv compares each side's median, unpaired, and calls a change past a factor of "
           f"{factor:.2f} when its U test agrees; ± is its error estimate as a share of the value. "
           f"{count(len(rows) - len(shown), 'benchmark')} with no value on either side left out.", "",
           "| asv | benchmark | base | head | ratio | why it differs |", "|---|---|---|---|---|---|"]
    for r in shown:
        unit = UNITS.get(method(r.name), "")
        out.append(f"| {asv_word(r)} | `{short_name(r.name)}` | {rounded(r.before, unit)} | "
                   f"{rounded(r.after, unit)} | {r.ratio} | {why[id(r)] or '-'} |")
    return out + ["", "</details>"]


def short_name(name: str) -> str:
    """The benchmark without its module and the not-shipping note asv carries in the arm's
    name: "Decode.track_ms_per_token('block3-inexact')"."""
    short = name.split(".", 1)[1] if name.split("(", 1)[0].count(".") >= 2 else name
    return re.sub(r" \[not shipping: [^\]]*\]", "", short)
