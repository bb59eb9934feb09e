"""How often does an A/A check read worse on a loaded host? `harness compare-commits HEAD HEAD`
(a commit against itself: any "worse" is a false alarm) run again and again while background
processes burn CPU, counting verdicts; optionally the same with an earlier harness, to show
what a change to the verdicts did (contended runs must not give a clean verdict).

The engine is tests/fixtures/fake_engine.py behind a small wrapper that first does a fixed
amount of CPU work and reports the time it took as its tok/s, so the figures feel the load (the
fake engine alone reports a constant). The load: --load processes, each alternating busy and
idle spans of 50-500 ms at random (a shared host's load comes and goes), started and stopped by
this script, each ending by itself when the script's time is up. Trials run until --minutes per
harness is spent. The suite sets [quiet] settle_s and timeout_s (0.5 s, 1 s) so an older harness,
whose default waited 120 s before each run, finishes a trial too; what differs between the
harnesses is then the verdict.

    python scripts/studies/aa_under_load.py --minutes 5 --before 3e198cd

prints one row per harness: trials, exit statuses (pass / FAIL / inconclusive), how many read
worse (the figure's verdict, or the reading kept under a contended verdict), the mean share of
contended runs, and the median trial time. --json writes the trials.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAKE = REPO / "tests" / "fixtures" / "fake_engine.py"

ENGINE = '''"""Fixed CPU work, timed; then the fake engine reports that rate (figures that feel the load)."""
import os, runpy, sys, time
t = time.perf_counter()
x = 0
for i in range(int(os.environ.get("AA_WORK", "300000"))):
    x += i * i
dt = time.perf_counter() - t
os.environ["FAKE_TOK_S"] = repr(8 / dt)      # 8 tokens in the time the work took
sys.argv = [sys.argv[1]] + sys.argv[2:]
runpy.run_path(sys.argv[0], run_name="__main__")
'''

SUITE = '''name = "aa-under-load"
max_tokens = 8
repetitions = {reps}
warmups = 1
cooldown_s = 0.05
[quiet]
enabled = true
settle_s = 0.5
timeout_s = 1.0
[watch]
enabled = true
[[pairings]]
name = "fx"
target = "{tmp}/target"
[[arms]]
name = "a"
pairing = "fx"
engine = "command"
command = ["{{python}}", "{tmp}/engine.py", "{fake}", "--prompt-file", "{{prompt_file}}",
           "--max-tokens", "{{max_tokens}}", "--block", "1"]
[[prompts]]
name = "p1"
text = "def fib(n):"
'''

LOAD = '''import random, sys, time
end = time.monotonic() + float(sys.argv[1])
rng = random.Random(int(sys.argv[2]))
while time.monotonic() < end:
    busy_until = time.monotonic() + rng.uniform(0.05, 0.5)
    while time.monotonic() < busy_until:
        pass
    time.sleep(rng.uniform(0.05, 0.5))
'''


def setup(tmp: Path, reps: int) -> tuple[Path, Path]:
    (tmp / "target").mkdir()
    (tmp / "engine.py").write_text(ENGINE)
    (tmp / "load.py").write_text(LOAD)
    suite = tmp / "suite.toml"
    suite.write_text(SUITE.format(reps=reps, tmp=tmp, fake=FAKE))
    repo = tmp / "repo"
    repo.mkdir()
    for argv in (["init", "-q"], ["add", "README"], ["commit", "-q", "-m", "one"]):
        if argv[0] == "add":
            (repo / "README").write_text("an A/A check\n")
        subprocess.run(["git", "-C", str(repo), "-c", "user.name=aa", "-c", "user.email=aa@example.com", *argv],
                       check=True)
    return suite, repo


def export(rev: str, dest: Path) -> Path:
    """The harness at rev, as git stores it (the working tree is untouched)."""
    data = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", rev, "harness"],
                          capture_output=True, check=True).stdout
    dest.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(dest, filter="data")
    return dest


def trial(src: Path, suite: Path, repo: Path, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    t = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "harness", "compare-commits", "HEAD", "HEAD", "--suite", str(suite),
                          "--repo", str(repo), "--work", str(work)], capture_output=True, text=True, env=env,
                         timeout=600, cwd=work.parent)   # not this checkout: `-m` would import its harness
    wall = time.monotonic() - t
    lines = [x for x in out.stdout.splitlines() if x.startswith("{")]
    if not lines:
        return {"exit": out.returncode, "wall_s": wall, "error": out.stderr[-500:]}
    s = json.loads(lines[-1])
    fig = next((f for f in s.get("figures") or [] if f.get("gated")), {})
    reading = (fig.get("contended") or {}).get("reading") or fig.get("verdict")
    runs = [r for side in ("base", "head") for r in json.loads(Path(s["records"][side]).read_text())["runs"]
            if not r.get("warmup")]
    share = sum("contended" in (r.get("marks") or []) for r in runs) / max(1, len(runs))
    return {"exit": s["exit_status"], "verdict": fig.get("verdict"), "reading": reading,
            "change": fig.get("change"), "contended_share": share, "wall_s": wall,
            "first_line": out.stdout.splitlines()[0] if out.stdout else ""}


def run_for(name: str, src: Path, suite: Path, repo: Path, tmp: Path, minutes: float) -> list[dict]:
    out: list[dict] = []
    end = time.monotonic() + 60.0 * minutes
    while time.monotonic() < end:
        r = trial(src, suite, repo, tmp / f"{name}-{len(out)}")
        if r["exit"] == 2:   # a problem to fix, not a verdict: stop rather than count it
            raise SystemExit(f"{name}: {r.get('error') or 'exit 2'}")
        out.append(r)
        print(f"{name} {len(out)}: exit {r['exit']} {r.get('verdict')} (reads {r.get('reading')}) "
              f"{r.get('change')} contended {r.get('contended_share', 0):.0%} {r['wall_s']:.0f} s",
              file=sys.stderr, flush=True)
    return out


def row(name: str, trials: list[dict]) -> str:
    n = len(trials)
    ex = [t["exit"] for t in trials]
    worse = sum(t.get("reading") == "worse" for t in trials)
    cs = statistics.fmean(t.get("contended_share", 0.0) for t in trials) if trials else 0.0
    wall = statistics.median(t["wall_s"] for t in trials) if trials else 0.0
    return (f"| {name} | {n} | {ex.count(0)} | {ex.count(1)} | {ex.count(3)} | {worse} | "
            f"{cs:.0%} | {wall:.0f} s |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--minutes", type=float, default=5.0, help="trials per harness for this long")
    ap.add_argument("--before", help="also run the harness at this git revision first")
    ap.add_argument("--load", type=int, default=2, help="background busy processes")
    ap.add_argument("--repetitions", type=int, default=8)
    ap.add_argument("--json", help="write every trial here")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="aa-load-") as d:
        tmp = Path(d)
        suite, repo = setup(tmp, a.repetitions)
        harnesses = ([("before " + a.before, export(a.before, tmp / "before"))] if a.before else []) + \
            [("now", REPO)]
        total_s = 60.0 * a.minutes * len(harnesses) + 120.0   # the load ends by itself after this
        load = [subprocess.Popen([sys.executable, str(tmp / "load.py"), str(total_s), str(random.randrange(1 << 30))])
                for _ in range(a.load)]
        results: dict[str, list[dict]] = {}
        try:
            for name, src in harnesses:
                results[name] = run_for(name.split()[0], src, suite, repo, tmp, a.minutes)
        finally:
            for p in load:
                p.terminate()
                p.wait()
    print(f"A/A checks (compare-commits HEAD HEAD), {a.load} background busy process(es), "
          f"{a.repetitions} repetitions a side, on {os.cpu_count()} cores:")
    print("| harness | trials | pass | FAIL | inconclusive | read worse | contended runs | median trial |")
    print("|---|---|---|---|---|---|---|---|")
    for name, trials in results.items():
        print(row(name, trials))
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
