"""The real CLI on fixture suites, in a subprocess."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from harness_helpers import clean_env, command_arm, harness_argv, last_json, load, one_line, run_cli, write_suite


@pytest.mark.parametrize("mutate, expect", [
    (lambda p: p.write_text("name = \n[[arms]\n"), "not valid TOML"),
    (lambda p: p.write_text(p.read_text().replace("block = 1", "blok = 1")), "arms[0].blok: unknown field"),
    (lambda p: p.write_text(p.read_text().replace('name = "b"', 'name = "a"')), "arms[1].name: two arms are named 'a'"),
    (lambda p: p.write_text(p.read_text().replace("block = 2", 'block = "two"')), "arms[1].block: expected an integer"),
    (lambda p: p.write_text(p.read_text().replace("/target", "/gone")), "pairings[0].target: model directory not found"),
    # Accepted once, then every run failed (a negative seed, a bad env name) or waited forever (inf).
    (lambda p: p.write_text(p.read_text().replace('name = "fx"', 'name = "fx"\nseed = -1', 1)), "seed: must be >= 0"),
    (lambda p: p.write_text(p.read_text().replace("cooldown_s = 0", "cooldown_s = inf")), "cooldown_s: expected a finite number"),
    (lambda p: p.write_text(p.read_text().replace('name = "fx"', 'name = "fx"\ntemp = nan', 1)), "temp: expected a finite number"),
    (lambda p: p.write_text(p.read_text().replace('name = "fx"', 'name = "fx"\nthresholds = false', 1)),
     "thresholds: expected a table"),
    (lambda p: p.write_text(p.read_text().replace("block = 2", "block = 9")), "arms[1].block: must be <= max_tokens (8)"),
    (lambda p: p.write_text(p.read_text().replace("block = 2", 'block = 2\nenv = { "A=B" = "1" }')),
     "arms[1].env: 'A=B' is not an environment variable name"),
])
def test_bad_suites_exit_2_with_one_line(tmp_path: Path, mutate, expect: str) -> None:
    suite = write_suite(tmp_path, [command_arm("a"), command_arm("b", 2)])
    mutate(suite)
    line = one_line(run_cli("run", str(suite), "--record", str(tmp_path / "r.json"), cwd=tmp_path))
    assert str(suite) in line and expect in line
    assert not (tmp_path / "r.json").exists()          # validation happens before anything runs


def test_missing_suite_and_unavailable_extension(tmp_path: Path) -> None:
    assert "suite file not found" in one_line(run_cli("check", "nope.toml", cwd=tmp_path))
    (tmp_path / "dir.toml").mkdir()
    assert "a directory, not a suite file" in one_line(run_cli("run", "dir.toml", cwd=tmp_path))
    # nightly has landed (harness.ci.nightly): without a results repository it is one line, exit 2.
    assert "no results repository" in one_line(run_cli("nightly", cwd=tmp_path))


def test_run_end_to_end_record_and_machine_line(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, [command_arm("classic"), command_arm("b3", 3), command_arm("crash", 2, {"FAKE_CRASH": "1"})],
                        warmups=1)
    rec_path = tmp_path / "out" / "r.json"
    r = run_cli("run", str(suite), "--record", str(rec_path), "--baselines", str(tmp_path / "b.json"), "--json",
                cwd=tmp_path)
    assert r.returncode == 1                        # a failed run makes the exit status say so
    summary = json.loads(r.stdout)                  # --json: the JSON alone on stdout
    assert summary["kind"] == "harness.summary" and summary["complete"] is True and summary["failed"] == 3
    rec = load(rec_path)
    assert rec["schema_version"] == 5 and rec["complete"] is True and rec["finished"]
    assert len(rec["runs"]) == 3 + 3 * 2 and [r["index"] for r in rec["runs"]] == list(range(9))
    assert [r["warmup"] for r in rec["runs"][:3]] == [True] * 3
    ok = [x for x in rec["runs"] if x["arm"] != "crash"]
    assert all(x["status"] == "ok" and x["identity"]["status"] == "no_baseline" for x in ok)
    # The engine's ms_per_token is the run's figure, kept once (not again in its diagnostics).
    assert all(x["ms_per_token"] > 0 and "ms_per_token" not in x["diagnostics"] for x in ok)
    assert set(rec["suite"]) >= {"name", "path", "sha256", "settings", "pairings", "arms", "prompts"}
    assert set(rec["host"]) >= {"cpu", "os", "python"}
    b3 = next(a for a in summary["arms"] if a["arm"] == "b3")
    assert b3["speedup"] == pytest.approx(1.0) and b3["classic_arm"] == "classic"
    assert b3["per_step_ci"] is not None

    # Never overwrite a record.
    line = one_line(run_cli("run", str(suite), "--record", str(rec_path), cwd=tmp_path))
    assert "already exists" in line


def test_kill_then_resume_completes_the_record(tmp_path: Path) -> None:
    arms = [command_arm("a", 1, {"FAKE_SLEEP_S": "0.4"}), command_arm("b", 2, {"FAKE_SLEEP_S": "0.4"})]
    suite = write_suite(tmp_path, arms, repetitions=3)
    rec_path = tmp_path / "r.json"
    proc = subprocess.Popen(harness_argv("run", str(suite), "--record", str(rec_path), "--baselines",
                                         str(tmp_path / "b.json")),
                            cwd=tmp_path, env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if rec_path.exists() and rec_path.stat().st_size:
                try:
                    if load(rec_path)["runs"]:
                        break
                except json.JSONDecodeError:
                    pytest.fail("the record was seen half-written")
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    rec = load(rec_path)
    assert rec["complete"] is False and 1 <= len(rec["runs"]) < 6

    r = run_cli("run", "--resume", str(rec_path), "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    rec = load(rec_path)
    assert rec["complete"] is True and sorted(x["index"] for x in rec["runs"]) == list(range(6))
    assert len(rec["resumes"]) == 1
    assert last_json(r.stdout)["complete"] is True


# Moments (seconds after the start) drawn once from a seeded generator: before the record
# exists, during the first runs, mid-session and near the end; reproducible, not hand-picked.
_RNG = random.Random(15)
KILL_MOMENTS = sorted(round(_RNG.uniform(0.1, 4.0), 2) for _ in range(5))


@pytest.mark.parametrize("moment", KILL_MOMENTS)
def test_sigkill_at_a_random_moment_loses_nothing_and_resume_completes(moment: float, tmp_path: Path) -> None:
    arms = [command_arm("a", 1, {"FAKE_SLEEP_S": "0.3"}), command_arm("b", 2, {"FAKE_SLEEP_S": "0.3"})]
    suite = write_suite(tmp_path, arms, repetitions=3)
    rec_path = tmp_path / "r.json"
    proc = subprocess.Popen(harness_argv("run", str(suite), "--record", str(rec_path)), cwd=tmp_path,
                            env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(moment)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    if not rec_path.exists():
        return                                   # killed before the session began: nothing to keep
    json.loads(rec_path.read_text())             # the file itself is whole JSON, never half-written
    rec = load(rec_path)
    indices = [x["index"] for x in rec["runs"]]
    assert len(indices) == len(set(indices)) and all(x["status"] == "ok" for x in rec["runs"])
    if rec["complete"]:
        assert sorted(indices) == list(range(6))
        return
    kept = {x["index"]: x["started"] for x in rec["runs"]}
    r = run_cli("run", "--resume", str(rec_path), cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    rec = load(rec_path)
    assert rec["complete"] is True and sorted(x["index"] for x in rec["runs"]) == list(range(6))
    # What the killed session finished is kept as it was, not run again.
    assert {x["index"]: x["started"] for x in rec["runs"] if x["index"] in kept} == kept


def test_sigterm_keeps_runs_and_says_how_to_resume(tmp_path: Path) -> None:
    # A finished run lands in the record's journal at once (the record file itself is rewritten
    # only now and then), so the signal goes after the first journal line, with 29 runs to go.
    suite = write_suite(tmp_path, [command_arm("a", 1, {"FAKE_SLEEP_S": "0.3"})], repetitions=30)
    rec_path = tmp_path / "r.json"
    journal = tmp_path / "r.json.journal"
    proc = subprocess.Popen(harness_argv("run", str(suite), "--record", str(rec_path)), cwd=tmp_path,
                            env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None and not (
            journal.exists() and journal.read_text().endswith("\n")):
        time.sleep(0.05)
    assert proc.poll() is None, "the session ended before any run was journalled"
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert f"--resume {rec_path}" in err and "Traceback" not in err
    assert load(rec_path)["complete"] is False


def test_an_interrupt_swallowed_inside_a_fork_still_stops_the_session(tmp_path: Path) -> None:
    # A signal that lands while Popen runs the interpreter's at-fork hooks raises there, and
    # CPython drops that exception (printing it as "ignored"). The signal is sent from such a
    # hook here, at the fork of the second run's engine: the session must still stop, with its
    # one line and no traceback.
    suite = write_suite(tmp_path, [command_arm("a", 1, {"FAKE_SLEEP_S": "0.05"})], repetitions=30)
    rec_path = tmp_path / "r.json"
    code = ("import os, signal, sys\n"
            "from harness.__main__ import run\n"
            f"journal = {str(rec_path) + '.journal'!r}\n"
            "fired = []\n"
            f"landed = {str(tmp_path / 'landed')!r}\n"
            "def hook():\n"
            "    if not fired and os.path.exists(journal):\n"
            "        fired.append(1)\n"
            "        try:\n"
            "            os.kill(os.getpid(), signal.SIGTERM)\n"
            "        except KeyboardInterrupt:\n"
            "            open(landed, 'w').close()\n"
            "            raise\n"
            "os.register_at_fork(after_in_parent=hook)\n"
            "sys.argv[0] = 'harness'\n"
            "run()\n")
    r = subprocess.run([sys.executable, "-c", code, "run", str(suite), "--record", str(rec_path)],
                       cwd=tmp_path, env=clean_env(), capture_output=True, text=True, timeout=120)
    assert (tmp_path / "landed").exists()      # it was raised inside the hook, where it is dropped
    assert r.returncode == 130 and "Traceback" not in r.stderr, r.stderr[-2000:]
    rec = load(rec_path)
    assert rec["complete"] is False and 1 <= len(rec["runs"]) < 30


def test_resume_refuses_truncated_and_other_schema(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text('{"schema_version": 1, "kind": "harness.record", "runs": [')
    assert "not valid JSON" in one_line(run_cli("run", "--resume", str(p), cwd=tmp_path))
    p.write_text('{"schema_version": 7, "kind": "harness.record"}')
    assert "schema_version 7" in one_line(run_cli("run", "--resume", str(p), cwd=tmp_path))


def test_resume_refuses_a_record_of_another_host(tmp_path: Path) -> None:
    arms = [command_arm("a", 1, {"FAKE_SLEEP_S": "0.01"})]
    suite = write_suite(tmp_path, arms, repetitions=3)
    p = tmp_path / "r.json"
    assert run_cli("run", str(suite), "--record", str(p), "--baselines", str(tmp_path / "b.json"), cwd=tmp_path).returncode == 0
    rec = load(p)
    here = rec["host"]["os"]["hostname"]
    rec["complete"], rec["runs"] = False, rec["runs"][:1]
    rec["host"]["os"]["hostname"] = "otherbox"
    p.write_text(json.dumps(rec))
    before = p.read_text()
    line = one_line(run_cli("run", "--resume", str(p), cwd=tmp_path))
    assert "recorded on another host (otherbox /" in line and "resume it there" in line
    assert p.read_text() == before                 # nothing added, no resume noted
    # The same record, back on this host, resumes and completes.
    rec["host"]["os"]["hostname"] = here
    p.write_text(json.dumps(rec))
    assert run_cli("run", "--resume", str(p), cwd=tmp_path).returncode == 0
    assert load(p)["complete"] is True and len(load(p)["runs"]) == 3
    r = run_cli("run", "--resume", str(p), cwd=tmp_path)
    assert r.returncode == 0 and "is complete; nothing to resume" in r.stderr


def test_the_progress_counter_counts_against_the_whole_plan_when_it_is_known(tmp_path: Path) -> None:
    # A fixed design (no budget): one warm-up round and three rounds of two arms are 8 runs,
    # and the counter says so from the first run (it once read [1/2], [2/2], then [3/4]).
    suite = write_suite(tmp_path, [command_arm("a"), command_arm("b", 2)], repetitions=3, warmups=1)
    r = run_cli("run", str(suite), "--record", str(tmp_path / "r.json"), "--baselines", str(tmp_path / "b.json"),
                cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    counters = [ln.split("]")[0] + "]" for ln in r.stderr.splitlines() if ln.startswith("[")]
    assert counters == [f"[{i}/8]" for i in range(1, 9)], r.stderr


def test_host_register_refuses_a_harness_file_as_the_machine_file(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"schema_version": 4, "kind": "harness.record", "runs": [], "host": {"cpu": {}}}))
    before = p.read_text()
    line = one_line(run_cli("host", "register", "--machine-file", str(p), cwd=tmp_path))
    assert "holds a harness.record, not an asv machine file" in line
    assert p.read_text() == before


def test_project_delegates_to_costmodel(tmp_path: Path) -> None:
    r = run_cli("project", "--help", cwd=tmp_path)
    assert r.returncode == 0 and "Traceback" not in r.stderr and r.stdout.strip()


@pytest.mark.real_engine
def test_quick_run_on_the_real_engine(tmp_path: Path) -> None:
    (tmp_path / "s.toml").write_text("\n".join([
        'name = "real"', "max_tokens = 4", "repetitions = 2", "warmups = 0", "cooldown_s = 0",
        "[quiet]", "enabled = false",
        "[[pairings]]", 'name = "embedded"', 'target = "embedded"', 'drafter = "embedded"',
        "[[arms]]", 'name = "classic"', "block = 1",
        # The probe forced both ways, so every arm takes the same path on every CPU and BLAS.
        "[[arms]]", 'name = "block3"', "block = 3", 'env = { SPECDEC_FORCE_PROBE = "fail" }',
        "[[arms]]", 'name = "block3-inexact"', "block = 3",
        'env = { SPECDEC_ALLOW_INEXACT = "1", SPECDEC_FORCE_PROBE = "fail" }',
        "[[arms]]", 'name = "block3-exact"', "block = 3", 'env = { SPECDEC_FORCE_PROBE = "pass" }',
        "[[arms]]", 'name = "mlxlm-block3"', 'engine = "mlx-lm"', "block = 3",
        "[[prompts]]", 'name = "p"', 'text = "def add(a, b):"', ""]))
    r = run_cli("run", "s.toml", "--quick", "--record", "r.json", "--baselines", "b.json", "--json", cwd=tmp_path,
                timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    rec = load(tmp_path / "r.json")
    assert rec["quick"] is True and all(x["status"] == "ok" for x in rec["runs"])
    by = {}
    for x in rec["runs"]:
        by.setdefault(x["arm"], []).append(x)
    assert all(x["generated_tokens"] == 4 for x in rec["runs"])
    forced = {"SPECDEC_FORCE_PROBE": "fail"}
    assert all(x["overrides"] == {"SPECDEC_ALLOW_INEXACT": "1", **forced} for x in by["block3-inexact"])
    assert all(x["overrides"] == forced for x in by["block3"]) and by["classic"][0]["overrides"] == {}
    outcomes = {a: {x["gate"]["outcome"] for x in by[a]} for a in ("block3", "block3-inexact", "block3-exact")}
    assert outcomes == {"block3": {"declined"}, "block3-inexact": {"overridden"}, "block3-exact": {"passed"}}
    assert all(x["diagnostics"]["mode"] == "classic" for x in by["block3"])
    assert all(x["diagnostics"]["mode"] == "speculative" for a in ("block3-inexact", "block3-exact") for x in by[a])
    # A forced probe is an override like any other: never a shipping configuration.
    assert not any(x["shipping"] for a in outcomes for x in by[a])
    assert all(x["shipping"] for x in by["classic"])
    # Every arm on one pairing at temp 0 decodes the same tokens when the gate is exact or declined.
    assert by["classic"][0]["token_ids"] == by["mlxlm-block3"][0]["token_ids"]
    assert all("do not publish" in a["flags"] for a in last_json(r.stdout)["arms"])   # quick: never publish


_UNRAISABLE = """
import sys
from harness.core import interrupt

class Dropped:
    def __init__(self, exc): self.exc = exc
    def __del__(self): raise self.exc

sys.unraisablehook = interrupt.unraisable_hook
Dropped(KeyboardInterrupt())      # before any interrupt: still printed
Dropped(ValueError("kept"))
interrupt.request()
Dropped(KeyboardInterrupt())      # the flag holds it: not printed
Dropped(ValueError("also kept"))
"""


def test_an_interrupt_cpython_drops_is_kept_off_the_terminal_only_once_flagged() -> None:
    # CPython drops an exception raised where it cannot propagate (a fork's at-fork hooks, a
    # __del__) and prints "Exception ignored" with a traceback; the SIGTERM test above can land
    # there. The hook hides only a KeyboardInterrupt the interrupt flag already carries.
    r = subprocess.run([sys.executable, "-c", _UNRAISABLE], capture_output=True, text=True,
                       env=clean_env(), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("Exception ignored") == 3
    assert r.stderr.count("KeyboardInterrupt") == 1
    assert "ValueError: kept" in r.stderr and "ValueError: also kept" in r.stderr
