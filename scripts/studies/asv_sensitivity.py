"""What does the paired check catch on this host, how often does it cry wolf, and how long does
it take? A sensitivity curve: detection rate against the true effect, false alarms over A/A.

Builds a scratch copy of the project (tests/asv_scratch.py) with a base commit, a comment-only
commit (A/A: no code differs) and one commit per calibrated fault (the engine adds F of a
target decode forward's own work to every target decode forward, set in code as the default of
SPECDEC_INJECT_WORK: a shipping configuration, no output byte changes). Then runs the check
(`harness pr-check`, with asv storage, or `harness compare-commits`) CHECKS times per head and
prints, per head: how often the check failed (exit 1) and was inconclusive (exit 3), the
classic ms/token verdicts, the smallest detectable change, the duration, and the effect the
fault really had on this host (all checks' pairs pooled: F is a fraction of a forward's work,
not of a decode step's wall time, so the true effect is measured, not assumed). Over the A/A checks it also asks whether two worker processes of the same code
differ by more than their pairs' noise says (a per-process effect, which the per-pair test
does not model): the variance of each check's mean log-ratio over its standard error.

    PYTHONPATH=. .venv/bin/python scripts/studies/asv_sensitivity.py --work 0.07 --checks 10 --aa 10
    PYTHONPATH=. .venv/bin/python scripts/studies/asv_sensitivity.py --command compare-commits \
        --suite my-gpu-suite.toml --work 0.03 --checks 1 --aa 5 --budget-s 100 --threshold 0.02

The suite defaults to benchmarks/suite.toml (what CI's pr-check uses). Writes --out (default
build/artifacts/asv-sensitivity.json).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "tests")]

from asv_scratch import commit_all, copy_tracked, git, harness_argv, run_env, slow_engine  # noqa: E402


def build(root: Path, works: list[float]) -> dict[str, str]:
    proj = root / "project"
    proj.mkdir(parents=True)
    copy_tracked(proj)
    git(proj, "init", "-q", "-b", "main")
    shas = {"base": commit_all(proj, "base")}
    engine = proj / "specdec" / "engine.py"
    original = engine.read_text()
    engine.write_text(original + "# A comment-only change.\n")
    shas["A/A"] = commit_all(proj, "comment only")
    for w in works:
        git(proj, "checkout", "-q", shas["base"])
        git(proj, "checkout", "-q", "-b", f"work-{w:g}")
        slow_engine(proj, w)
        shas[f"F={w:g}"] = commit_all(proj, f"fault: {w:g} of a target forward's work added to each")
    git(proj, "checkout", "-q", "main")
    return shas


def one_check(cmd: str, proj: Path, env: dict, base: str, head: str, out: Path, extra: list[str],
              mf: Path) -> dict:
    argv = harness_argv(cmd, base, head, *extra)
    if cmd == "pr-check":
        argv += ["--machine", "sensitivity", "--machine-file", str(mf), "--json", str(out)]
    t0 = time.monotonic()
    r = subprocess.run(argv, cwd=proj, env=env, capture_output=True, text=True)
    row: dict = {"exit": r.returncode, "duration_s": round(time.monotonic() - t0, 1)}
    data = None
    if cmd == "pr-check" and out.exists():
        data = json.loads(out.read_text())
    elif cmd == "compare-commits" and r.stdout.strip():
        try:
            data = json.loads(r.stdout.strip().splitlines()[-1])
        except ValueError:
            data = None
    if data is None:
        row["error"] = (r.stderr or r.stdout).strip().splitlines()[-1:]
        return row
    row["headline"] = data["headline"]
    row["rounds"] = data.get("rounds")
    row["stopped"] = data.get("stopped")
    row["worse_gated"] = [f"{f['arm']} {f['figure']}" for f in data["figures"] if f["gated"] and f["verdict"] == "worse"]
    for f in data["figures"]:
        # classic's timing verdict, not its exact figures (work counters), which are gated too
        if f["gated"] and f["arm"] == "classic" and f["figure"] == "ms/token":
            row.update(classic_verdict=f["verdict"], classic_ratio=f["ratio"], classic_n=f["n"],
                       classic_detectable=f["detectable_value"], classic_generations=f.get("generations"))
    row["pairs"] = pair_stats(data.get("records") or {}, data.get("design"))
    row["restarts"] = restarts(data.get("records") or {})
    return row


def restarts(records: dict) -> dict:
    """Each side's worker restarts (suite restart_s): the round each came before and what it cost."""
    out = {}
    for side, path in records.items():
        try:
            gens = json.loads(Path(path).read_text()).get("restarts") or []
        except (OSError, ValueError):
            continue
        if gens:
            out[side] = [{k: g.get(k) for k in ("before_round", "warmup_wall_s", "wall_s")} for g in gens]
    return out


def pair_stats(records: dict, design: dict | None = None) -> dict:
    """Per arm, the check's paired log-ratios of ms/token: their number, mean, sd and serial
    correlation; with the dispatch measurement (suite `dispatch_measurement`), its log ratios too, and the same pairs
    judged at the check's last design with and without it (what the probe bought)."""
    import numpy as np

    from harness.analyze import comparisons
    from harness.analyze.estimators import serial_inflation

    runs = {}
    for side, path in records.items():
        try:
            runs[side] = json.loads(Path(path).read_text())["runs"]
        except (OSError, ValueError, KeyError):
            return {}
    if set(runs) != {"base", "head"}:
        return {}
    out = {}
    sp = comparisons.pair_sessions(runs["base"], runs["head"])
    table, probes = sp.table, sp.probes
    for (arm, fig), (xs, ys) in table.items():
        logs = [math.log(y / x) for x, y in zip(xs, ys) if x > 0 and y > 0]
        if fig == comparisons.MS_PER_TOKEN and len(logs) >= 3:
            # the MAD's normal-equivalent sd beside the sd: far below it means heavy tails (a few
            # stalled runs), where a rank-based estimator would resolve more; the raw logs keep
            # that question answerable from a check's output alone
            med = statistics.median(logs)
            infl, r1 = serial_inflation(np.asarray(logs))
            out[arm] = {"n": len(logs), "mean_log": statistics.fmean(logs), "sd_log": statistics.stdev(logs),
                        "sd_log_mad": 1.4826 * statistics.median(abs(x - med) for x in logs),
                        "serial_inflation": infl, "autocorr": r1,
                        "logs": [round(x, 5) for x in logs]}
            if (bl := sp.blocks.get((arm, fig))) is not None:
                out[arm]["generations"] = bl   # each pair's worker generations (suite restart_s)
            if (pr := probes.get((arm, fig))) is not None and design:
                out[arm].update(probe_gain(xs, ys, pr, design))
    return out


def probe_gain(xs: list[float], ys: list[float], pr: tuple[list[float], list[float]], design: dict) -> dict:
    """One figure's pairs judged with and without the probe, at the check's own design."""
    from harness.analyze import paired
    from harness.analyze.design import Design

    d = Design(**{k: design[k] for k in ("threshold", "alpha", "looks", "figures", "power", "floor",
                                         "selected", "look") if k in design},
               # the looks' budget shares and rounds, where the check recorded them
               **{k: tuple(design[k]) for k in ("times", "sizes") if design.get(k)})
    got = {"probe_logs": [round(math.log(q / p), 5) for p, q in zip(*pr)]}
    for name, probe in (("with_probe", pr), ("without_probe", None)):
        r = paired.analyze(xs, ys, d, probe)
        got[name] = {"ratio": r.ratio, "detectable": r.detectable, "verdict": r.verdict,
                     "spread": r.spread, "inflation": r.inflation, "pairs_needed": paired.plan(r, d)}
    got["probe"] = paired.analyze(xs, ys, d, pr).dispatch_measurement
    return got


def process_effect(rows: list[dict]) -> dict | None:
    """Do two worker processes of the same code differ by more than their pairs' noise says?
    Over A/A checks (one pair of fresh workers each) and every arm: z = a check's mean
    log-ratio over its standard error (the verdict's own, serial correlation allowed for), whose
    variance is (n-1)/(n-3) when only the pairs' noise is at work; and the sd of a per-check
    effect that would explain the excess (method of moments: mean of m^2 - se^2)."""
    stats = [a for r in rows for a in (r.get("pairs") or {}).values() if a["n"] > 3]
    if len(stats) < 4:
        return None
    ses = [a["sd_log"] * a.get("serial_inflation", 1.0) / math.sqrt(a["n"]) for a in stats]
    zs = [a["mean_log"] / se for a, se in zip(stats, ses)]
    expected = statistics.fmean((a["n"] - 1) / (a["n"] - 3) for a in stats)
    excess = statistics.fmean(a["mean_log"] ** 2 - se ** 2 for a, se in zip(stats, ses))
    return {"checks_x_arms": len(stats), "var_z": statistics.pvariance(zs, 0.0), "var_z_expected": expected,
            "var_z_se": expected * math.sqrt(2.0 / len(stats)),
            "per_check_effect_sd": math.expm1(math.sqrt(max(0.0, excess)))}


def probe_summary(rows: list[dict]) -> dict:
    """Per arm over the checks that used the dispatch measurement: the share of the pairs' variance it
    took out, and the smallest detectable change of the same pairs with and without it."""
    out: dict = {}
    for arm in sorted({a for r in rows for a in (r.get("pairs") or {})}):
        gs = [r["pairs"][arm] for r in rows if arm in (r.get("pairs") or {}) and "with_probe" in r["pairs"][arm]]
        gs = [g for g in gs if (g.get("probe") or {}).get("used")]
        if not gs:
            continue
        removed = sorted(g["probe"]["variance_removed"] for g in gs)
        w = sorted(g["with_probe"]["detectable"] for g in gs)
        wo = sorted(g["without_probe"]["detectable"] for g in gs)
        out[arm] = {"checks": len(gs), "variance_removed_median": statistics.median(removed),
                    "variance_removed_min": removed[0], "variance_removed_max": removed[-1],
                    "detectable_with_median": statistics.median(w), "detectable_without_median": statistics.median(wo)}
    return out


def pooled_effect(rows: list[dict]) -> float | None:
    """The fault's effect on classic ms/token over every check of one head (n-weighted log mean)."""
    pts = [(r["classic_n"], math.log(r["classic_ratio"])) for r in rows if r.get("classic_ratio")]
    n = sum(k for k, _ in pts)
    return math.exp(sum(k * x for k, x in pts) / n) - 1.0 if n else None


def _portable(arg: str) -> str:
    """A path inside the repository as a relative one, any other absolute path as its name: a
    stored measurement names no machine's directories."""
    p = Path(arg)
    if not p.is_absolute():
        return arg
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return p.name


def head_summary(head: str, rs: list[dict]) -> dict:
    """One head's checks in one dict: exit statuses, classic's verdicts and detectable changes,
    the pooled effect, durations (medians are statistics.median: for an even count, the mean of
    the two middle values), and for A/A the process-effect estimate."""
    dets = [r["classic_detectable"] for r in rs if r.get("classic_detectable") is not None]
    return {"checks": len(rs), "exit_1": sum(r["exit"] == 1 for r in rs),
            "exit_3": sum(r["exit"] == 3 for r in rs), "exit_0": sum(r["exit"] == 0 for r in rs),
            "other_exit": sum(r["exit"] not in (0, 1, 3) for r in rs),
            "classic_worse": sum(r.get("classic_verdict") == "worse" for r in rs),
            "any_gated_worse": sum(bool(r.get("worse_gated")) for r in rs),
            "classic_detectable_max": max(dets) if dets else None,
            "classic_detectable_median": statistics.median(dets) if dets else None,
            "true_effect_pooled": pooled_effect(rs),
            "duration_s_max": max(r["duration_s"] for r in rs),
            "duration_s_median": statistics.median(r["duration_s"] for r in rs),
            "process_effect": process_effect(rs) if head == "A/A" else None,
            "probe": probe_summary(rs)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--work", default="0.07", help="fault sizes F (fractions of a forward), comma-separated")
    ap.add_argument("--checks", type=int, default=10, help="checks per fault")
    ap.add_argument("--aa", type=int, default=10, help="A/A checks (comment-only head)")
    ap.add_argument("--command", default="pr-check", choices=("pr-check", "compare-commits"))
    ap.add_argument("--suite", default=str(REPO / "benchmarks" / "suite.toml"))
    ap.add_argument("--budget-s", type=float)
    ap.add_argument("--threshold", type=float)
    ap.add_argument("--workdir", help="keep the scratch repository here (default: a temp dir)")
    ap.add_argument("--out", default=str(REPO / "build" / "artifacts" / "asv-sensitivity.json"))
    args = ap.parse_args()
    works = [float(x) for x in args.work.split(",") if x.strip()]
    root = Path(args.workdir or tempfile.mkdtemp(prefix="sensitivity-"))
    shas = build(root, works)
    proj = root / "project"
    env = run_env({"HARNESS_ASV_SUITE": str(Path(args.suite).resolve())})
    mf = root / "machine.json"
    if args.command == "pr-check":
        subprocess.run(harness_argv("host", "register", "--machine", "sensitivity", "--machine-file", str(mf)),
                       cwd=proj, env=env, check=True, capture_output=True)
    extra = ["--suite", str(Path(args.suite).resolve())]
    extra += ["--budget-s", f"{args.budget_s:g}"] if args.budget_s else []
    extra += ["--threshold", f"{args.threshold:g}"] if args.threshold else []
    plan = [("A/A", i) for i in range(args.aa)] + [(f"F={w:g}", i) for w in works for i in range(args.checks)]
    # Interleave heads so a slow drift of the host over the hour does not land on one head.
    plan.sort(key=lambda hi: (hi[1], hi[0]))
    rows = []
    for head, i in plan:
        out = root / f"check-{head.replace('/', '').replace('=', '')}-{i}.json"
        row = {"head": head, "check": i, **one_check(args.command, proj, env, shas["base"], shas[head], out, extra, mf)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    summary = {}
    for head in ["A/A"] + [f"F={w:g}" for w in works]:
        rs = [r for r in rows if r["head"] == head]
        if not rs:
            continue
        summary[head] = head_summary(head, rs)
    result = {"command": args.command, "suite": _portable(args.suite), "budget_s": args.budget_s,
              "threshold": args.threshold, "argv": [_portable(a) for a in sys.argv], "rows": rows, "summary": summary}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n{'head':<8} {'checks':>6} {'fail':>5} {'inconcl':>7} {'pass':>5} {'classic worse':>13} "
          f"{'detectable (median, max)':>25} {'true effect':>11} {'s (median, max)':>16}")
    for head, s in summary.items():
        dm, dx, te = s["classic_detectable_median"], s["classic_detectable_max"], s["true_effect_pooled"]
        print(f"{head:<8} {s['checks']:>6} {s['exit_1']:>5} {s['exit_3']:>7} {s['exit_0']:>5} {s['classic_worse']:>13} "
              f"{('-' if dm is None else f'{dm:.1%}, {dx:.1%}'):>25} {('-' if te is None else f'{te:+.1%}'):>11} "
              f"{s['duration_s_median']:>7.0f}, {s['duration_s_max']:.0f}")
    for head, s in summary.items():
        for arm, g in (s.get("probe") or {}).items():
            print(f"{head} {arm}: the dispatch measurement took out {g['variance_removed_median']:.0%} of the pairs' variance "
                  f"(median of {g['checks']} checks, {g['variance_removed_min']:.0%} to {g['variance_removed_max']:.0%}); "
                  f"the same pairs' smallest detectable change {g['detectable_with_median']:.1%} with it, "
                  f"{g['detectable_without_median']:.1%} without")
    pe = (summary.get("A/A") or {}).get("process_effect")
    if pe:
        print(f"\nA/A, {pe['checks_x_arms']} checks x arms: var(z) {pe['var_z']:.2f} against {pe['var_z_expected']:.2f} "
              f"(+- {pe['var_z_se']:.2f}) if only the pairs' noise were at work; a per-check (per worker "
              f"process) effect that would explain the excess: sd {pe['per_check_effect_sd']:.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
