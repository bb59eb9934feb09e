"""The report's judgements: override pairs and labels, the runs set aside, the limits of a
record, how to reproduce it, and the headline."""

from __future__ import annotations

import shlex
from typing import Any

from harness.analyze import runnotes
from harness.analyze.facts import Facts
from harness.analyze.labels import NOT_SHIPPING, SHIPPING
from harness.analyze.overridepairs import one_override_pairs
from harness.analyze.verdict import Judgement
from harness.render import hostwords
from harness.render.comparesec import CompareSection
from harness.render.finding import finding
from harness.render.format import names, pct, signed_pct, speedup
from harness.render.mdtable import Table
from harness.render.roundsec import CostContext


def override_table(fx: Facts) -> Table | None:
    pairs = one_override_pairs(fx)
    if not pairs:
        return None
    t = Table(["arm", "against"] + (["prompt"] if fx.multi_prompt else []) +
              ["differs by", "tok/s ratio (95% CI)", "gate", "same tokens"], align=["l", "l"] +
              (["l"] if fx.multi_prompt else []) + ["l", "r", "l", "l"])
    for o in pairs:
        by = o.diff + (f" (engine {o.engines[1]} vs {o.engines[0]})" if o.engines[0] != o.engines[1] else "")
        verdict = "" if o.resolved else ", not resolved"
        gate = o.gate[0] if o.gate[0] == o.gate[1] else f"{o.gate[0]} -> {o.gate[1]}"
        t.add(*([o.b, o.a] + ([o.prompt] if fx.multi_prompt else []) +
                [by, speedup(o.ratio, None if o.lo is None or o.hi is None else (o.lo, o.hi)) + verdict, gate,
                 "yes" if o.same_tokens else "no"]))
    return t


def _run_list(idx: list[int]) -> str:
    return f"{len(idx)} (run{'s' if len(idx) > 1 else ''} {', '.join(map(str, idx))})"


def left_out_table(fx: Facts) -> Table:
    """Runs left out of every figure (warm-ups, failed runs, runs set aside on load), one line per
    arm, prompt and reason."""
    t = Table(["arm"] + (["prompt"] if fx.multi_prompt else []) + ["runs", "why"])
    for g in runnotes.left_out(fx):
        if g.kind == runnotes.WARMUP:
            why = "warm-up: loads weights and compiles kernels"
        else:
            # A run set aside on load says so in its error, not "failed: set aside ...".
            why = str(g.error) if g.set_aside else f"failed: {g.error}"
        t.add(*([g.arm] + ([g.prompt] if fx.multi_prompt else []) + [_run_list(list(g.runs)), why]))
    return t


def flags_table(fx: Facts) -> Table:
    """Runs and rows kept in the figures but flagged: contended runs, runs set aside for their
    host (its reasons' legend in the row), quiet-wait timeouts, rows
    whose spread is past the suite's threshold."""
    t = Table(["arm"] + (["prompt"] if fx.multi_prompt else []) + ["runs", "flag"])
    s = fx.settings
    watch_pct = s.watch.threshold_pct
    for g in runnotes.flagged(fx):
        if g.kind == runnotes.CONTENDED:
            why = (f"contended: a foreign process above {watch_pct}% CPU in more than "
                   f"{pct(s.contention_threshold, 0)} of the watch's samples; the row is do not publish")
        elif g.kind == runnotes.HOST:
            why = hostwords.reasons_text(g.reasons)
        else:
            why = ("the quiet wait gave up after "
                   + (f"{g.quiet_timeout_s:g} s" if g.quiet_timeout_s is not None else "its timeout")
                   + " and the run went ahead")
        t.add(*([g.arm] + ([g.prompt] if fx.multi_prompt else []) + [_run_list(list(g.runs)), why]))
    for row in runnotes.spread_over(fx):
        t.add(*([row.arm] + ([row.prompt] if fx.multi_prompt else []) +
                [f"{row.runs} (the row)", f"spread {pct(row.spread)} > {pct(s.spread_threshold, 0)}; "
                                          "the row is do not publish"]))
    return t


def limits(fx: Facts, cost: CostContext) -> list[str]:
    out = []
    cores = fx.host.cpu.logical_cores
    la = fx.loadavg()
    over = runnotes.spread_over(fx)
    if isinstance(cores, int) and cores <= 4:
        out.append(f"A small shared host: {cores} logical cores"
                   + (f", 1-min load average {la[1]:.2f}-{la[2]:.2f} during the runs" if la else "")
                   + f"; {len(over)} of {len(fx.rows)} rows exceed the {pct(fx.settings.spread_threshold, 0)} "
                     "spread threshold. Differences smaller than the spread are not findings.")
    elif over:
        out.append(f"{len(over)} of {len(fx.rows)} rows exceed the {pct(fx.settings.spread_threshold, 0)} spread threshold.")
    if fx.is_cpu():
        out.append("MLX CPU backend: absolute tok/s and ms do not carry over to the lab's GPUs or to another CPU; "
                   "only ratios between arms of this record mean anything, and only for this host.")
    blases = fx.blas_groups()       # an engine on a GPU is grouped by its device, not its process's BLAS
    if len(blases) > 1:
        gpu = any(k.startswith("GPU ") for k in blases)
        whose = "the BLAS's or the device's" if gpu else "the BLAS's"
        out.append(f"Arms ran on different BLAS{' or devices' if gpu else ''} ("
                   + "; ".join(f"{k}: {names(v)}" for k, v in blases.items())
                   + f"): between those groups a speed difference is {whose}, and so is the gate's verdict.")
    ov = runnotes.overridden_arms(fx)
    if ov:
        out.append(f"Overrides in force for {names(ov)}: their figures are {NOT_SHIPPING} and say nothing "
                   "about what ships.")
    declined = runnotes.declined_arms(fx)
    if declined:
        out.append(f"{names(declined)} declined to classic decode: {'its' if len(declined) == 1 else 'their'} "
                   "figures are classic decode's and say nothing about speculation.")
    s = fx.settings
    if 0 < fx.runs_per_median()[0] < 5:
        runs = "run" if fx.runs_per_median() == (1, 1) else "runs"
        out.append(f"Medians of {fx.runs_per_median_text()} {runs} (the lab protocol is 5 after a warm-up).")
    if fx.record.quick:
        out.append("A --quick session: no warm-up, no cooldown, no quiet wait.")
    elif not s.cooldown_s:
        out.append("No cooldown between runs: back-to-back runs penalise the wide verify shapes.")
    out += _set_aside_sentence(fx)
    lacks = incomplete_text(fx)
    if lacks:
        out.append(f"The record is incomplete ({lacks}): finish it with harness run --resume.")
    if fx.host.repo.dirty is True:
        out.append("The working tree had uncommitted changes: the commit alone does not reproduce this build.")
    if fx.profiles:
        unresolved = not all(p.resolved for p in fx.profiles)
        out.append("The drafter step cost comes from profile mode, which changes the timing it measures "
                   f"({', '.join(signed_pct(p.cost) for p in fx.profiles)} per round here"
                   + (", not resolved from noise)." if unresolved else ")."))
    if cost.available and ("unknown peak" in cost.peak or "no host spec" in cost.peak):
        out.append("No peak bandwidth is known for this host: efficiency is not computed.")
    tool = runnotes.scaling_tool(fx)
    if tool:
        # Only an engine that declares a scaling tool is pointed to one.
        out.append(f"No verify-forward cost scaling in this record ({tool} measures it).")
    return out


SET_ASIDE_NAMED = 3


def _set_aside_sentence(fx: Facts) -> list[str]:
    """Runs recorded as ok that no engine could have measured (harness.collect.recordcheck), each
    named: a harness that did not check engine results kept them as ok."""
    runs = runnotes.set_aside(fx)
    named = [f"run {r.index} ({r.arm} on {r.prompt}) set aside: {r.why}" for r in runs[:SET_ASIDE_NAMED]]
    if not named:
        return []
    more = f"; and {len(runs) - len(named)} more" if len(runs) > len(named) else ""
    return [f"Recorded as ok by a harness that did not check engine results: {'; '.join(named)}{more}."]


def reproducing(fx: Facts, compare_path: str | None = None) -> dict[str, Any]:
    repo = fx.host.repo
    cmds = [f"git checkout {repo.commit}   # in the measured engine's repository"]
    suite = fx.suite.path
    ids = {k for s in fx.rows for k in s.identity}
    if fx.record.baselines and ids & {"identical", "differs"}:
        cmds.append(f"harness baseline record {shlex.quote(str(suite))} --baselines "
                    f"{shlex.quote(fx.record.baselines)}   # own baselines, if not already recorded")
    cmds.append(" ".join(shlex.quote(c) for c in fx.record.command or ["harness", "run", str(suite)]))
    cmds.append(f"harness report {shlex.quote(fx.path)}"
                + (f" --compare {shlex.quote(compare_path)}" if compare_path else ""))
    lines = [f"Suite file {suite}, sha256 {fx.suite.sha256 or 'unknown'}: check it before re-running "
             f"(`sha256sum {suite}`). A new session needs a --record path that does not exist yet."]
    if repo.dirty is True:
        lines.append("The tree was dirty at record time: the checkout above lacks those changes.")
    return {"code": "\n".join(cmds), "lines": lines}


def headline(fx: Facts, j: Judgement, cmp_sec: CompareSection | None) -> tuple[str, str]:
    """The report's finding (harness.render.finding, from the paired verdicts alone) and its
    one-sentence form for the index."""
    return finding(j, incomplete_text(fx), " ".join(_compare_sentence(fx, cmp_sec)) or None)


def incomplete_text(fx: Facts) -> str | None:
    """What an incomplete record lacks; None for a complete one."""
    lacks = runnotes.incomplete(fx)
    if lacks is None:
        return None
    if lacks.runs_all_there:
        # harness run --resume measures a missing scaling probe too.
        return f"its session stopped after all {lacks.done} planned runs, before the steps that follow them"
    return f"{lacks.done} of {lacks.planned if lacks.planned is not None else '?'} planned runs"


def _compare_sentence(fx: Facts, cmp_sec: CompareSection | None) -> list[str]:
    parts: list[str] = []
    if cmp_sec is not None and not cmp_sec.cross_host:
        counts = runnotes.change_counts(cmp_sec.changes)
        big = counts.largest
        if big is not None and big.judged.ratio is not None:   # a resolved change has its ratio
            # The ratio is the other record's over this one's: say which way it runs.
            parts.append(f"Going from this record to {cmp_sec.other}, the largest resolved change (paired "
                         f"check, above the floor) is {fx.row_label(big.arm, big.prompt)} {big.component} "
                         f"{signed_pct(big.judged.ratio - 1.0)} ({big.verdict} in {cmp_sec.other}).")
        elif counts.total:
            rest = [f"{counts.noise} noise"] if counts.noise else []
            if counts.inconclusive:
                det = counts.smallest_detectable
                rest.append(f"{counts.inconclusive} inconclusive"
                            + (f" (smallest detectable {pct(det)} or more)" if det is not None else ""))
            if counts.below_floor:
                rest.append(f"{counts.below_floor} below the floor")
            parts.append(f"Against {cmp_sec.other}, no component change is resolved as faster or slower: "
                         + ", ".join(rest) + ".")
    return parts


def shipping_status(fx: Facts) -> str:
    not_ship = runnotes.not_shipping_arms(fx)
    if not not_ship:
        return f"all arms: {SHIPPING}"
    return f"{len(not_ship)} of {len(fx.arm_order)} arms {NOT_SHIPPING}"


