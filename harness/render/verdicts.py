"""The report's judgements: override pairs and labels, the runs set aside, the limits of a
record, how to reproduce it, and the headline."""

from __future__ import annotations

import math
import shlex
from typing import Any

from harness.analyze import rounds
from harness.analyze.labels import NOT_SHIPPING, SHIPPING
from harness.analyze.summary import MIN_BOOTSTRAP_RUNS
from harness.collect.recordcheck import SET_ASIDE, SET_ASIDE_PREFIX
from harness.core import declare
from harness.core.schema import section
from harness.render.facts import Facts
from harness.render.format import geomean, names, pct, signed_pct, speedup
from harness.render.mdtable import Table


def _env_diff(a: dict[str, str], b: dict[str, str]) -> list[str]:
    return [f"{k}={b[k]}" if k in b else f"without {k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def one_override_pairs(fx: Facts) -> list[dict[str, Any]]:
    """Arms that differ from another arm of the same pairing and block by exactly one env var.

    Profile-mode pairs have their own section. The ratio is of median tok/s per prompt,
    with the bootstrap CI the summary uses.
    """
    from harness.analyze import stats
    out = []
    tps = {k: [r["decode_tokens_per_s"] for r in rs if r.get("decode_tokens_per_s")] for k, rs in fx.groups.items()}
    for i, a in enumerate(fx.arm_order):
        for b in fx.arm_order[i + 1:]:
            ea, eb = fx.arms[a], fx.arms[b]
            if (ea["pairing"], ea["block"]) != (eb["pairing"], eb["block"]):
                continue
            diff = _env_diff(ea.get("env") or {}, eb.get("env") or {})
            pvars = {rounds.profile_var(fx.rec, a), rounds.profile_var(fx.rec, b)} - {None}
            if len(diff) != 1 or any(v in diff[0] for v in pvars):
                continue
            for p in fx.prompts:
                xa, xb = tps.get((a, p)), tps.get((b, p))
                if not xa or not xb:
                    continue
                ratio, lo, hi = stats.bootstrap_ratio_ci(xb, xa)
                few = min(len(xa), len(xb)) < MIN_BOOTSTRAP_RUNS   # the summary's rule: no interval
                ga, gb = fx.groups[(a, p)][0], fx.groups[(b, p)][0]
                out.append({"a": a, "b": b, "prompt": p, "diff": diff[0], "ratio": ratio, "lo": None if few else lo, "hi": None if few else hi,
                            "resolved": not few and (lo > 1 or hi < 1),
                            "engines": (ea["engine"], eb["engine"]),
                            "gate": (fx.outcome(a), fx.outcome(b)),
                            "same_tokens": ga.get("token_ids") is not None and ga.get("token_ids") == gb.get("token_ids")})
    return out


def override_table(fx: Facts) -> Table | None:
    pairs = one_override_pairs(fx)
    if not pairs:
        return None
    t = Table(["arm", "against"] + (["prompt"] if fx.multi_prompt else []) +
              ["differs by", "tok/s ratio (95% CI)", "gate", "same tokens"], align=["l", "l"] +
              (["l"] if fx.multi_prompt else []) + ["l", "r", "l", "l"])
    for o in pairs:
        by = o["diff"] + (f" (engine {o['engines'][1]} vs {o['engines'][0]})" if o["engines"][0] != o["engines"][1] else "")
        verdict = "" if o["resolved"] else ", not resolved"
        gate = o["gate"][0] if o["gate"][0] == o["gate"][1] else f"{o['gate'][0]} -> {o['gate'][1]}"
        t.add(*([o["b"], o["a"]] + ([o["prompt"]] if fx.multi_prompt else []) +
                [by, speedup(o["ratio"], None if o["lo"] is None else (o["lo"], o["hi"])) + verdict, gate,
                 "yes" if o["same_tokens"] else "no"]))
    return t


def thrown_table(fx: Facts) -> Table:
    """Runs left out of the figures, and runs or rows kept but flagged, one line per arm and reason."""
    t = Table(["arm"] + (["prompt"] if fx.multi_prompt else []) + ["runs", "treatment", "why"])
    s = fx.settings
    found: dict[tuple[str, str, str], tuple[str, str, list[int]]] = {}

    def note(r: dict[str, Any], kind: str, treat: str, why: str) -> None:
        found.setdefault((r["arm"], r["prompt"], kind), (treat, why, []))[2].append(r["index"])
    watch_pct = (s.get("watch") or {}).get("threshold_pct", "?")
    for r in fx.rec["runs"]:
        marks = r.get("marks") or []
        if r.get("warmup"):
            note(r, "warmup", "left out of every figure", "warm-up: loads weights and compiles kernels")
            continue
        if r.get("status") == "failed":
            # A run set aside on load says so in its error, not "failed: set aside ...".
            why = r.get("error") if SET_ASIDE in marks else f"failed: {r.get('error')}"
            note(r, f"failed {r.get('error')}", "left out of every figure", why)
        if "contended" in marks:
            note(r, "contended", "kept; the row is flagged do not publish",
                 f"contended: a foreign process above {watch_pct}% CPU in more than "
                 f"{pct(s['contention_threshold'], 0)} of the watch's samples")
        if "quiet_gate_timeout" in marks:
            # The run's own limit: an unset [quiet] timeout_s is sized to each run.
            gave = ((r.get("load") or {}).get("quiet_gate") or {}).get("timeout_s", s["quiet"].get("timeout_s"))
            note(r, "quiet", "kept; the row is flagged", "the quiet gate gave up after "
                 + (f"{gave:g} s" if isinstance(gave, (int, float)) else "its timeout") + " and the run went ahead")
    order = {a: i for i, a in enumerate(fx.arm_order)}
    kinds = ["warmup", "failed", "contended", "quiet"]
    for (arm, prompt, _kind), (treat, why, idx) in sorted(
            found.items(), key=lambda kv: (kinds.index(kv[0][2].split()[0]), order.get(kv[0][0], 0), kv[0][1])):
        runs = f"{len(idx)} (run{'s' if len(idx) > 1 else ''} {', '.join(map(str, idx))})"
        t.add(*([arm] + ([prompt] if fx.multi_prompt else []) + [runs, treat, why]))
    for row in fx.rows:
        if row.spread is not None and row.spread > s["spread_threshold"]:
            t.add(*([row.arm] + ([row.prompt] if fx.multi_prompt else []) +
                    [f"{row.runs} (the row)", "kept; the row is flagged do not publish",
                     f"spread {pct(row.spread)} > {pct(s['spread_threshold'], 0)}"]))
    return t


def limits(fx: Facts, cost: dict[str, Any]) -> list[str]:
    out = []
    cores = section(fx.host, "cpu").get("logical_cores")
    la = fx.loadavg()
    over = [r for r in fx.rows if r.spread is not None and r.spread > fx.settings["spread_threshold"]]
    if isinstance(cores, int) and cores <= 4:
        out.append(f"A small shared host: {cores} logical cores"
                   + (f", 1-min load average {la[1]:.2f}-{la[2]:.2f} during the runs" if la else "")
                   + f"; {len(over)} of {len(fx.rows)} rows exceed the {pct(fx.settings['spread_threshold'], 0)} "
                     "spread threshold. Differences smaller than the spread are not findings.")
    elif over:
        out.append(f"{len(over)} of {len(fx.rows)} rows exceed the {pct(fx.settings['spread_threshold'], 0)} spread threshold.")
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
    ov = [a for a in fx.arm_order if fx.overrides(a)]
    if ov:
        out.append(f"Overrides in force for {names(ov)}: their figures are {NOT_SHIPPING} and say nothing "
                   "about what ships.")
    declined = [a for a in fx.arm_order if fx.arms[a]["block"] > 1 and "declined" in fx.outcome(a)]
    if declined:
        out.append(f"{names(declined)} declined to classic decode: {'its' if len(declined) == 1 else 'their'} "
                   "'vs classic' is classic decode against classic decode: it says nothing about speculation.")
    s = fx.settings
    if 0 < fx.runs_per_median()[0] < 5:
        runs = "run" if fx.runs_per_median() == (1, 1) else "runs"
        out.append(f"Medians of {fx.runs_per_median_text()} {runs} (the lab protocol is 5 after a warm-up).")
    if fx.rec.get("quick"):
        out.append("A --quick session: no warm-up, no cooldown, no quiet gate.")
    elif not s.get("cooldown_s"):
        out.append("No cooldown between runs: back-to-back runs penalise the wide verify shapes.")
    lacks = incomplete_text(fx)
    if lacks:
        out.append(f"The record is incomplete ({lacks}): finish it with harness run --resume.")
    if section(fx.host, "repo").get("dirty"):
        out.append("The working tree had uncommitted changes: the commit alone does not reproduce this build.")
    if fx.profiles:
        unresolved = not all(p.resolved for p in fx.profiles)
        out.append("The drafter step cost comes from profile mode, which changes the timing it measures "
                   f"({', '.join(signed_pct(p.cost) for p in fx.profiles)} per round here"
                   + (", not resolved from noise)." if unresolved else ")."))
    peak = str(cost.get("peak", ""))
    if cost.get("available") and ("unknown peak" in peak or "no host profile" in peak):
        out.append("No peak bandwidth is known for this host: efficiency is not computed.")
    tools = [declare.of_record(fx.rec, a).tools.get("scaling") for a in fx.arm_order]
    if fx.rec.get("scaling") is None and any(tools):
        # Only an engine that declares a scaling tool is pointed to one.
        out.append(f"No verify-forward cost scaling in this record ({next(t for t in tools if t)} measures it).")
    return out


def reproducing(fx: Facts, compare_path: str | None = None) -> dict[str, Any]:
    repo = section(fx.host, "repo")
    cmds = [f"git checkout {repo.get('commit', 'unknown')}   # in the measured engine's repository"]
    suite = fx.suite.get("path")
    ids = {k for s in fx.rows for k in s.identity}
    if fx.rec.get("baselines") and ids & {"identical", "differs"}:
        cmds.append(f"harness baseline record {shlex.quote(str(suite))} --baselines "
                    f"{shlex.quote(str(fx.rec['baselines']))}   # own baselines, if not already recorded")
    cmds.append(" ".join(shlex.quote(c) for c in fx.rec.get("command") or ["harness", "run", str(suite)]))
    cmds.append(f"harness report {shlex.quote(fx.path)}"
                + (f" --compare {shlex.quote(compare_path)}" if compare_path else ""))
    lines = [f"Suite file {suite}, sha256 {fx.suite.get('sha256', 'unknown')}: check it before re-running "
             f"(`sha256sum {suite}`). A new session needs a --record path that does not exist yet."]
    if repo.get("dirty"):
        lines.append("The tree was dirty at record time: the checkout above lacks those changes.")
    return {"code": "\n".join(cmds), "lines": lines}


def headline(fx: Facts, cmp_sec: dict[str, Any] | None) -> tuple[str, str]:
    """The report's opening paragraph and its one-sentence form for the index."""
    s = fx.settings
    parts = [f"{fx.suite['name']} on {fx.host_short()}: {len(fx.arm_order)} arms, {len(fx.prompts)} prompt"
             f"{'s' if fx.multi_prompt else ''}, {s['max_tokens']} tokens per run, "
             + (f"medians of {fx.runs_per_median_text()}." if fx.runs_per_median()[1] else "no measured run.")]
    incomplete = _incomplete_sentence(fx)
    parts += incomplete + _failed_runs_sentence(fx)
    speed, short = _speedup_sentences(fx)
    short = " ".join(incomplete + [short]) if incomplete else short
    parts += speed + _one_override_sentence(fx)
    gate, gate_short = _probe_sentences(fx)
    short += gate_short
    parts += gate + _compare_sentence(fx, cmp_sec) + _label_sentences(fx, cmp_sec)
    return " ".join(parts), short


def incomplete_text(fx: Facts) -> str | None:
    """What an incomplete record lacks; None for a complete one."""
    if fx.rec.get("complete", True):
        return None
    done, planned = len(fx.rec["runs"]), fx.rec.get("planned_runs")
    if planned is not None and done >= planned:
        # Every run is there: the session stopped in what follows them (harness run --resume
        # measures a missing scaling probe too).
        return f"its session stopped after all {done} planned runs, before the steps that follow them"
    return f"{done} of {planned if planned is not None else '?'} planned runs"


def _incomplete_sentence(fx: Facts) -> list[str]:
    """An unfinished record says so first (and in the index): its arms and prompts may not all
    have run, and it has fewer runs than its suite planned."""
    lacks = incomplete_text(fx)
    return [f"The record is incomplete ({lacks}): every figure rests on the runs it has."] if lacks else []


def _failed_runs_sentence(fx: Facts) -> list[str]:
    """Failed measured runs come first: every figure below rests on the runs that did not fail."""
    measured = [r for r in fx.rec["runs"] if not r.get("warmup")]
    failed = [r for r in measured if r.get("status") != "ok"]
    if not failed:
        return _set_aside_sentence(fx)
    arms = sorted({r.get("arm") or "?" for r in failed})
    return [f"{len(failed)} of {len(measured)} measured runs failed ({', '.join(arms)}); the figures "
            "below rest on the runs that did not (see Rows thrown away)."] + _set_aside_sentence(fx)


SET_ASIDE_NAMED = 3


def _set_aside_sentence(fx: Facts) -> list[str]:
    """Runs recorded as ok that no engine could have measured (harness.collect.recordcheck), each
    named: a harness that did not check engine results kept them as ok."""
    runs = [r for r in fx.rec["runs"] if SET_ASIDE in (r.get("marks") or [])]
    named = [f"run {r.get('index')} ({r.get('arm')} on {r.get('prompt')}) set aside: "
             f"{str(r.get('error') or '').removeprefix(SET_ASIDE_PREFIX)}" for r in runs[:SET_ASIDE_NAMED]]
    if not named:
        return []
    more = f"; and {len(runs) - len(named)} more" if len(runs) > len(named) else ""
    return [f"Recorded as ok by a harness that did not check engine results: {'; '.join(named)}{more}."]


def _speedup_sentences(fx: Facts) -> tuple[list[str], str]:
    """The fastest speculative arm against classic decode, and the largest change."""
    parts: list[str] = []
    spec = [r for r in fx.rows if r.block > 1 and r.speedup and fx.engaged(r.arm, r.prompt)
            and not fx.profiled(r.arm)]   # profile mode slows itself on purpose
    # Arms are compared over the prompts every one of them ran: an incomplete session can leave
    # some arms with fewer prompts, and a mean over other prompts is not a like-for-like ranking.
    prompts_of: dict[str, set[str]] = {}
    for r in spec:
        prompts_of.setdefault(r.arm, set()).add(r.prompt)
    common = set.intersection(*prompts_of.values()) if prompts_of else set()
    partial = len({frozenset(v) for v in prompts_of.values()}) > 1
    if partial:
        spec = [r for r in spec if r.prompt in common]
    per_arm: dict[str, list[float]] = {}
    for r in spec:
        per_arm.setdefault(r.arm, []).append(r.speedup)
    short = ""
    if partial and not common:
        return ["No prompt was run by every speculative arm, so no arm is ranked."], "No arm ranked."
    if partial:
        parts.append(f"Not every arm ran every prompt, so the arms are ranked on the {len(common)} prompt"
                     f"{'' if len(common) == 1 else 's'} all of them ran ({names(sorted(common))}).")
    if per_arm:
        agg = {a: geomean(v) for a, v in per_arm.items()}
        best = max(agg, key=agg.get)
        row = next(r for r in spec if r.arm == best)
        classic_tps = next((c.tok_s_median for c in fx.rows if c.arm == row.classic_arm and c.prompt == row.prompt), None)
        x = agg[best]
        if len(per_arm[best]) > 1:   # one pair of tok/s would not match a mean over prompts
            tps = (f"geometric mean over {len(per_arm[best])} prompts: "
                   + ", ".join(f"{r.speedup:.2f}x on {r.prompt}" for r in spec if r.arm == best))
        else:
            tps = f"{row.tok_s_median:.1f} against {classic_tps:.1f} tok/s" if classic_tps else f"{row.tok_s_median:.1f} tok/s"
        if x > 1:
            sent = f"The fastest speculative arm is {best} at {x:.2f}x classic decode ({tps})"
        else:
            sent = f"No speculative arm beats classic decode: the best, {best}, runs at {x:.2f}x ({tps})"
        if not fx.shipping(best):
            ov = ", ".join(f"{k}={v}" for k, v in fx.overrides(best).items())
            sent += f", and it is {NOT_SHIPPING}" + (f" ({ov})" if ov else "")
        profiled = sorted({r.arm for r in fx.rows if r.block > 1 and r.speedup and fx.profiled(r.arm)})
        if profiled:
            # Said, not silently dropped: a profiled arm can read faster and still not be ranked.
            sent += f" (profile-mode arms, which slow themselves on purpose, are not ranked: {names(profiled)})"
        rows_best = [r for r in spec if r.arm == best]
        dets = sorted(r.min_detectable_change for r in rows_best if r.min_detectable_change is not None)
        if dets and any("inconclusive" in fl for r in rows_best for fl in r.flags):
            # Every prompt's figure: the first prompt's alone once hid a larger one.
            det = pct(dets[0]) if len(dets) == 1 or dets[0] == dets[-1] else f"{pct(dets[0])} to {pct(dets[-1])} across its prompts"
            sent += f"; the data cannot resolve a change that small (smallest resolvable change {det})"
        parts.append(sent + ".")
        short = sent + "."
        worst = max(agg, key=lambda a: abs(math.log(agg[a])))
        if worst != best:
            parts.append(f"The largest change against classic is {worst}'s {agg[worst]:.2f}x"
                         + ("" if fx.shipping(worst) else f" ({NOT_SHIPPING})") + ".")
    elif any(r.block > 1 and fx.engaged(r.arm, r.prompt) for r in fx.rows):
        parts.append("No classic arm of the same pairing ran, so no speedup is computed.")
        short = "No classic reference: no speedup."
    else:
        parts.append("No speculative arm engaged, so every figure is classic decode.")
        short = "No speculative arm engaged."
    return parts, short


def _one_override_sentence(fx: Facts) -> list[str]:
    parts: list[str] = []
    singles: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for o in one_override_pairs(fx):
        singles.setdefault((o["b"], o["a"], o["diff"]), []).append(o)
    if singles:
        parts.append("One override at a time: " + "; ".join(
            f"{b} ({diff}) runs at {geomean([o['ratio'] for o in v]):.2f}x {a}"
            + (" (not resolved)" if not any(o["resolved"] for o in v) else "")
            for (b, a, diff), v in singles.items()) + ".")
    return parts


def _probe_sentences(fx: Facts) -> tuple[list[str], str]:
    """What the exactness probe read here, and which arms declined to classic decode."""
    parts: list[str] = []
    short = ""
    declined = [a for a in fx.arm_order if fx.arms[a]["block"] > 1 and "declined" in fx.outcome(a)]
    passed = [a for a in fx.arm_order if "passed" in fx.outcome(a)]
    gate_short = []
    if declined:
        gate_short.append(f"the probe fails {fx.numerics_of(declined[:1])} ({names(declined)} declined to classic)")
    if passed:
        gate_short.append(f"passes {fx.numerics_of(passed)} ({names(passed)})")
    if gate_short:
        g = " and ".join(gate_short)
        short += " " + g[0].upper() + g[1:] + "."
    if declined:
        parts.append(f"The exactness probe fails here (\"{fx.reading(declined[0])}\", {fx.numerics(declined[0])}), "
                     f"so without an override {names(declined)} declined to classic decode.")
    if passed:
        parts.append(f"The probe passes for {names(passed)} ({fx.numerics_of(passed, with_word=False)}).")
    # An override engaged these although their probe read a difference: said here too, not only
    # in their labels (a headline that lists the passes alone reads as if every probe passed).
    overridden = [a for a in fx.arm_order if fx.arms[a]["block"] > 1 and "overridden" in fx.outcome(a)
                  and fx.reading(a)]
    if overridden:
        parts.append(f"An override engaged {names(overridden)} past the gate (its reading: "
                     f"\"{fx.reading(overridden[0])}\").")
    return parts, short


def _compare_sentence(fx: Facts, cmp_sec: dict[str, Any] | None) -> list[str]:
    parts: list[str] = []
    if cmp_sec is not None and not cmp_sec["cross_host"]:
        changes = cmp_sec["changes"]
        real = [c for c in changes if c.real]
        if real:
            big = max(real, key=lambda c: abs(math.log(c.judged.ratio)))
            # The ratio is the other record's over this one's: say which way it runs.
            parts.append(f"Going from this record to {cmp_sec['other']}, the largest resolved change (paired "
                         f"check, above the floor) is {fx.row_label(big.arm, big.prompt)} {big.component} "
                         f"{signed_pct(big.judged.ratio - 1.0)} ({big.verdict} in {cmp_sec['other']}).")
        elif changes:
            noise = sum(c.verdict == "noise" for c in changes)
            dets = [c.judged.detectable for c in changes if c.verdict == "inconclusive"
                    and c.judged.detectable is not None and math.isfinite(c.judged.detectable)]
            rest = [f"{noise} noise"] if noise else []
            n_inc = sum(c.verdict == "inconclusive" for c in changes)
            if n_inc:
                rest.append(f"{n_inc} inconclusive" + (f" (smallest detectable {pct(min(dets))} or more)" if dets else ""))
            below = sum(c.verdict == "below the floor" for c in changes)
            if below:
                rest.append(f"{below} below the floor")
            parts.append(f"Against {cmp_sec['other']}, no component change is resolved as faster or slower: "
                         + ", ".join(rest) + ".")
    return parts


def _label_sentences(fx: Facts, cmp_sec: dict[str, Any] | None = None) -> list[str]:
    parts: list[str] = []
    not_ship = [a for a in fx.arm_order if not fx.shipping(a)]
    if cmp_sec is not None:
        parts.append(cmp_sec["shipping"])       # both records' arms, not this one's alone
    else:
        parts.append(f"{len(not_ship)} of {len(fx.arm_order)} arms are {NOT_SHIPPING} ({names(not_ship)})."
                     if not_ship else f"Every arm is a {SHIPPING}.")
    flagged = [r for r in fx.rows if r.do_not_publish]
    if flagged:
        parts.append("Every row is flagged do not publish." if len(flagged) == len(fx.rows)
                     else f"{len(flagged)} of {len(fx.rows)} rows are flagged do not publish.")
    return parts


def shipping_status(fx: Facts) -> str:
    not_ship = [a for a in fx.arm_order if not fx.shipping(a)]
    if not not_ship:
        return f"all arms: {SHIPPING}"
    return f"{len(not_ship)} of {len(fx.arm_order)} arms {NOT_SHIPPING}"


