"""`harness pr-check BASE HEAD`: the two commits measured run by run, judged on paired ratios,
stored in asv, and rendered as Markdown for a pull-request comment.

The measuring is harness.ci.commits: one persistent worker per commit, runs alternating ABBA,
a time budget with the sequential stopping rule, each figure judged on the per-pair ratios
(harness.analyze.paired). Then each side's record is stored in asv's results for its commit
(`asv run --python=same --set-commit-hash`, the benchmarks reading the record instead of
running a session), so the dashboard and `asv compare` see every sample; asv's own table is
shown beside the paired verdict, not instead of it.

Exit status (the workflow maps it): 0 pass; 1 fail (a gated figure worse, a run failing at
head only, an output no longer byte-identical to base's); 3 inconclusive (this host could not
see the threshold on some gated figure: a neutral check, not a green one); 2 a problem to fix
(one line on stderr).
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import sys
from pathlib import Path
from typing import Any

from harness.analyze import envdiff, estimators, paired
from harness.analyze.contended import contention_lines
from harness.analyze.design import Design, share_text
from harness.analyze.summary import check_waiting_lines
from harness.ci.acks import acks_for_check, acks_path
from harness.ci.asvtool import (
    AsvConfig,
    CompareRow,
    configured_suite,
    load_config,
    load_figures,
    parse_compare,
    run_asv,
)
from harness.ci.commits import EXIT_WORDS, Comparison, compare_commits
from harness.ci.commitsout import summary_json
from harness.collect.files import check_output, check_writable, marked, write_output
from harness.core.errors import UserError

MARKER = "<!-- harness-pr-check:{machine} -->"   # one comment per host, updated in place
PR_CHECK_KIND = "harness.pr-check"
ASV_BENCH = {"ms/token": "track_ms_per_token", "ms/round": "track_ms_per_round"}


def ensure_machine(machine_file: Path, machine: str | None) -> dict[str, Any]:
    """The machine entry asv will use; registers this host when the file has none."""
    from harness.ci.machine import register, resolve_machine

    entry = resolve_machine(machine_file, machine)
    if entry is None:
        entry, warnings, path = register(None, machine, machine_file)
        for w in warnings:
            print(f"harness: warning: {w}", file=sys.stderr)
        print(f"harness: registered this host as asv machine '{entry['machine']}' in {path}", file=sys.stderr)
    return entry


def given_suite(given: str | None) -> Path | None:
    """The suite a check was given: --suite, else $HARNESS_ASV_SUITE; None when neither is set.
    One line when the file is not there (naming the variable when it came from there)."""
    if given:
        p = Path(given)
        if not p.is_file():
            raise UserError(f"{p}: suite file not found (pass --suite)")
        return p
    env = os.environ.get("HARNESS_ASV_SUITE")
    if not env:
        return None
    p = Path(env)
    if not p.is_file():
        raise UserError(f"{p}: suite file not found (named by $HARNESS_ASV_SUITE; fix or unset it, "
                        "or pass --suite)")
    return p


def suite_file(conf: AsvConfig, given: str | None) -> Path:
    """The suite pr-check measures: --suite, else $HARNESS_ASV_SUITE, else asv.conf.json's
    "harness_suite" (the one the asv benchmarks run)."""
    return given_suite(given) or configured_suite(conf)


def check_outputs(output: str | None, json_out: str | None) -> None:
    """--output (Markdown) and --json, checked before anything is measured: writable, not a
    directory, not a record or other harness file, not a file pr-check did not write (an earlier
    --output, by its marker, or --json, by its kind, may be replaced), and not the same file."""
    if output:
        check_output(Path(output), "Markdown (--output)", writer="pr-check")
    if json_out:
        check_output(Path(json_out), "JSON (--json)", own_kind=PR_CHECK_KIND, writer="pr-check")
    if output and json_out and Path(output).resolve() == Path(json_out).resolve():
        raise UserError(f"{output}: --output and --json name the same file; pass two paths")


# --- asv: store both sides, read its comparison ------------------------------------------

def store_in_asv(conf: AsvConfig, machine_file: Path, machine: str, sha: str, record: str,
                 echo: bool = False) -> None:
    """asv's results for `sha` from a finished record (no second measurement)."""
    # Replaying a record starts no engine, so asv may fork each benchmark from one process that
    # imported them once, whatever the project's asv.conf.json says (an older one may say
    # "spawn": an interpreter per benchmark, 9 s against 2 s here, per side).
    launch = ["--launch-method=forkserver"] if hasattr(os, "fork") else []
    res = run_asv(["run", "--python=same", "--set-commit-hash", sha, "--machine", machine,
                   "--record-samples", "--show-stderr", *launch], conf, machine_file,
                  env={"HARNESS_ASV_RECORD": str(Path(record).resolve())}, echo=echo)
    stored = [f for f in load_figures(conf, machine, sha).values()
              if f.benchmark.endswith("track_ms_per_token") and f.samples]
    if not stored:
        tail = " | ".join(res.output.strip().splitlines()[-3:])
        raise UserError(f"asv stored no ms/token samples for {sha[:12]} (exit {res.returncode}): {tail}")


def asv_rows(conf: AsvConfig, machine_file: Path, machine: str, base: str, head: str,
             factor: float) -> tuple[list[CompareRow], str]:
    # --python=same: the environment pr-check stores both sides in; asv compare otherwise lists
    # each benchmark again for every other environment with results of either commit (asv run's
    # virtualenv), 110 lines of one comment.
    comp = run_asv(["compare", "--python=same", "--factor", f"{factor:.4g}", "--machine", machine, base, head],
                   conf, machine_file, echo=False)
    return measured_rows(parse_compare(comp.output)), comp.output


def measured_rows(rows: list[CompareRow]) -> list[CompareRow]:
    """Each benchmark once: where asv still printed several environments, the one pr-check
    measured in (asv's "existing" environment of this Python, `run --python=same`)."""
    envs = {r.env for r in rows if r.env}
    keep = next((e for e in sorted(envs) if "/existing" in e), None) if len(envs) > 1 else None
    return [r for r in rows if keep is None or r.env in (keep, None)]


_ASV_MARKS = {"+": "worse", "-": "improved", "!": "newly failing", "*": "fixed", "x": "not comparable"}


def asv_section(rows: list[CompareRow], asv_table: str) -> list[str]:
    """asv's reading of the same samples, CodSpeed-style: one sentence of counts (regressions
    first, then the untouched), then only the rows that changed."""
    if not rows:
        return ["<details><summary>asv compare printed no table</summary>", "", "```",
                asv_table.strip()[-2000:], "```", "", "</details>"] if asv_table.strip() else []
    n = {w: sum(_ASV_MARKS.get(r.mark) == w for r in rows) for w in _ASV_MARKS.values()}
    untouched = sum(r.mark not in _ASV_MARKS for r in rows)
    counts = [f"{n['worse']} regression{'s' if n['worse'] != 1 else ''}",
              f"{untouched} untouched benchmark{'s' if untouched != 1 else ''}"]
    counts += [f"{k} {w}" for w, k in n.items() if k and w != "worse"]
    out = [f"asv over the same samples (Mann-Whitney U): {', '.join(counts)}."]
    changed = [r for r in rows if r.mark in _ASV_MARKS]
    if changed:
        out += ["", "| asv | benchmark | base | head | ratio |", "|---|---|---|---|---|"]
        out += [f"| {_ASV_MARKS[r.mark]} | `{r.name}` | {r.before} | {r.after} | {r.ratio} |" for r in changed]
    return out


def asv_word(rows: list[CompareRow], arm: str, figure: str) -> str:
    """asv's own reading of one of our figures (its Mann-Whitney over the same samples)."""
    bench = ASV_BENCH.get(figure)
    if figure.startswith("phase ms/round: "):
        bench = "track_phase_ms_per_round"
    if bench is None:
        return ""
    for r in rows:
        name = r.name
        if f".{bench}(" not in name:
            continue
        args = name.split("(", 1)[1]
        if not (args.startswith(f"'{arm}'") or args.startswith(f"'{arm} [")):
            continue
        if bench == "track_phase_ms_per_round" and f"'{figure.split(': ', 1)[1]}'" not in args:
            continue
        return {"+": "worse", "-": "better", "x": "not comparable", "!": "failing", "*": "fixed"}.get(
            r.mark, "changed, not significant" if r.insignificant_change else "no significant change")
    return ""


# --- rendering ---------------------------------------------------------------------------

def _num(x: float | None) -> str:
    return "-" if x is None else f"{x:.4g}"


def _looks_clause(d: Design) -> str:
    """How the level was spent over the looks, for the method paragraph."""
    if d.looks == 1:
        return "at one look"
    j = d.look or d.looks
    when = (f"{d.times[-1]:.0%} of the budget" if d.times and d.times[-1] < 1.0
            else "the end of sampling, spending what was left")
    return (f"over at most {d.looks} looks, spent by an O'Brien-Fleming-type boundary; this, the last look "
            f"taken, was look {j} at {when}")


def _probe_sentence(c: Comparison) -> str:
    """Say that the pairs were adjusted for the dispatch probe, where any gated figure was, and
    warn where the probe itself moved: the same fixed work ran at different speeds on the sides."""
    gated = [f for f in c.figures if f.gated and f.result.dispatch_probe]
    used = [f"{f.arm} {f.figure}" for f in gated if f.result.dispatch_probe.get("used")]
    moved = [f.result.dispatch_probe["probe_ratio"] for f in gated
             if f.result.dispatch_probe.get("why") == "the probe itself moved"]
    out = ""
    if used:
        out += (f"The suite times a fixed piece of MLX work after every run (the dispatch probe, `dispatch_probe = true`); "
                f"for {', '.join(used)} the part of each pair's log ratio the probe's own ratio predicts was taken "
                f"out first (docs/statistics.md, \"The dispatch probe\"), each figure's note says how much. ")
    if moved:
        lo, hi = min(moved) - 1.0, max(moved) - 1.0
        said = f"{lo:+.0%}" if abs(hi - lo) < 0.005 else f"{lo:+.0%} to {hi:+.0%}"
        out += (f"**The dispatch probe itself moved ({said}, head against base)**: the same fixed MLX work ran at "
                f"different speeds in the two sides' workers. Unless this change touches how MLX work is issued, "
                f"that is a per-process effect (two processes of one code can differ for their whole lives), "
                f"which the figures' ratios may carry too, in either direction; a check run again starts new "
                f"workers, and a suite's `restart_s` restarts them during a check so that the verdicts count it. ")
    return out


def _generations_sentence(c: Comparison) -> str:
    """Say that the suite restarted the workers during the check (`restart_s`), and which gated
    figures' worker generations differed (their intervals then rest on the generations)."""
    every = c.notes.get("restart_s")
    gated = [f for f in c.figures if f.gated and f.result.generations]
    if not every or not gated:
        return ""
    counts = sorted({f.result.generations["count"] for f in gated})
    said = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    differ = [f"{f.arm} {f.figure} ({f.result.df} degrees of freedom)" if f.result.df != 1
              else f"{f.arm} {f.figure} (1 degree of freedom)" for f in gated if f.result.generations.get("used")]
    out = (f"Both sides' workers were restarted every {every:g} s during the check (`restart_s`), so the pairs came "
           f"from {said} worker generations, each a fresh pair of processes; a figure whose generations differ "
           f"(F test at {estimators.GENERATIONS_PRETEST:.0%}) is judged on the generations, on their number less one "
           f"degrees of freedom, so that a per-process effect widens its interval rather than reading as a change")
    return out + (f": {', '.join(differ)}. " if differ else "; none did. ")


def render_markdown(c: Comparison, meta: dict[str, Any], rows: list[CompareRow] | None = None,
                    asv_table: str = "") -> str:
    d = c.design
    st = c.exit_status
    host = meta.get("host") or {}
    lines = [MARKER.format(machine=meta["machine"]),
             f"## Benchmark check: `{c.head[:8]}` against `{c.base[:8]}` on {meta['machine']}", "",
             f"**{c.headline()}**", ""]
    # A side contended past its share is said right under the verdict (analyze.contended).
    if said := contention_lines(c.notes.get("contention")):
        lines += [" ".join(x.strip() for x in said), ""]
    # Waiting that took the check is said before any figure, with the setting that governs it.
    if meta.get("waiting"):
        lines += [" ".join(x.strip() for x in meta["waiting"]), ""]
    # What differs between the two sides' environments comes before any figure.
    diffs = [envdiff.EnvDifference(**d) for d in c.notes.get("environment", [])]
    lines += [envdiff.diff_sentence(diffs, c.notes.get("environment_compared")), ""]
    if diffs:
        lines += ["| field | base | head |", "|---|---|---|"]
        lines += [f"| {d.what} | {d.a} | {d.b} |" for d in diffs] + [""]
    lines += [f"Host: {meta['machine']} (chip {host.get('chip', 'unknown')}, GPU generation "
              f"{host.get('gpu_generation', 'unknown')}). Both commits ran run by run, alternating "
              f"which goes first (ABBA), {c.outcome.get('rounds')} rounds; sampling stopped because "
              f"{c.outcome.get('stopped_because')}. Each figure is judged on the per-pair ratios head/base: "
              f"from {estimators.MIN_ROBUST_PAIRS} pairs a robust (Huber) location of their logs, so that a few runs the "
              f"host disturbed weigh little, with the geometric mean guarding the tails on {paired.TAIL_SHARE:.0%} of "
              f"the level (a change that slows only some runs is worse too); under {estimators.MIN_ROBUST_PAIRS} pairs "
              f"the geometric mean alone. Both together are tested at {share_text(d.alpha_per_test)} (false-alarm level {d.alpha * 100:g}% "
              f"{_looks_clause(d)}, split over {d.figures} gated figure(s)); across the gated figures the "
              f"false-discovery rate is controlled (Benjamini-Hochberg): a figure it selects out of R is judged, "
              f"and its interval drawn, at the level of R figures' share. \"smallest detectable\" is the "
              f"change this check catches with {d.power:.0%} power. Worse/improved needs a significant "
              f"change of at least {share_text(d.min_effect)}; unchanged needs the interval inside ±{share_text(d.threshold)} "
              f"and a smallest detectable change below it; anything else is inconclusive. "
              f"{_probe_sentence(c)}{_generations_sentence(c)}Exit status {st} ({EXIT_WORDS[st]}).", ""]
    lines += ["| verdict | figure | arm | base median | head median | pairs | change (interval) | "
              "smallest detectable | asv | note |", "|---|---|---|---|---|---|---|---|---|---|"]
    for f in c.figures:
        r = f.result
        v = r.verdict if f.gated else f"{r.verdict} (diagnostic)"
        if f.ack:
            v = "worse, acknowledged" if f.gated else "worse, acknowledged (diagnostic)"
        elif f.gated and r.verdict in ("worse", "improved", "inconclusive"):
            v = f"**{v}**"
        note = f"acknowledged: {f.ack}" if f.ack else r.note
        lines.append(f"| {v} | {f.figure} | {f.arm} | {_num(f.base_median)} | {_num(f.head_median)} | {r.n} | "
                     f"{paired.ratio_text(r)} | {paired.detectable_text(r)} | "
                     f"{asv_word(rows or [], f.arm, f.figure) or '-'} | {note} |")
    lines += ["", "Gated figures (decode ms/token of every arm; rejection rate and tokens per round of every "
                  "speculative arm, exact at temperature 0: any change is a change, no statistics) decide the "
                  "check; the diagnostics say where a change sits and do not."]
    acked = [f for f in c.figures if f.ack]
    if acked:
        lines += ["", "### Acknowledged changes", "",
                  "Covered by benchmarks/acknowledgements.toml for a commit of this range: shown, not failed.", ""]
        lines += [f"- {f.arm} {f.figure} {paired.ratio_text(f.result)}: {f.ack}" for f in acked]
    if c.newly_failing:
        lines += ["", "Runs failing at head only: " + ", ".join(c.newly_failing)]
    if c.identity:
        lines += ["", "### Byte identity against the base commit's output", "",
                  "| arm | prompt | identity | detail |", "|---|---|---|---|"]
        for r in c.identity:
            s = f"**{r.status}**" if r.status in ("differs", "nondeterministic") else r.status
            lines.append(f"| {r.arm} | {r.prompt} | {s} | {r.detail} |")
    not_shipping = {a: [x for x in ls if not x.startswith("shipping")] for a, ls in c.labels.items()}
    not_shipping = {a: ls for a, ls in not_shipping.items() if ls}
    if not_shipping:
        lines += ["", "### Not shipping configurations", ""]
        for a, ls in sorted(not_shipping.items()):
            lines += [f"- {a}: {s}" for s in ls]
    lines += ["", "### Load and time", ""]
    for side in ("base", "head"):
        n = (meta.get("load") or {}).get(side)
        if n:
            lines.append(f"- {side}: {n['runs']} measured runs, {n['failed']} failed, {n['contended']} contended, "
                         f"{n['quiet_gate_timeouts']} quiet-gate timeouts")
    duty = c.notes.get("check_duty") or {}
    if duty.get("duty_cycle") is not None:
        restarts = (f"; {duty['restarts']} restarts of both workers took {duty['restart_wall_s']:.0f} s"
                    if duty.get("restarts") else "")
        lines.append(f"- duty cycle {duty['duty_cycle']:.0%}: {duty['measured_run_s']:.0f} s of measured runs "
                     f"(both sides) in {duty['wall_s']:.0f} s, exports and model loads included{restarts}")
    for side, b in (c.notes.get("builds") or {}).items():
        # Each commit's engine was built in its own tree (harness.ci.build), or reused.
        how = f"built earlier in {b['wall_s']:.1f} s, reused" if b["cached"] else f"built in {b['wall_s']:.1f} s"
        lines.append(f"- {side} {b['commit'][:12]}: {how} (`{' && '.join(' '.join(a) for a in b['argv'])}`)")
    asv = asv_section(rows or [], asv_table)
    if asv:
        lines += ["", "### asv", "", *asv]
    lines += ["", "### Reproducing", "", "```", meta["command"], "```",
              f"Took {meta['duration_s']:.0f} s. Session records: `{c.records['base']}`, `{c.records['head']}`."]
    return "\n".join(lines) + "\n"


def load_notes(records: dict[str, dict[str, Any]]) -> dict[str, dict[str, int]]:
    """Per side: measured runs, failed, contended, quiet-gate timeouts."""
    out = {}
    for side, rec in records.items():
        runs = [r for r in rec.get("runs", []) if not r.get("warmup")]
        out[side] = {"runs": len(runs), "failed": sum(r.get("status") != "ok" for r in runs),
                     "contended": sum("contended" in (r.get("marks") or []) for r in runs),
                     "quiet_gate_timeouts": sum("quiet_gate_timeout" in (r.get("marks") or []) for r in runs)}
    return out


# --- the command -------------------------------------------------------------------------

def load_check_suite(path: Path, budget_s: float | None, threshold: float | None,
                     alpha: float | None = None) -> Any:
    from harness.collect.host.info import collect_host
    from harness.collect.host.profiles import resolve_host_settings
    from harness.collect.suite import load_suite, with_settings

    suite = resolve_host_settings(load_suite(path), collect_host())
    changes: dict[str, Any] = {}
    if budget_s is not None:
        if budget_s <= 0:
            raise UserError(f"--budget-s must be positive, got {budget_s:g}")
        changes["budget_s"] = budget_s
    if threshold is not None:
        if not 0.0 < threshold < 1.0:
            raise UserError(f"--threshold must be between 0 and 1 (0.10 means 10%), got {threshold:g}")
        changes["threshold"] = threshold
    if alpha is not None:
        if not 0.0 < alpha <= 0.5:
            raise UserError(f"--alpha must be in (0, 0.5] (0.05 means a 5% false-alarm level), got {alpha:g}")
        changes["alpha"] = alpha
    return with_settings(suite, **changes) if changes else suite


def pr_check(base: str, head: str, config: str | None = None, machine: str | None = None,
             machine_file: str | None = None, suite: str | None = None, budget_s: float | None = None,
             threshold: float | None = None, baselines: str | None = None, output: str | None = None,
             json_out: str | None = None, asv: bool = True, echo: bool = True, alpha: float | None = None) -> int:
    from rich.console import Console

    from harness.analyze.identity import BaselineStore
    from harness.ci.machine import default_machine_file

    check_outputs(output, json_out)
    conf = load_config(config)
    mf = Path(machine_file).expanduser() if machine_file else default_machine_file()
    the_suite = load_check_suite(suite_file(conf, suite), budget_s, threshold, alpha)
    store = BaselineStore.load(Path(baselines)) if baselines else None
    entry = ensure_machine(mf, machine) if asv else {"machine": machine or "local"}
    mname = entry["machine"]
    if asv:   # where asv will store both sides, checked before either is measured
        check_writable(conf.results_dir / mname / "results.json", "asv results")
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = conf.root / ".asv" / "pr-check" / f"{base.replace('/', '_')[:20]}-{head.replace('/', '_')[:20]}-{stamp}"
    console = Console(stderr=True) if echo else None
    cmp = compare_commits(conf.root, base, head, the_suite, work, store=store, console=console,
                          command=["harness", "pr-check", base, head])
    acks, covered = acks_for_check(conf.root, acks_path(conf), cmp.base, cmp.head)
    cmp.apply_acks(acks, covered)
    rows: list[CompareRow] = []
    table = ""
    if asv:
        for side, sha in (("base", cmp.base), ("head", cmp.head)):
            store_in_asv(conf, mf, mname, sha, cmp.records[side])
        rows, table = asv_rows(conf, mf, mname, cmp.base, cmp.head, 1.0 + the_suite.settings.threshold)
    records = {side: json.loads(Path(p).read_text(encoding="utf-8")) for side, p in cmp.records.items()}
    args = [base, head] + (["--machine", machine] if machine else []) + (["--suite", suite] if suite else [])
    args += [f"--budget-s {budget_s:g}"] if budget_s is not None else []
    args += [f"--threshold {threshold:g}"] if threshold is not None else []
    args += [f"--alpha {alpha:g}"] if alpha is not None else []
    meta = {"machine": mname, "host": entry, "command": "harness pr-check " + " ".join(args),
            "duration_s": cmp.duration_s, "load": load_notes(records),
            "waiting": check_waiting_lines(records, cmp.duration_s)}
    md = render_markdown(cmp, meta, rows, table)
    print(md, end="", flush=True)
    if output:
        write_output(Path(output), marked(md, "pr-check"), "Markdown (--output)")
    summary = {**summary_json(cmp), "kind": PR_CHECK_KIND, "machine": mname,
               "asv": [r.__dict__ for r in rows]}
    if json_out:
        write_output(Path(json_out), json.dumps(summary, indent=1, sort_keys=True, default=str) + "\n",
                     "JSON (--json)")
    print(json.dumps({k: summary[k] for k in ("kind", "base", "head", "machine", "exit_status", "headline",
                                               "duration_s", "rounds", "stopped")}, sort_keys=True), flush=True)
    return cmp.exit_status
