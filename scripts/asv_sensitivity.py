"""How large a slowdown does `harness pr-check` catch on this host, and how long does it take?

Builds a scratch copy of the project (tests/asv_scratch.py) with a base commit, a comment-only
commit and one commit per injected delay (the engine sleeps D ms after every target decode
forward, set in code), then runs `harness pr-check base HEAD` REPEATS times per head and
prints, per head: the measured classic ms/token change, how often the check failed (exit 1),
the verdict on classic decode ms/token, the smallest detectable change, and the duration.

    PYTHONPATH=. .venv/bin/python scripts/asv_sensitivity.py --delays 0.25,0.5,1,2 --repeats 2
    PYTHONPATH=. .venv/bin/python scripts/asv_sensitivity.py --real-suite --delays 5 --repeats 1

--real-suite uses benchmarks/suite.toml as CI does (10 s cooldowns, quiet gate); the default
takes the waiting out (0.2 s cooldowns, no quiet gate) and keeps everything else.
Writes build/artifacts/asv-sensitivity.json.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from asv_scratch import (commit_all, copy_tracked, fast_suite, git, harness_argv,  # noqa: E402
                         run_env, slow_engine)


def build(root: Path, delays: list[float]) -> dict[str, str]:
    proj = root / "project"
    proj.mkdir(parents=True)
    copy_tracked(proj)
    git(proj, "init", "-q", "-b", "main")
    shas = {"base": commit_all(proj, "base")}
    engine = proj / "specdec" / "engine.py"
    original = engine.read_text()
    engine.write_text(original + "# A comment-only change.\n")
    shas["comment"] = commit_all(proj, "comment only")
    for d in delays:
        git(proj, "checkout", "-q", shas["base"])
        git(proj, "checkout", "-q", "-b", f"slow-{d:g}")
        slow_engine(proj, d)
        shas[f"slow {d:g} ms"] = commit_all(proj, f"slow {d:g} ms")
    git(proj, "checkout", "-q", "main")
    return shas


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--delays", default="0.25,0.5,1,2", help="ms per target decode forward, comma-separated")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--real-suite", action="store_true", help="benchmarks/suite.toml as is (CI's settings)")
    ap.add_argument("--workdir", help="keep the scratch repository here (default: a temp dir)")
    args = ap.parse_args()
    delays = [float(x) for x in args.delays.split(",") if x]
    root = Path(args.workdir or tempfile.mkdtemp(prefix="asv-sensitivity-"))
    shas = build(root, delays)
    proj = root / "project"
    extra = {} if args.real_suite else {"HARNESS_ASV_SUITE": str(fast_suite(root / "fast-suite.toml"))}
    env = run_env(extra)
    mf = root / "machine.json"
    subprocess.run(harness_argv("host", "register", "--machine", "sensitivity", "--machine-file", str(mf)),
                   cwd=proj, env=env, check=True, capture_output=True)
    rows = []
    for head in ["comment"] + [f"slow {d:g} ms" for d in delays]:
        for rep in range(args.repeats):
            out = root / f"pr-{head.replace(' ', '_')}-{rep}.json"
            t0 = time.monotonic()
            r = subprocess.run(harness_argv("pr-check", shas["base"], shas[head], "--machine", "sensitivity",
                                            "--machine-file", str(mf), "--json", str(out)),
                               cwd=proj, env=env, capture_output=True, text=True)
            took = time.monotonic() - t0
            row = {"head": head, "repeat": rep, "exit": r.returncode, "duration_s": round(took, 1)}
            if out.exists():
                data = json.loads(out.read_text())
                for f in data["figures"]:
                    if f["name"] == "bench_specdec.Decode.track_ms_per_token('classic')":
                        row.update(classic_change=None if f["ratio"] is None else round(f["ratio"] - 1, 3),
                                   classic_verdict=f["verdict"],
                                   classic_detectable=None if f["detectable"] is None else round(f["detectable"], 3))
                row["worse"] = data["verdicts"].get("worse", 0)
                row["inconclusive"] = data["verdicts"].get("inconclusive", 0)
            else:
                row["error"] = (r.stderr or r.stdout).strip().splitlines()[-1:]
            rows.append(row)
            print(json.dumps(row), flush=True)
    art = REPO / "build" / "artifacts"
    art.mkdir(parents=True, exist_ok=True)
    (art / "asv-sensitivity.json").write_text(json.dumps({"real_suite": args.real_suite, "rows": rows},
                                                         indent=1) + "\n")
    print(f"\n{'head':<14} {'exit':>4} {'classic change':>15} {'verdict':>13} {'detectable':>11} {'worse':>5} {'s':>6}")
    for r in rows:
        ch = r.get("classic_change")
        det = r.get("classic_detectable")
        print(f"{r['head']:<14} {r['exit']:>4} {('-' if ch is None else f'{ch:+.1%}'):>15} "
              f"{r.get('classic_verdict', '-'):>13} {('-' if det is None else f'{det:.1%}'):>11} "
              f"{r.get('worse', '-'):>5} {r['duration_s']:>6.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
