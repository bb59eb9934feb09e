"""`harness pr-check BASE HEAD`: asv continuous with the project's settings, judged honestly.

asv measures both commits (one harness session per commit and asv round; rounds alternate
head and base so a drift of the machine lands on both sides) and says, per figure, whether
the change is significant (Mann-Whitney U, p < 0.002) and beyond the factor. This command
parses what asv printed and stored (never its exit code: asv #884), adds what asv does not
say, and renders Markdown for a PR comment:

- worse / improved: asv found the change significant and beyond the threshold;
- unchanged: the 95% CI of the ratio of medians lies inside +-threshold AND the smallest
  change these samples could have resolved is below the threshold;
- inconclusive: anything else. On a noisy host "no significant change" is not "unchanged":
  when the smallest detectable change exceeds the threshold, the check could not have seen a
  regression of that size, and says so.

Byte identity: each arm's output at HEAD is compared with the same arm's output at BASE (its
own baseline for this PR), from the sessions' records.

Exit status: 0 nothing significantly worse, nothing newly failing, every arm byte-identical to
BASE; 1 otherwise; 2 a problem to fix (one line on stderr).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import stats
from harness.asvtool import AsvConfig, CompareRow, Figure, load_config, load_figures, parse_compare, run_asv
from harness.errors import UserError

DEFAULT_FACTOR = 1.10
DEFAULT_ROUNDS = 2
MARKER = "<!-- harness-pr-check:{machine} -->"   # one comment per host, updated in place

FIGURE_NAMES = {
    "track_ms_per_token": "decode ms/token",
    "track_identity_mismatches": "identity mismatches vs own baseline",
    "track_ms_per_round": "ms/round",
    "track_rejection_rate": "rejection rate (1 - acceptance)",
    "track_round_cost_classic_steps": "round cost in classic steps",
    "track_phase_ms_per_round": "phase ms/round",
}
ORDER = ("failed", "worse", "identity", "improved", "fixed", "inconclusive", "not comparable",
         "unchanged", "failed on both", "n/a")


# --- judging one figure ----------------------------------------------------------------

@dataclass
class Judgement:
    name: str
    figure: str
    arm: str
    unit: str | None
    verdict: str
    base: float | None = None
    head: float | None = None
    n_base: int = 0
    n_head: int = 0
    ratio: float | None = None
    ratio_lo: float | None = None
    ratio_hi: float | None = None
    detectable: float | None = None     # smallest relative change these samples resolve
    asv: str = ""                       # asv's own reading, in words
    note: str = ""

    @property
    def fails_check(self) -> bool:
        return self.verdict in ("failed", "worse")


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def asv_words(row: CompareRow | None) -> str:
    if row is None:
        return "no comparison row"
    return {"+": "worse (significant)", "-": "better (significant)", "x": "not comparable",
            "!": "newly failing", "*": "fixed"}.get(
        row.mark, "changed, not significant" if row.insignificant_change else "no significant change")


def asv_mark_from_library(base: Figure, head: Figure, factor: float) -> str:
    """asv's own rule (asv.commands.compare._is_result_better), for a row asv did not print."""
    from asv.commands.compare import _is_result_better

    a, b = base.value, head.value
    if not (_finite(a) and _finite(b)):
        return ""
    ss_a, ss_b = (base.stats, base.samples), (head.stats, head.samples)
    if _is_result_better(b, a, ss_b, ss_a, factor):
        return "-"
    if _is_result_better(a, b, ss_a, ss_b, factor):
        return "+"
    return ""


def judge(base: Figure | None, head: Figure | None, row: CompareRow | None,
          factor: float = DEFAULT_FACTOR) -> Judgement:
    ref = head or base
    assert ref is not None
    fig = FIGURE_NAMES.get(ref.benchmark.rsplit(".", 1)[-1], ref.benchmark.rsplit(".", 1)[-1])
    arm = ref.params[0] if ref.params else ""
    if len(ref.params) > 1:
        fig = f"{fig}: {', '.join(ref.params[1:])}"
    j = Judgement(ref.name, fig, arm, ref.unit, "n/a", asv=asv_words(row))
    t = factor - 1.0
    if base is not None and _finite(base.value):
        j.base = float(base.value)
        j.n_base = len(base.samples or [])
    if head is not None and _finite(head.value):
        j.head = float(head.value)
        j.n_head = len(head.samples or [])
    if head is None or base is None:
        j.verdict, j.note = "not comparable", ("new at head" if base is None else "gone at head")
        return j
    if head.failed:
        j.verdict = "failed on both" if base.failed else "failed"
        j.note = _first_line(head.stderr) or "the benchmark failed at head"
        return j
    if base.failed:
        j.verdict, j.note = "fixed", "failed at base, runs at head"
        return j
    if head.skipped and base.skipped:
        return j  # does not apply to this arm on this host (e.g. classic decode has no rounds)
    if head.skipped or base.skipped:
        j.verdict = "inconclusive"
        j.note = "skipped at " + ("head" if head.skipped else "base") + " only (see the benchmark's output)"
        return j
    if base.version != head.version:
        j.verdict, j.note = "not comparable", "the figure's definition changed (benchmark version)"
        return j
    mark = row.mark if row is not None else asv_mark_from_library(base, head, factor)
    if row is None:
        j.asv = asv_words(CompareRow(mark, "", "", "", ref.name, None)) + " (computed with asv's rule)"
    a, b = base.samples, head.samples
    if a and b:
        _ratio_stats(j, a, b)
    if mark == "+":
        j.verdict = "worse"
        return j
    if mark == "-":
        j.verdict = "improved"
        return j
    if not a or not b:
        j.verdict, j.note = "inconclusive", "no samples stored (asv needs --record-samples)"
        return j
    if j.detectable is None:
        same = len(set(a)) == 1 and set(a) == set(b)
        j.verdict = "unchanged" if same else "inconclusive"
        j.note = "" if same else "a zero median: no ratio to judge"
        return j
    if j.detectable > t:
        j.verdict = "inconclusive"
        j.note = (f"this host's noise: the smallest change these samples could show is "
                  f"{j.detectable:.1%}, above the {t:.0%} threshold")
        return j
    v = stats.verdict(j.ratio_lo, j.ratio_hi, t)
    if v == "unchanged":
        j.verdict = "unchanged"
    else:
        j.verdict = "inconclusive"
        j.note = f"the 95% CI reaches beyond ±{t:.0%}, but asv's test did not find it significant"
    return j


def _ratio_stats(j: Judgement, base: list[float], head: list[float]) -> None:
    try:
        j.ratio, j.ratio_lo, j.ratio_hi = stats.bootstrap_ratio_ci(head, base)
        if min(len(base), len(head)) >= 2:
            j.detectable = stats.min_detectable_change(head, base)
    except ValueError:
        j.ratio = j.ratio_lo = j.ratio_hi = j.detectable = None  # zero medians (identity, rejection 0)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    errs = [ln for ln in lines if "Error" in ln or "failed" in ln]
    return (errs or lines or [""])[-1][:300]


# --- identity against the base commit, from the session records --------------------------

@dataclass
class IdentityRow:
    arm: str
    prompt: str
    status: str          # identical | differs | unknown | nondeterministic
    detail: str = ""


def _records_by_commit(records_dir: Path, commits: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    """side ("base"/"head") -> the records its sessions wrote (file names start with the commit)."""
    out: dict[str, list[dict[str, Any]]] = {side: [] for side in commits}
    if not records_dir.is_dir():
        return out
    for p in sorted(records_dir.glob("*.json")):
        for side, sha in commits.items():
            if p.name.startswith(sha[:12]):
                try:
                    out[side].append(json.loads(p.read_text(encoding="utf-8")))
                except (OSError, ValueError):
                    pass
    return out


def _outputs(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for rec in records:
        for r in rec.get("runs", []):
            if r.get("status") == "ok" and r.get("token_ids") is not None:
                out.setdefault((r["arm"], r["prompt"]), []).append(r)
    return out


def identity_rows(records: dict[str, list[dict[str, Any]]]) -> list[IdentityRow]:
    from harness.identity import compare_output, describe

    base, head = _outputs(records.get("base", [])), _outputs(records.get("head", []))
    rows = []
    for key in sorted(set(base) | set(head)):
        arm, prompt = key
        if key not in base or key not in head:
            rows.append(IdentityRow(arm, prompt, "unknown",
                                    f"no successful run at {'base' if key not in base else 'head'}"))
            continue
        distinct_head = {r.get("text_sha256") for r in head[key]}
        distinct_base = {r.get("text_sha256") for r in base[key]}
        ref = base[key][0]
        if len(distinct_base) > 1:
            rows.append(IdentityRow(arm, prompt, "nondeterministic",
                                    f"{len(distinct_base)} different outputs within base's own runs"))
            continue
        diffs = [compare_output(r["token_ids"], r.get("text"), {"token_ids": ref["token_ids"], "text": ref.get("text")})
                 for r in head[key]]
        bad = [d for d in diffs if d["status"] != "identical"]
        if bad:
            rows.append(IdentityRow(arm, prompt, "differs",
                                    f"{len(bad)} of {len(diffs)} head runs: {describe(bad[0])}"))
        elif len(distinct_head) > 1:
            rows.append(IdentityRow(arm, prompt, "nondeterministic", "head's runs disagree"))
        else:
            rows.append(IdentityRow(arm, prompt, "identical", f"{len(diffs)} head runs vs base"))
    return rows


def load_notes(records: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Per side: runs, contended runs, quiet-gate timeouts; per arm: the runs' labels."""
    notes: dict[str, Any] = {"sides": {}, "labels": {}}
    for side, recs in records.items():
        runs = [r for rec in recs for r in rec.get("runs", []) if not r.get("warmup")]
        notes["sides"][side] = {
            "sessions": len(recs), "runs": len(runs),
            "failed": sum(r.get("status") != "ok" for r in runs),
            "contended": sum("contended" in (r.get("marks") or []) for r in runs),
            "quiet_gate_timeouts": sum("quiet_gate_timeout" in (r.get("marks") or []) for r in runs),
        }
        for r in runs:
            notes["labels"].setdefault(r["arm"], set()).add(r.get("label") or "unlabelled")
    notes["labels"] = {k: sorted(v) for k, v in notes["labels"].items()}
    return notes


# --- rendering ---------------------------------------------------------------------------

def _num(x: float | None) -> str:
    if x is None:
        return "-"
    if x == 0:
        return "0"
    return f"{x:.4g}"


def _pct(r: float | None) -> str:
    return "-" if r is None else f"{(r - 1.0) * 100:+.1f}%"


def render_markdown(judgements: list[Judgement], ident: list[IdentityRow], meta: dict[str, Any]) -> str:
    t = meta["factor"] - 1.0
    shown = [j for j in judgements if j.verdict != "n/a"]
    shown.sort(key=lambda j: (ORDER.index(j.verdict) if j.verdict in ORDER else 99, j.figure, j.arm))
    count = {v: sum(j.verdict == v for j in shown) for v in ORDER}
    ident_bad = [r for r in ident if r.status in ("differs", "nondeterministic")]
    failing = meta["exit_status"] != 0
    lines = [MARKER.format(machine=meta["machine"]),
             f"## Benchmark check: `{meta['head'][:8]}` against `{meta['base'][:8]}` on {meta['machine']}",
             "",
             f"**{'FAIL' if failing else 'pass'}**: "
             + ", ".join(f"{count[v]} {v}" for v in ("worse", "failed", "improved", "unchanged", "inconclusive",
                                                   "not comparable", "fixed") if count.get(v))
             + (f"; {len(ident_bad)} arm/prompt output(s) no longer byte-identical to base" if ident_bad else
                "; every arm byte-identical to base" if ident else "; byte identity unknown (no session records)"),
             ""]
    host = meta.get("host") or {}
    lines += [f"Host: {meta['machine']} (chip {host.get('chip', 'unknown')}, GPU generation "
              f"{host.get('gpu_generation', 'unknown')}, peak bandwidth {host.get('peak_bandwidth', 'unknown peak')}). "
              f"Threshold ±{t:.0%} (asv --factor {meta['factor']:.2f}); asv's significance: Mann-Whitney U "
              f"at p < 0.002 on the stored samples; {meta['rounds']} asv round(s) per commit, alternating head "
              f"and base. \"unchanged\" needs the ratio's 95% CI inside ±{t:.0%} and a smallest detectable "
              f"change below it; otherwise the verdict is \"inconclusive\".", ""]
    mpt = [j.detectable for j in shown if j.figure == FIGURE_NAMES["track_ms_per_token"] and j.detectable is not None]
    if mpt:
        worst = max(mpt)
        lines += [f"Noise: on this run the smallest change in decode ms/token these samples could resolve was "
                  f"{min(mpt):.1%} to {worst:.1%} depending on the arm"
                  + (f" — above the threshold, so a {t:.0%} regression could have gone unseen." if worst > t else "."),
                  ""]
    lines += ["| verdict | figure | arm | base | head | change (95% CI) | smallest detectable | asv | note |",
              "|---|---|---|---|---|---|---|---|---|"]
    for j in shown:
        ci = ("-" if j.ratio is None else
              f"{_pct(j.ratio)} ({_pct(j.ratio_lo)} to {_pct(j.ratio_hi)})")
        unit = f" {j.unit}" if j.unit else ""
        v = f"**{j.verdict}**" if j.verdict in ("worse", "failed", "improved") else j.verdict
        lines.append(f"| {v} | {j.figure} | {j.arm} | {_num(j.base)}{unit} (n={j.n_base}) | "
                     f"{_num(j.head)}{unit} (n={j.n_head}) | {ci} | "
                     f"{'-' if j.detectable is None else f'±{j.detectable:.1%}'} | {j.asv} | {j.note} |")
    skipped = [j for j in judgements if j.verdict == "n/a"]
    if skipped:
        lines += ["", f"{len(skipped)} figure(s) do not apply on this host and were skipped on both sides "
                      "(e.g. rounds of an arm whose exactness gate declined)."]
    if ident:
        lines += ["", "### Byte identity against the base commit's output", "",
                  "| arm | prompt | identity | detail |", "|---|---|---|---|"]
        for r in ident:
            st = f"**{r.status}**" if r.status in ("differs", "nondeterministic") else r.status
            lines.append(f"| {r.arm} | {r.prompt} | {st} | {r.detail} |")
    labels = meta.get("notes", {}).get("labels", {})
    not_shipping = {a: ls for a, ls in labels.items() if any(not s.startswith("shipping") for s in ls)}
    if not_shipping:
        lines += ["", "### Not shipping configurations", ""]
        for a, ls in sorted(not_shipping.items()):
            for s in ls:
                if not s.startswith("shipping"):
                    lines.append(f"- {a}: {s}")
    sides = meta.get("notes", {}).get("sides", {})
    if sides:
        lines += ["", "### Load during the sessions", ""]
        for side in ("base", "head"):
            s = sides.get(side)
            if s:
                lines.append(f"- {side}: {s['sessions']} session(s), {s['runs']} measured runs, {s['failed']} failed, "
                             f"{s['contended']} contended, {s['quiet_gate_timeouts']} quiet-gate timeouts")
    lines += ["", "### Reproducing", "", "```", meta["command"], "```",
              f"Took {meta['duration_s']:.0f} s. Results: `{meta['results_dir']}/{meta['machine']}/`; "
              f"session records: `{meta['records_dir']}`."]
    return "\n".join(lines) + "\n"


# --- the command -------------------------------------------------------------------------

def _rev(conf: AsvConfig, name: str) -> str:
    import git

    try:
        repo = git.Repo(conf.root if (conf.root / ".git").exists() else conf.root, search_parent_directories=True)
        return repo.commit(name).hexsha
    except (git.BadName, ValueError, git.GitCommandError) as e:
        raise UserError(f"unknown commit '{name}' in {conf.root} ({type(e).__name__})") from None
    except git.InvalidGitRepositoryError:
        raise UserError(f"{conf.root}: not a git repository") from None


def _suite_repetitions(conf: AsvConfig) -> int:
    path = Path(os.environ.get("HARNESS_ASV_SUITE") or conf.benchmark_dir / "suite.toml")
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        return int(tomllib.loads(path.read_text(encoding="utf-8")).get("repetitions", 5))
    except (OSError, ValueError) as e:
        raise UserError(f"{path}: cannot read the asv suite: {e}") from None


def ensure_machine(machine_file: Path, machine: str | None) -> dict[str, Any]:
    """The machine entry asv will use; registers this host when the file has none."""
    from harness.machine import register, resolve_machine

    entry = resolve_machine(machine_file, machine)
    if entry is None:
        entry, warnings, path = register(None, machine, machine_file)
        for w in warnings:
            print(f"harness: warning: {w}", file=sys.stderr)
        print(f"harness: registered this host as asv machine '{entry['machine']}' in {path}", file=sys.stderr)
    return entry


def benchmarked_envs(output: str) -> set[str]:
    import re
    return set(re.findall(r"Benchmarking (\S+)", output))


def pr_check(base: str, head: str, config: str | None = None, machine: str | None = None,
             machine_file: str | None = None, factor: float = DEFAULT_FACTOR, rounds: int = DEFAULT_ROUNDS,
             baselines: str | None = None, output: str | None = None, json_out: str | None = None,
             run: bool = True, echo: bool = True) -> int:
    from harness.machine import default_machine_file

    t0 = time.monotonic()
    if not (1.0 < factor < 2.0):
        raise UserError(f"--factor must be between 1 and 2 (1.10 means a 10% threshold), got {factor}")
    if rounds < 1:
        raise UserError(f"--rounds must be at least 1, got {rounds}")
    conf = load_config(config)
    base_sha, head_sha = _rev(conf, base), _rev(conf, head)
    mf = Path(machine_file).expanduser() if machine_file else default_machine_file()
    entry = ensure_machine(mf, machine)
    mname = entry["machine"]
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    work = conf.root / ".asv" / "pr-check" / f"{base_sha[:8]}-{head_sha[:8]}-{stamp}"
    records_dir = work / "records"
    reps = max(1, math.ceil(_suite_repetitions(conf) / rounds))
    env = {"HARNESS_ASV_RECORDS": str(records_dir), "HARNESS_ASV_REPETITIONS": str(reps)}
    if baselines:
        env["HARNESS_BASELINES"] = str(Path(baselines).resolve())
    envs: set[str] = set()
    if run:
        records_dir.mkdir(parents=True, exist_ok=True)
        cont = run_asv(["continuous", "--factor", f"{factor}", "--machine", mname, "--show-stderr",
                        "--interleave-rounds", "-a", f"rounds={rounds}", base_sha, head_sha],
                       conf, mf, env=env, echo=echo)
        envs = benchmarked_envs(cont.output)
        (work / "asv-continuous.log").write_text(cont.output)
        if not envs:
            tail = " | ".join(cont.output.strip().splitlines()[-3:])
            raise UserError(f"asv continuous did not benchmark anything (exit {cont.returncode}): {tail}")
    comp = run_asv(["compare", "--factor", f"{factor}", "--machine", mname, base_sha, head_sha],
                   conf, mf, echo=False)
    rows = parse_compare(comp.output)
    if not rows and "Did not find results" in comp.output:
        raise UserError(f"no asv results for both commits on machine {mname}: "
                        + comp.output.strip().splitlines()[-1])
    judgements = _judge_all(conf, mname, base_sha, head_sha, rows, envs, factor)
    records = _records_by_commit(records_dir, {"base": base_sha, "head": head_sha}) if run else {}
    ident = identity_rows(records) if records else []
    notes = load_notes(records) if records else {}
    failing = any(j.fails_check for j in judgements) or any(r.status in ("differs", "nondeterministic") for r in ident)
    status = 1 if failing else 0
    cmd = "harness pr-check " + " ".join([base, head] + (["--machine", machine] if machine else [])
                                         + ([f"--factor {factor}"] if factor != DEFAULT_FACTOR else []))
    meta = {"base": base_sha, "head": head_sha, "machine": mname, "host": entry, "factor": factor,
            "rounds": rounds, "exit_status": status, "command": cmd, "notes": notes,
            "duration_s": time.monotonic() - t0, "results_dir": str(conf.results_dir.relative_to(conf.root))
            if conf.results_dir.is_relative_to(conf.root) else str(conf.results_dir),
            "records_dir": str(records_dir)}
    md = render_markdown(judgements, ident, meta)
    print(md, end="", flush=True)
    if output:
        Path(output).write_text(md, encoding="utf-8")
    summary = {"kind": "harness.pr-check", "base": base_sha, "head": head_sha, "machine": mname,
               "exit_status": status, "duration_s": round(meta["duration_s"], 1), "factor": factor,
               "verdicts": {v: sum(j.verdict == v for j in judgements) for v in ORDER},
               "identity": {r.status: sum(x.status == r.status for x in ident) for r in ident},
               "figures": [j.__dict__ for j in judgements]}
    if json_out:
        Path(json_out).write_text(json.dumps(summary, indent=1, sort_keys=True, default=str) + "\n")
    print(json.dumps({k: summary[k] for k in ("kind", "base", "head", "machine", "exit_status", "duration_s",
                                               "verdicts", "identity")}, sort_keys=True), flush=True)
    return status


def _judge_all(conf: AsvConfig, machine: str, base_sha: str, head_sha: str, rows: list[CompareRow],
               envs: set[str], factor: float) -> list[Judgement]:
    base = load_figures(conf, machine, base_sha)
    head = load_figures(conf, machine, head_sha)
    if envs:  # only the environment(s) this check ran in
        base = {k: f for k, f in base.items() if f.env in envs}
        head = {k: f for k, f in head.items() if f.env in envs}
    by_name: dict[str, CompareRow] = {}
    for r in rows:
        if r.env is None or not envs or r.env.split("/", 1)[-1] in envs:
            by_name[r.name] = r
    return [judge(base.get(n), head.get(n), by_name.get(n), factor) for n in sorted(set(base) | set(head))]


def cmd_pr_check(args: argparse.Namespace) -> int:
    return pr_check(args.base, args.head, config=args.config, machine=args.machine,
                    machine_file=args.machine_file, factor=args.factor, rounds=args.rounds,
                    baselines=args.baselines, output=args.output, json_out=args.json,
                    run=not args.no_run)


def add_cli(sub: Any) -> None:
    p = sub.add_parser("pr-check", help="asv continuous BASE HEAD, judged and rendered as Markdown for a PR",
                       epilog="exit status: 0 nothing significantly worse or newly failing, and every arm "
                              "byte-identical to BASE; 1 a figure significantly worse, a benchmark newly "
                              "failing, or an arm's output differing from BASE's; 2 a problem to fix "
                              "(one line on stderr). 'inconclusive' (noise too high to tell) does not fail.")
    p.add_argument("base", help="the commit to compare against (e.g. origin/main)")
    p.add_argument("head", help="the commit under test")
    p.add_argument("--config", help="asv config (default: ./asv.conf.json)")
    p.add_argument("--machine", help="asv machine name (default: the only one in the machine file)")
    p.add_argument("--machine-file", help="asv machine file (default: ~/.asv-machine.json; "
                                          "this host is registered there if it is empty)")
    p.add_argument("--factor", type=float, default=DEFAULT_FACTOR,
                   help="threshold as asv's factor: 1.10 = a 10%% change (default)")
    p.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS,
                   help="asv rounds per commit, alternating head and base; the suite's repetitions "
                        "are split over them (default 2)")
    p.add_argument("--baselines", help="arms' own baselines for the identity figure (default: "
                                       "$ASV_CONF_DIR/.asv/baselines.json)")
    p.add_argument("--output", help="write the Markdown here too (the workflow posts it)")
    p.add_argument("--json", help="write every judgement as JSON here")
    p.add_argument("--no-run", action="store_true",
                   help="judge the results already stored, without running asv continuous")
    p.set_defaults(func=cmd_pr_check)
