"""The report's comparison with a second record (`harness report A --compare B`): both sides'
overrides and labels, the environment differences, each component before and after (or on
host A and host B), and the acceptance A/B of arms whose text is identical. Sentences and
`mdtable.Table`s for the template; reads no file."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.analyze import compare as cmp
from harness.analyze import envdiff
from harness.analyze.design import share_text
from harness.analyze.estimators import MIN_ROBUST_PAIRS
from harness.analyze.facts import Facts
from harness.analyze.labels import NOT_SHIPPING, SHIPPING
from harness.analyze.recordpair import by_verdict, compare_records, detectable_range
from harness.render import verdictwords as words
from harness.render.format import names, pct
from harness.render.mdtable import Table
from harness.render.sections import paired_block


def floor_rule(unit: str) -> str:
    """How the floor of a split is set (harness.analyze.compare.floor_ms), in words."""
    total = "the round" if unit == "round" else "the decode step"
    return f"the larger of {cmp.ABS_FLOOR_MS:g} ms and {cmp.REL_FLOOR:.0%} of {total}, the larger side's"


def _sides(cross: bool) -> tuple[str, str]:
    """What the two records are called in sentences and column heads."""
    return ("A", "B") if cross else ("before", "after")


def _record_names(cross: bool) -> tuple[str, str]:
    return ("A", "B") if cross else ("the before record", "the after record")


def _overrides_text(fx: Facts, arm: str) -> str:
    if arm not in fx.arms:
        return "arm not in this record"
    ov = fx.overrides(arm)
    if not ov:
        return "none"
    env = fx.arms[arm].env
    # An override the suite did not set came from the environment the session ran in.
    return ", ".join(f"{k}={v}" + ("" if env.get(k) == v else " (exported)") for k, v in ov.items())


def _configuration(fx: Facts, arm: str) -> str:
    if arm not in fx.arms:
        return "-"
    if fx.shipping(arm):
        return SHIPPING
    return NOT_SHIPPING + (" (the gate declined)" if "declined" in fx.outcome(arm) else "")


def override_table(fa: Facts, fb: Facts, cross: bool) -> Table:
    """Every arm of either record: each side's overrides in force and its label."""
    sa, sb = _sides(cross)
    t = Table(["arm", f"{sa}: overrides in force", f"{sa}: configuration",
               f"{sb}: overrides in force", f"{sb}: configuration"])
    for arm in fa.arm_order + [a for a in fb.arm_order if a not in fa.arms]:
        t.add(arm, _overrides_text(fa, arm), _configuration(fa, arm), _overrides_text(fb, arm),
              _configuration(fb, arm))
    return t


def shipping_sentence(fa: Facts, fb: Facts, cross: bool) -> str:
    """Which arms are a shipping configuration, on both sides."""
    na = [a for a in fa.arm_order if not fa.shipping(a)]
    nb = [a for a in fb.arm_order if not fb.shipping(a)]
    ra, rb = _record_names(cross)
    if not na and not nb:
        return f"Every arm is a {SHIPPING} in both records: no override was in force on either side."

    def part(fx: Facts, ns: list[str], rn: str) -> str:
        if not ns:
            return f"in {rn}, every arm is a {SHIPPING}"
        return (f"in {rn}, {len(ns)} of {len(fx.arm_order)} arm{'s' if len(fx.arm_order) > 1 else ''} "
                f"{'is' if len(ns) == 1 else 'are'} {NOT_SHIPPING} ({names(ns)})")
    s = f"{part(fa, na, ra)}; {part(fb, nb, rb)}."
    return s[0].upper() + s[1:]


def override_differences(fa: Facts, fb: Facts, cross: bool) -> list[str]:
    """One sentence per arm of both records whose overrides differ: a change in that arm is the
    override's as much as the code's."""
    ra, rb = _record_names(cross)
    out = []
    for arm in fa.arm_order:
        if arm not in fb.arms:
            continue
        oa, ob = fa.overrides(arm), fb.overrides(arm)
        if oa == ob:
            continue
        parts = []
        for k in sorted(set(oa) | set(ob)):
            if oa.get(k) == ob.get(k):
                continue
            sides = [(fx, o[k], r) for fx, o, r in ((fa, oa, ra), (fb, ob, rb)) if k in o]
            where = ", ".join(f"{k}={v} in {r}" for _, v, r in sides) + ("" if len(sides) > 1 else " only")
            # Each side's value: why it is an override there, and whether the suite set it or the shell did.
            whys = [(f"in {r}: " if len(sides) > 1 else "") + fx.override_why(arm, k)
                    + ("" if fx.arms[arm].env.get(k) == v else ", exported, not set by the suite")
                    for fx, v, r in sides]
            parts.append(f"{where} ({'; '.join(whys)})")
        out.append(f"{arm} ran under different overrides: {'; '.join(parts)}. Its figures do not compare "
                   "like for like: a change in this arm is the override's as much as the code's.")
    return out


def change_text(c: cmp.ComponentChange) -> str:
    """'+3.1% (-2.0% to +8.5%), inconclusive (smallest detectable 14.2%)', and the like."""
    return words.change(c)


def _count_line(changes: list[cmp.ComponentChange]) -> str:
    if not changes:
        return ("No component appears in both records (an engine that reports no phases has none): "
                "each arm's change is its ms/token, in the tables below.")
    by = by_verdict(changes)
    parts = [f"{len(by.get(cmp.FASTER, []))} faster", f"{len(by.get(cmp.SLOWER, []))} slower"]
    if by.get(cmp.NOISE):
        parts.append(f"{len(by[cmp.NOISE])} noise (resolved, no change)")
    if by.get(cmp.UNCHANGED):
        parts.append(f"{len(by[cmp.UNCHANGED])} unchanged (resolved, under the check's floor)")
    if by.get(cmp.INCONCLUSIVE):
        dets = detectable_range(by[cmp.INCONCLUSIVE])
        rng = (f" (smallest detectable {pct(dets[0])} to {pct(dets[1])})" if len(dets) > 1
               else f" (smallest detectable {pct(dets[0])})" if dets else "")
        parts.append(f"{len(by[cmp.INCONCLUSIVE])} inconclusive{rng}")
    if by.get(cmp.BELOW_FLOOR):
        parts.append(f"{len(by[cmp.BELOW_FLOOR])} below the floor")
    return f"Of {len(changes)} component changes: {', '.join(parts)}."


def _table(fa: Facts, fb: Facts, cs: list[cmp.ComponentChange], cross: bool) -> dict[str, Any]:
    unit = cs[0].unit
    floor = cs[0].floor_ms
    if cross:
        t = Table(["component", f"A: {fa.host_tag()} ms/{unit}", f"B: {fb.host_tag()} ms/{unit}", "speedup"],
                  align=["l", "r", "r", "r"])
        for c in cs:
            sp = f"{c.before.median / c.after.median:.2f}x" if c.after.median else "-"
            t.add(c.component, f"{c.before.median:.3f} ({c.before.lo:.3f}-{c.before.hi:.3f})",
                  f"{c.after.median:.3f} ({c.after.lo:.3f}-{c.after.hi:.3f})",
                  f"{sp}, below the floor" if c.below_floor else sp)
        line = (f"Each host's median ms/{unit} over its measured runs, their min-max in brackets; the speedup is "
                f"the ratio of the medians. Floor: {floor:.3f} ms/{unit} ({floor_rule(unit)}). A component whose time "
                "differs by less between the hosts is marked below the floor: its speedup is not a finding.")
    else:
        t = Table(["component", f"before ms/{unit}", f"after ms/{unit}", "change (paired, 95% interval)"],
                  align=["l", "r", "r", "r"])
        for c in cs:
            t.add(c.component, f"{c.before.median:.3f} ({c.before.lo:.3f}-{c.before.hi:.3f})",
                  f"{c.after.median:.3f} ({c.after.lo:.3f}-{c.after.hi:.3f})", change_text(c))
        line = (f"Floor: {floor:.3f} ms/{unit} ({floor_rule(unit)}). A component whose median moves by less is below "
                "the floor: never called faster or slower, whatever its percentage.")
    return {"title": fa.row_label(cs[0].arm, cs[0].prompt), "table": t, "line": line}


def _tps(c: cmp.Cell | None) -> str:
    return "did not run" if c is None else f"{c.median:.1f} ({c.lo:.1f}-{c.hi:.1f})"


def _ms(c: cmp.Cell) -> str:
    return f"{c.median:.3f} ({c.lo:.3f}-{c.hi:.3f})"


def _speedup(c: cmp.ComponentChange) -> str:
    """A's ms/token over B's: above 1x, B is faster."""
    return words.times(c.before.median / c.after.median) if c.after.median else "-"


def _throughput_cell(t: cmp.Throughput, cross: bool) -> str:
    if t.ms is None:
        return "not in both records"
    return _speedup(t.ms) if cross else change_text(t.ms)


def arms_table(per_arm: list[cmp.Throughput], cross: bool) -> dict[str, Any]:
    """Every arm of both records: each side's tok/s, and the ms/token change between them."""
    sa, sb = _sides(cross)
    last = "speedup (A's ms/token over B's)" if cross else "ms/token change (paired, 95% interval)"
    t = Table(["arm", f"{sa}: tok/s", f"{sb}: tok/s", last], align=["l", "r", "r", "r"])
    for x in per_arm:
        t.add(x.arm, _tps(x.tok_s_before), _tps(x.tok_s_after), _throughput_cell(x, cross))
    line = ("tok/s: each record's median decode tok/s over the arm's measured runs on every prompt, "
            "min-max in brackets. ")
    line += ("The speedup is the ratio of the median ms/token of the runs both hosts made." if cross else
             "The change is the paired check described above, on ms/token (tok/s's inverse: slower means fewer tok/s), "
             "runs matched by prompt and repetition.")
    return {"title": "Arms, " + ("on host A and host B" if cross else "before and after"), "table": t,
            "line": line}


def prompt_table(per_prompt: list[cmp.Throughput], cross: bool) -> dict[str, Any]:
    """ms/token of every arm and prompt both records ran."""
    sa, sb = _sides(cross)
    last = "speedup" if cross else "change (paired, 95% interval)"
    t = Table(["arm", "prompt", f"{sa} ms/token", f"{sb} ms/token", last], align=["l", "l", "r", "r", "r"])
    for x in per_prompt:
        if x.ms is not None:
            t.add(x.arm, x.prompt, _ms(x.ms.before), _ms(x.ms.after), _throughput_cell(x, cross))
    return {"title": "ms/token by arm and prompt", "table": t,
            "line": "Medians with the min-max of the runs both records made, matched by repetition."}


def finding(per_arm: list[cmp.Throughput], cross: bool) -> str:
    """The comparison's finding on the one figure every engine reports: ms/token per arm."""
    both = [x for x in per_arm if x.ms is not None]
    one = [x.arm for x in per_arm if x.ms is None]
    only = f" Not in both records: {names(one)}." if one else ""
    if not both:
        return "No arm ran in both records: nothing to compare." + only
    if cross:
        return ("Speed of B against A per arm (A's median ms/token over B's, every prompt; above 1x, B is "
                f"faster): {', '.join(f'{x.arm} {_speedup(x.ms)}' for x in both if x.ms is not None)}.{only}")
    by = by_verdict([x.ms for x in both if x.ms is not None])   # always: `both` holds the arms with a change
    order = [cmp.SLOWER, cmp.FASTER, cmp.INCONCLUSIVE, cmp.NOISE, cmp.UNCHANGED, cmp.BELOW_FLOOR]
    parts = []
    for v in order:
        cs = by.get(v, [])
        # Each with its interval: how far the change could be, and for an unresolved one, why.
        if cs:
            parts.append(f"{len(cs)} {v} ({', '.join(f'{c.arm} {words.change_short(c)}' for c in cs)})")
    return (f"After against before, ms/token per arm (every prompt, runs matched by prompt and repetition), "
            f"of {len(both)} arm{'s' if len(both) > 1 else ''}: {'; '.join(parts)}.{only}")


@dataclass(frozen=True)
class CompareSection:
    """The comparison with a second record, as the report's template reads it (`compare`)."""

    cross_host: bool                        # the records came from different hosts
    other: str                              # the second record's path
    finding: str
    tables: list[dict[str, Any]]            # per arm, then per prompt (several prompts)
    components: list[dict[str, Any]]        # each arm and prompt's component changes (the appendix)
    lines: list[str]
    acceptance: list[dict[str, Any]]        # the acceptance A/B of each arm
    changes: list[cmp.ComponentChange]      # each arm and prompt's ms/token change, then every component's
    env_line: str
    env: Table | None                       # what differs between the records' environments
    overrides: Table
    shipping: str                           # the sentence on both records' shipping configurations


def compare_section(fa: Facts, fb: Facts) -> CompareSection:
    rp = compare_records(fa, fb)
    cross, per_arm, per_prompt = rp.cross, rp.per_arm, rp.per_prompt
    tables = [arms_table(per_arm, cross)] + ([prompt_table(per_prompt, cross)] if rp.multi_prompt else [])
    components = [_table(fa, fb, cs, cross) for cs in rp.components]   # detail: the appendix's
    shipping = shipping_sentence(fa, fb, cross)
    lines = [shipping] + override_differences(fa, fb, cross)
    if cross:
        lines.append(f"Host A: {fa.host_short()}, {fa.path}. Host B: {fb.host_short()}, {fb.path}. "
                     "Speedup is A's time over B's: above 1x, B is faster.")
    else:
        d = rp.design
        lines.append(f"Before: {fa.path} ({fa.date()}); after: {fb.path} ({fb.date()}); same host. Medians with "
                     "min-max of per-run values. The change is the paired check of docs/statistics.md on the two "
                     "records' runs matched in run order (the per-run ratios' geometric mean, or from "
                     f"{MIN_ROBUST_PAIRS} runs their robust (Huber) location, with its interval): "
                     f"faster or slower when the interval excludes no change and the change is at least "
                     f"{share_text(d.min_effect)}; noise only when the check could have seen a {share_text(d.threshold)} change "
                     f"(smallest detectable change at most {share_text(d.threshold)}) and its interval, inside "
                     f"±{share_text(d.threshold)}, holds no change; inconclusive otherwise, with the smallest detectable "
                     f"change. Each component is tested alone at the {share_text(d.alpha)} level, with no correction for "
                     "the many components of one report: among many, a few faster or slower by chance are expected. "
                     "The records did not run side by side, so each pair carries both runs' spread.")
        lines.append(_count_line(rp.component_changes))
        n = rp.repetitions
        if n < 5:
            lines.append(f"With {n} runs per side the smallest detectable change is large: more runs narrow it.")
    ab = [paired_block(r, f"{r.a} (A)" if cross else f"{r.a} before", f"{r.a} (B)" if cross else f"{r.a} after")
          for r in rp.acceptance]
    for spec, figure, arm, reason in fb.acks:
        lines.append(f"Acknowledged (benchmarks/acknowledgements.toml, commits {spec}, arm {arm}, figure "
                     f"{figure}): {reason}")
    diffs = rp.env
    env = None
    if diffs:
        env = Table(["field", "A" if cross else "before", "B" if cross else "after"], align=["l", "l", "l"])
        for row in diffs:
            env.add(row.what, row.a, row.b)
    return CompareSection(cross_host=cross, other=fb.path, finding=finding(per_arm, cross), tables=tables,
                          components=components, lines=lines, acceptance=ab, changes=rp.changes,
                          env_line=envdiff.diff_sentence(diffs, rp.env_compared), env=env,
                          overrides=override_table(fa, fb, cross), shipping=shipping)
