"""The report's first screen: the finding (at most three sentences) and the table of arms with
their paired verdicts. Both read harness.analyze.verdict's Judgement and say it only in
harness.render.verdictwords' words, so the finding, the table, the terminal and the dashboard
cannot disagree; unpaired figures (median tok/s, spread) appear as description only."""

from __future__ import annotations

from harness.analyze import verdict as V
from harness.analyze.verdict import ArmVerdict, Judgement
from harness.render import hostwords
from harness.render import verdictwords as W
from harness.render.mdtable import Table

# Outcomes that are no verdict on speculation and stay out of the finding's list of others.
_NOT_LISTED = (V.REFERENCE,)


def _ratio(v: ArmVerdict) -> float:
    """The paired ratio of a judged arm (Judgement.judged holds only arms that have one)."""
    assert v.reading is not None and v.reading.ratio is not None
    return v.reading.ratio


def _lead(j: Judgement) -> tuple[ArmVerdict | None, str]:
    """The arm the finding leads with and its sentence: the fastest resolved-faster arm, else the
    best judged arm, else none."""
    faster = [v for v in j.judged if v.outcome == V.FASTER]
    if faster:
        best = min(faster, key=_ratio)
        return best, f"The fastest speculative arm, {best.arm}, {W.phrase(best)}"
    # An arm whose pairs are too few to see anything is not "the best" of anything.
    seen = [v for v in j.judged if not W.too_few(v)]
    if seen:
        best = min(seen, key=_ratio)
        return best, (f"No speculative arm is resolved faster than classic decode: the best, {best.arm}, "
                      f"{W.phrase(best)}")
    return None, "No speculative arm has a resolved verdict against classic"


def _item(v: ArmVerdict) -> str:
    """An arm in the finding's list: its cell, or its phrase where the cell is a bare code (no
    classic to judge against, no run)."""
    return f"{v.arm} {W.phrase(v) if v.outcome in (V.NO_REFERENCE, V.NO_RUNS) else W.cell(v)}"


def verdict_sentence(j: Judgement) -> str:
    """The first sentence: the leading arm's verdict, then every other arm's, in verdictwords'
    words (a declined arm reads "declined" and gets no speed)."""
    best, sent = _lead(j)
    others = [v for v in j.arms if v is not best and v.outcome not in _NOT_LISTED]
    if others:
        sent += ("; " if best is not None else ": ") + ", ".join(map(_item, others))
    return sent + "."


def caveats(j: Judgement, incomplete: str | None) -> list[str]:
    """What a reader must know before trusting the verdicts: an incomplete record, failed runs,
    contended runs, and that the leading arm does not ship as measured."""
    out = []
    if incomplete:
        out.append(f"the record is incomplete ({incomplete})")
    if j.failed:
        out.append(f"{j.failed} of {j.measured} measured runs failed ({', '.join(v.arm for v in j.arms if v.failed)})")
    if j.contended:
        out.append(f"{j.contended} of {j.measured} measured runs were contended")
    best, _ = _lead(j)
    if best is not None and not best.shipping:
        out.append(f"{best.arm} is {W.label(best)}")
    return out


def finding(j: Judgement, incomplete: str | None, compare: str | None = None) -> tuple[str, str]:
    """The finding (at most three sentences) and its one-sentence form for the index. `compare`:
    the comparison's own sentence, when the report has a second record."""
    first = verdict_sentence(j)
    sents = [first]
    c = caveats(j, incomplete)
    if c:
        sents.append("Caveats: " + "; ".join(c) + ".")
    if compare:
        sents.append(compare)
    short = (f"Incomplete record. {first}" if incomplete else first)
    return " ".join(sents), short


def arms_verdict_table(j: Judgement) -> Table:
    """One row per arm: what it measured (description) and its paired verdict (judgement)."""
    t = Table(["arm", "tok/s", "spread", "vs classic (paired)", "configuration", "marks"],
              align=["l", "r", "r", "l", "l", "l"])
    for v in j.arms:
        t.add(v.arm, "-" if v.tok_s is None else f"{v.tok_s:.1f}",
              "-" if v.spread is None else W.pct(v.spread), W.cell(v), W.label(v), ", ".join(v.marks) or "-")
    return t


# What each of the verdict's marks means, for the legend under the arms table.
MARKS = {"unstable": "a prompt's spread is past the suite's threshold",
         "contended": "a foreign process was busy during some of its runs",
         # Runs set aside for their host (analyze.spoiled), by reason code.
         **{code: f"some of its runs set aside for the host ({words}), {hostwords.LEFT_OUT}"
            for code, words in hostwords.LEGEND.items()},
         "1 run": "a prompt has one measured run, so no spread",
         "failed": "some of its measured runs failed",
         "quiet timeout": "the quiet wait gave up before some of its runs",
         "quick": "a --quick session (no warm-up, cooldown or quiet wait)",
         "no cooldown": "no cooldown between runs"}


def arms_note(j: Judgement, prompts: int) -> str:
    """What the arms table's columns and marks are."""
    over = f"geometric mean over the {prompts} prompts of " if prompts > 1 else ""
    spread = "the largest per-prompt " if prompts > 1 else ""
    marks = [m for m in MARKS if any(m in v.marks for v in j.arms)]
    legend = (" Marks: " + "; ".join(f"{m}: {MARKS[m]}" for m in marks) + ".") if marks else ""
    return (f"tok/s: {over}the median over measured runs (description, not a verdict); spread: "
            f"{spread}(max - min) / median. vs classic: classic's ms/token over the arm's, paired by "
            f"prompt and repetition ({j.paired_when}), with the check's interval: the judgement."
            + legend + " Per-prompt figures are in the appendix.")
