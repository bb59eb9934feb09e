"""Report sections for the drafter-step split (profile mode) and verify cost by shape."""

from __future__ import annotations

from typing import Any

from harness.analyze import drafterstep
from harness.analyze.facts import Facts
from harness.core import declare
from harness.render.format import f, pct, signed_pct
from harness.render.mdtable import Table
from harness.render.roundsec import includes


def drafter_split_sections(fx: Facts) -> list[dict[str, Any]]:
    out = []
    for s in fx.drafter_splits:
        decl = declare.of_record(fx.record, s.arm)
        block = fx.arms[s.arm].block if s.arm in fx.arms else 1
        t = Table(["stage", "total ms", "ms/forward", "ms/round", "share"], align=["l", "r", "r", "r", "r"])
        for name, ms in s.stages:
            t.add(decl.phase_label(name, block), f"{ms:.2f}", f(ms / s.forwards if s.forwards else None, ".3f"),
                  f(ms / s.rounds if s.rounds else None, ".3f"), pct(ms / s.total_ms if s.total_ms else None))
        t.add("stages total", f"{s.total_ms:.2f}", f(s.total_ms / s.forwards if s.forwards else None, ".3f"),
              f(s.total_ms / s.rounds if s.rounds else None, ".3f"), "100.0%")
        phase = decl.phase_label(s.phase, block)
        if s.closure_ms is None or s.closure_pct is None or s.phase_ms is None:
            lines = [f"Closure unknown: the round split has no time of its own for {phase} in every run "
                     f"({s.forwards} drafter forwards in {s.rounds} rounds); the largest stage is "
                     f"{decl.phase_label(s.dominant, block)}."]
        else:
            lines = [f"The stages close against {phase}'s own time ({s.phase_ms:.2f} ms) to within "
                     f"{s.closure_pct:.2%} ({s.closure_ms:+.3f} ms over {s.forwards} drafter forwards in {s.rounds} "
                     f"rounds); the largest stage is {decl.phase_label(s.dominant, block)}."]
        if s.forwards and s.rounds:
            lines.append(f"{s.forwards / s.rounds:.2f} drafter forwards per round in {phase}.")
        cost = next((p for p in fx.profiles if p.profiled.arm == s.arm and p.profiled.prompt == s.prompt), None)
        if cost is not None:
            lines.append(f"Profile mode's own cost: {signed_pct(cost.cost)} per round against {cost.unprofiled.arm} "
                         f"({cost.profiled.per_unit_ms:.3f} against {cost.unprofiled.per_unit_ms:.3f} ms)"
                         + ("." if cost.resolved else ", inside the two arms' run-to-run spread (not resolved)."))
        else:
            lines.append("Profile mode's own cost is not measured here: the record has no unprofiled twin of this arm.")
        out.append({"title": f"{fx.row_label(s.arm, s.prompt)}: {phase}", "table": t, "lines": lines})
    return out


def drafter_includes(fx: Facts) -> list[str]:
    return includes(fx, [(s.arm, [name for name, _ in s.stages]) for s in fx.drafter_splits])


def shape_sections(fx: Facts) -> list[dict[str, Any]]:
    out = []
    for c in drafterstep.shape_costs(fx.record):
        t = Table(["KV length", "first-use rounds", "first-use median ms", "repeat rounds", "repeat median ms"],
                  align=["l", "r", "r", "r", "r"])
        for b in c.bins:
            t.add(f"{b.lo}-{b.hi}", len(b.first), f(b.first_median, ".3f"), len(b.repeat), f(b.repeat_median, ".3f"))
        lines = [f"Verify forward (T={c.width}) per round, every completed run of the arm (warm-ups included, "
                 f"since first uses fall mostly there): {len(c.first)} first-use rounds (a KV length the engine's loaded "
                 f"target had not run at this width; a backend's own caches may be shared across loaded copies), median {f(c.first_median, '.3f')} ms; {len(c.repeat)} repeat "
                 f"rounds, median {f(c.repeat_median, '.3f')} ms."]
        if c.excess_ms is not None:
            share = c.excess_share
            if share is None:
                lines.append(f"First use cost {c.excess_ms:+.1f} ms over repeats in all; its share of decode time is "
                             "unknown (a run it fell in reports no decode time), so it is neither flagged nor cleared.")
            else:
                lines.append(f"First use cost {c.excess_ms:+.1f} ms over repeats in all, {pct(share)} of the decode "
                             f"time of the runs it fell in"
                             + (f": **flagged**, above {pct(drafterstep.FIRST_USE_SHARE, 0)}; a backend that builds a "
                                "kernel plan per shape pays it every time a decode meets a new length."
                                if c.first_use_flagged else
                                f" (under the {pct(drafterstep.FIRST_USE_SHARE, 0)} flag)."))
        elif c.first and not c.repeat:
            lines.append("Every round was a first use: no repeat to measure the first-use cost against.")
        if c.vs_probe is not None:
            cold = (f"; cold {c.probe_cold_ms:.3f} ms (a new KV length each time)"
                    if c.probe_cold_ms is not None else "")
            lines.append(f"Measured runs' verify forward, median {c.verify_median:.3f} ms per round, against the "
                         f"scaling probe at T={c.width}: warm {c.probe_warm_ms:.3f} ms{cold}; "
                         f"{c.vs_probe:.2f}x the warm probe"
                         + (f": **flagged**, over {drafterstep.PROBE_RATIO:.1f}x: the verify forward pays more than "
                            "its shape's warm cost (a first use each round, or work the probe does not do)."
                            if c.probe_flagged else "."))
        out.append({"title": fx.row_label(c.arm, c.prompt), "table": t, "lines": lines})
    return out
