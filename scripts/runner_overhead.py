"""How much wall time does the harness itself add per run? A stub command engine that sleeps a
fixed time and prints a result the size of a real speculative run's (128 token ids, a rounds log
of 64 rounds), quiet gate off, no cooldown; the per-run overhead is (session wall - the runs'
own wall) / runs, taken from the record's duty cycle. Two ways of keeping the record: the run
journal (the default: one JSON line per run, the whole record rewritten now and then) and the
whole record rewritten after every run (what the journal replaced).

    PYTHONPATH=. .venv/bin/python scripts/runner_overhead.py --runs 125 --sleep 0.19

Prints one table for people and one JSON line for machines. Timings are of this host; compare
the two rows, not the absolute numbers across hosts.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness import cli  # noqa: E402
from harness.collect import record  # noqa: E402

ENGINE = """import json, sys, time
time.sleep(float(sys.argv[1]))
rounds = [{"offset": 2 * i, "proposed": 2, "accepted": i % 3, "drafted": [7, 8]} for i in range(64)]
print(json.dumps({"token_ids": list(range(128)), "gate": {"outcome": "passed", "engaged": True},
                  "engine": {"name": "stub", "version": "1"},
                  "diagnostics": {"mode": "speculative", "decode_ms": float(sys.argv[1]) * 1000.0,
                                  "rounds": 64, "proposed": 128, "accepted": 64,
                                  "phase_ms": {"draft": 40.0, "verify": 140.0}, "rounds_log": rounds}}))
"""


def suite(tmp: Path, runs: int, sleep: float) -> Path:
    (tmp / "engine.py").write_text(ENGINE)
    p = tmp / "suite.toml"
    p.write_text("\n".join([
        'name = "overhead"', "max_tokens = 128", f"repetitions = {runs}", "warmups = 0", "cooldown_s = 0",
        "[quiet]", "enabled = false",
        "[engines.stub]", 'phases = ["draft", "verify"]',
        "[[pairings]]", 'name = "none"', 'target = "."',
        "[[arms]]", 'name = "stub"', 'engine = "stub"', "block = 3",
        f'command = ["{{python}}", "{tmp / "engine.py"}", "{sleep}"]',
        "[[prompts]]", 'name = "p"', 'text = "x"', ""]))
    return p


def measure(mode: str, runs: int, sleep: float) -> dict:
    with tempfile.TemporaryDirectory(prefix="overhead-") as d:
        tmp = Path(d)
        s = suite(tmp, runs, sleep)
        saved = record.REWRITE_MIN_INTERVAL_S, record.REWRITE_MAX_SHARE
        if mode == "rewrite every run":
            record.REWRITE_MIN_INTERVAL_S, record.REWRITE_MAX_SHARE = 0.0, float("inf")
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                rc = cli.main(["run", str(s), "--record", str(tmp / "r.json"), "--baselines", str(tmp / "b.json")])
        finally:
            record.REWRITE_MIN_INTERVAL_S, record.REWRITE_MAX_SHARE = saved
        data = json.loads((tmp / "r.json").read_text())
    duty = data["duty"]
    n = duty["runs"]
    return {"mode": mode, "exit": rc, "runs": n, "session_wall_s": duty["session_wall_s"],
            "run_s": duty["run_s"], "duty_cycle": duty["duty_cycle"],
            "overhead_ms_per_run": round(1000.0 * (duty["session_wall_s"] - duty["run_s"]) / n, 1) if n else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=125)
    ap.add_argument("--sleep", type=float, default=0.19, help="the stub engine's run time, s")
    args = ap.parse_args()
    rows = [measure(m, args.runs, args.sleep) for m in ("journal", "rewrite every run")]
    print(f"{'record kept by':<20} {'runs':>5} {'session s':>10} {'runs s':>8} {'duty':>6} {'overhead ms/run':>16}")
    for r in rows:
        print(f"{r['mode']:<20} {r['runs']:>5} {r['session_wall_s']:>10.1f} {r['run_s']:>8.1f} "
              f"{r['duty_cycle']:>6.1%} {r['overhead_ms_per_run']:>16}")
    print(json.dumps({"kind": "harness.runner-overhead", "sleep_s": args.sleep, "rows": rows}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
