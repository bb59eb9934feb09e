"""What a comparison of two commits says to machines and people: the JSON summary that
compare-commits prints and pr-check writes (--json), each figure as a row, and the exit-status
help both commands show. Split from harness.ci.twocommits, which measures and judges."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import msgspec

from harness.analyze import paired
from harness.analyze.checknotes import CheckNotes
from harness.render.prcomment import headline as finding

if TYPE_CHECKING:
    from harness.ci.twocommits import Comparison


class _Stopped(msgspec.Struct, kw_only=True):
    """Where the comparison's sampling stopped (Comparison.outcome, the sequential outcome's
    summary): its rounds, and the key of what stopped it (harness.analyze.sequential.STOPS)."""
    rounds: int | None = None
    stopped: str | None = None


def _finite(x: Any) -> Any:
    """None for inf or nan (an unbounded interval): JSON has no such numbers, and jq rejects them."""
    return None if isinstance(x, float) and not math.isfinite(x) else x


def figure_rows(c: Comparison) -> list[dict[str, Any]]:
    rows = []
    for f in c.figures:
        r = f.result
        rows.append({"arm": f.arm, "figure": f.figure, "gated": f.gated, "verdict": r.verdict,
                     "n": r.n, "base_median": f.base_median, "head_median": f.head_median,
                     "change": paired.ratio_text(r), "detectable": paired.detectable_text(r),
                     "note": r.note, "ratio": r.ratio, "lo": _finite(r.lo), "hi": _finite(r.hi),
                     "detectable_value": _finite(r.detectable), "serial_inflation": r.inflation,
                     "autocorr": r.autocorr, "location": r.location, "mean_ratio": r.mean_ratio,
                     "generations": r.generations, "df": r.df, "acknowledged": f.ack,
                     "contended": r.contended})
    return rows


def summary_json(c: Comparison) -> dict[str, Any]:
    sampling = msgspec.convert(c.outcome, _Stopped)
    return {"kind": "harness.compare-commits", "base": c.base, "head": c.head,
            "exit_status": c.exit_status, "headline": c.headline(), "duration_s": round(c.duration_s, 1),
            # The PR comment's sentence: each gated change with its size and interval.
            "finding": finding(c),
            "design": c.design.to_dict(), "rounds": sampling.rounds,
            "stopped": sampling.stopped, "records": c.records,
            "figures": figure_rows(c),
            "identity": [{"arm": r.arm, "prompt": r.prompt, "status": r.status, "detail": r.detail}
                         for r in c.identity],
            "newly_failing": c.newly_failing, **_notes(c.notes)}


def _notes(n: CheckNotes) -> dict[str, Any]:
    """The check's notes under the summary's own names, as JSON's types."""
    return {"duty": None if n.check_duty is None else asdict(n.check_duty),
            "environment": [asdict(e) for e in n.environment],
            "duty_per_side": n.duty, "builds": n.builds,
            "contention": n.contention.to_dict() if n.contention else None}


EXIT_HELP = ("exit status: 0 pass (every gated figure unchanged or improved, every output byte-identical "
             "to BASE's); 1 fail (a gated figure worse, runs failing at HEAD only, or an output differing "
             "from BASE's); 3 inconclusive (this host could not see the threshold on some gated figure, "
             "or its runs were contended past [watch] contended_share; treat as neutral, not green); 2 a problem to fix (one line on stderr)")
