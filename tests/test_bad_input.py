"""The battery: bad input to every command, through the real CLI.

Each case is one command line over files made for it. For bad input the harness must answer
with exit 2 and exactly one line on stderr (what, where, what to do), never a traceback, and
every file that existed before must be byte-identical afterwards. A command arm that misbehaves
(garbage, a non-numeric rate, a non-zero exit, a hang, a flood of output) is not bad input: its
runs are recorded as failed, the session goes on, and the exit status is 1.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from harness_helpers import REPO, clean_env, cli_in_process, command_arm, harness_argv, load, snapshot, write_suite

RECORD_FX = REPO / "tests" / "fixtures" / "report" / "record.json"


def _suite(tmp: Path, **settings) -> Path:
    return write_suite(tmp, [command_arm("classic")], **settings)


def _baselines(tmp: Path, entries) -> Path:
    p = tmp / "baselines.json"
    p.write_text(json.dumps({"schema_version": 1, "kind": "harness.baselines", "entries": entries}))
    return p


def _record(tmp: Path, change: Callable[[dict], None]) -> Path:
    data = json.loads(RECORD_FX.read_text())
    change(data)
    p = tmp / "bad-record.json"
    p.write_text(json.dumps(data))
    return p


def _weighed(tmp: Path, name: str, digest: str) -> Path:
    """The fixture record as if its target's weights hashed to `digest` (schema 4's models)."""
    data = json.loads(RECORD_FX.read_text())
    data["models"] = {"embedded": {"target": {"directory": "models/target", "sha256": digest * 64}}}
    p = tmp / name
    p.write_text(json.dumps(data))
    return p


def _text(tmp: Path, name: str, text: str) -> Path:
    p = tmp / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def _bad_suite(tmp: Path, replace: tuple[str, str]) -> Path:
    p = _suite(tmp)
    text = p.read_text()
    assert replace[0] in text, (replace, text)
    p.write_text(text.replace(*replace, 1))
    return p


def _specdec_suite(tmp: Path, drop: tuple[str, ...] = (), other_vocab: bool = False) -> Path:
    """A suite of the specdec engine on a copy of the embedded pair, with files dropped or the
    drafter's vocabulary changed: what the engine would refuse at load."""
    import shutil
    dirs = {}
    for role in ("target", "drafter"):
        d = tmp / "models" / role
        shutil.copytree(REPO / "specdec" / "models" / role, d)
        for name in drop:
            (d / name).unlink(missing_ok=True)
        dirs[role] = str(d)
    if other_vocab:
        tok = Path(dirs["drafter"]) / "tokenizer.json"
        data = json.loads(tok.read_text())
        vocab = data["model"]["vocab"]
        vocab[next(iter(vocab))] = len(vocab) + 7
        tok.write_text(json.dumps(data))
    return write_suite(tmp, [{"name": "classic", "pairing": "fx", "engine": "specdec", "block": 1}],
                       pairings=[{"name": "fx", **dirs}])


def _nightly_project(tmp: Path) -> Path:
    proj = tmp / "proj"
    (proj / "benchmarks").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(proj)], check=True)
    (proj / "asv.conf.json").write_text('{"version": 1, "repo": ".", "benchmark_dir": "benchmarks"}\n')
    return proj


def _nightly_project_with_suite(tmp: Path) -> Path:
    proj = _nightly_project(tmp)
    (proj / "benchmarks" / "suite.toml").write_text('name = "x"\n')
    return proj


def _bad_acks_project(tmp: Path) -> Path:
    proj = _nightly_project(tmp)
    (proj / "benchmarks" / "acknowledgements.toml").write_text(
        '[[acknowledge]]\ncommits = "HEAD"\nreason = "meant"\ncolour = "red"\n')
    return proj


def _machine_m(tmp: Path) -> None:
    subprocess.run(harness_argv("host", "register", "--machine", "m", "--machine-file", str(tmp / "m.json")),
                   check=True, capture_output=True, env=clean_env(), timeout=120)


def _results_a_file(tmp: Path) -> Path:
    proj = _nightly_project(tmp)
    _machine_m(tmp)
    (proj / "results").write_text("not a directory")
    return proj


def _empty_repo(tmp: Path) -> Path:
    repo = tmp / "engine"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    return repo


def _hosts_repo(tmp: Path, text: str) -> Path:
    """A repository under test whose hosts/ directory holds one bad profile."""
    repo = tmp / "repo"
    (repo / "hosts").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "hosts" / "bad.json").write_text(text)
    return repo


@dataclass
class Case:
    name: str
    argv: Callable[[Path], list[str]]   # the command line, given the case's own directory
    says: str                           # a part of the one line on stderr
    cwd: Callable[[Path], Path] | None = None   # default: the case's own directory
    subprocess: bool = False            # run as its own process (the console script) rather than in this one


CASES = [
    # Files the harness reads: one line naming the file and what is wrong.
    Case("baselines entry not an object",
         lambda t: ["check", str(_suite(t)), "--baselines", str(_baselines(t, {"k": "x"}))],
         "not a valid Baselines: Expected `object`, got `str` - at `$.entries[...]`"),
    Case("baselines entry without token_ids",
         lambda t: ["run", str(_suite(t)), "--baselines", str(_baselines(t, {"k": {"text": "a"}}))],
         "missing required field `token_ids`"),
    Case("check with no baselines file (a typo'd path)",
         lambda t: ["check", str(_suite(t)), "--baselines", str(t / "typo.json")],
         "typo.json: no baselines file; record one with `harness baseline record"),
    Case("baselines file a JSON list",
         lambda t: ["check", str(_suite(t)), "--baselines", str(_text(t, "b.json", "[1, 2]"))],
         "b.json"),
    Case("record with runs not a list",
         lambda t: ["report", str(_record(t, lambda d: d.update(runs="x")))], "runs is a str, not a list"),
    Case("record with a run of the wrong shape",
         lambda t: ["report", str(_record(t, lambda d: d["runs"][0].update(wall_s="slow")))],
         "not a valid Record"),
    Case("record of a future schema",
         lambda t: ["report", str(_record(t, lambda d: d.update(schema_version=99)))], "schema_version 99"),
    Case("record truncated", lambda t: ["report", str(_text(t, "r.json", RECORD_FX.read_text()[:500]))],
         "r.json"),
    Case("record of another kind",
         lambda t: ["report", str(_record(t, lambda d: d.update(kind="harness.baselines")))],
         "not a harness.record file"),
    Case("compare records of other weights under the same name",
         lambda t: ["report", str(_weighed(t, "a.json", "a")), "--compare", str(_weighed(t, "b.json", "b"))],
         "pairing 'embedded' has other target weights (sha256 aaaaaaaaaaaa vs bbbbbbbbbbbb)"),
    Case("compare record missing", lambda t: ["report", str(RECORD_FX), "--compare", str(t / "nope.json")],
         "nope.json"),
    Case("suite not TOML", lambda t: ["run", str(_text(t, "s.toml", "name = [unclosed"))], "not valid TOML", subprocess=True),
    Case("suite file missing", lambda t: ["run", str(t / "missing.toml")], "suite file not found"),
    Case("suite unknown arm field", lambda t: ["run", str(_bad_suite(t, ('name = "classic"', 'blok = 3\nname = "classic"')))],
         "unknown field"),
    Case("suite block 0", lambda t: ["run", str(_bad_suite(t, ("block = 1", "block = 0")))], "block"),
    Case("suite max_tokens 0", lambda t: ["run", str(_bad_suite(t, ("max_tokens = 8", "max_tokens = 0")))],
         "max_tokens"),
    Case("suite empty prompt", lambda t: ["run", str(_bad_suite(t, ('text = "def fib(n):"', 'text = ""')))],
         "prompt"),
    Case("suite engine not declared",
         lambda t: ["run", str(_bad_suite(t, ('engine = "command"', 'engine = "no-such-engine"')))],
         "no-such-engine"),
    Case("suite whitespace-only prompt", lambda t: ["run", str(_bad_suite(t, ('text = "def fib(n):"', 'text = "  \\n "')))],
         "the prompt is empty or only whitespace"),
    Case("model directory without tokenizer files",
         lambda t: ["run", str(_specdec_suite(t, drop=("tokenizer.json", "tokenizer_config.json")))],
         "has no tokenizer files"),
    Case("drafter with another vocabulary", lambda t: ["run", str(_specdec_suite(t, other_vocab=True))],
         "tokenizer mismatch"),
    Case("suite model directory missing",
         lambda t: ["run", str(write_suite(t, [command_arm("classic")],
                                           pairings=[{"name": "fx", "target": str(t / "gone")}]))],
         "model directory not found"),
    # Outputs: checked before any run (and before MLX or a model loads).
    Case("record under /proc", lambda t: ["run", str(_suite(t)), "--record", "/proc/harness-no/r.json"],
         "cannot write the record there", subprocess=True),
    Case("record parent is a file",
         lambda t: ["run", str(_suite(t)), "--record", str(_text(t, "afile", "x")) + "/sub/r.json"],
         "afile is a file, not a directory"),
    Case("record path is a directory", lambda t: ["run", str(_suite(t)), "--record", str(t)],
         "is a directory"),
    Case("record exists", lambda t: ["run", str(_suite(t)), "--record", str(_text(t, "old.json", "{}"))],
         "record already exists"),
    Case("report out under /proc", lambda t: ["report", str(RECORD_FX), "--out", "/proc/harness-no/r.md"],
         "cannot write the report there"),
    Case("baselines under /proc", lambda t: ["baseline", "record", str(_suite(t)), "--baselines",
                                             "/proc/harness-no/b.json"], "cannot write the baselines file there"),
    Case("resume missing record", lambda t: ["run", "--resume", str(t / "nope.json")], "nope.json"),
    # Options.
    Case("project emitted below 1", lambda t: ["project", "--classic-ms", "5", "--emitted", "0.5", "--verify-ms",
                                               "6", "--drafter-steps", "2", "--drafter-ms", "1", "--other-ms", "0"],
         "--emitted: a round emits between 1 and", subprocess=True),
    Case("project emitted above steps + 1",
         lambda t: ["project", "--classic-ms", "5", "--emitted", "10", "--verify-ms", "6", "--drafter-steps",
                    "2", "--drafter-ms", "1", "--other-ms", "0"], "got 10"),
    Case("compare-commits alpha 0", lambda t: ["compare-commits", "HEAD", "HEAD", "--alpha", "0"], "--alpha"),
    Case("compare-commits threshold 2", lambda t: ["compare-commits", "HEAD", "HEAD", "--threshold", "2"],
         "--threshold must be between 0 and 1"),
    Case("host register unknown profile",
         lambda t: ["host", "register", "--spec", "nope", "--machine-file", str(t / "m.json")],
         "unknown host spec 'nope'"),
    Case("host spec not JSON", lambda t: ["host", "register", "--machine-file", str(t / "m.json")],
         "bad.json: cannot read host spec", cwd=lambda t: _hosts_repo(t, '{"name": "x", "match": 5')),
    Case("host spec of the wrong shape", lambda t: ["host", "register", "--machine-file", str(t / "m.json")],
         "bad.json: missing key 'asv_machine'", cwd=lambda t: _hosts_repo(t, '{"name": "x", "match": 5}')),
    Case("pr-check threshold 2", lambda t: ["pr-check", "HEAD", "HEAD", "--threshold", "2", "--suite",
                                            str(REPO / "benchmarks" / "suite.toml"), "--machine-file",
                                            str(t / "m.json")], "--threshold must be between 0 and 1",
         cwd=_nightly_project),
    Case("pr-check where the asv suite is missing",
         lambda t: ["pr-check", "HEAD", "HEAD", "--machine-file", str(t / "m.json")],
         "key 'harness_suite': suite file", cwd=_nightly_project),
    Case("dashboard config missing", lambda t: ["dashboard", "publish", "--config", str(t / "nope.json")],
         "nope.json"),
    Case("init for an unknown host spec", lambda t: ["init", "--hosts", "no-such-host"], "no-such-host",
         cwd=lambda t: _empty_repo(t)),
    Case("init over an existing asv.conf.json", lambda t: ["init"], "would overwrite asv.conf.json",
         cwd=_nightly_project),
    Case("init outside a git repository", lambda t: ["init", "--dir", str(t)], "not in a git repository"),
    Case("pr-check where asv results cannot be written",
         lambda t: ["pr-check", "HEAD", "HEAD", "--suite", str(REPO / "benchmarks" / "suite.toml"),
                    "--machine", "m", "--machine-file", str(t / "m.json")],
         "cannot write the asv results there", cwd=_results_a_file),
    Case("changes with a malformed acknowledgements file", lambda t: ["changes", "--machine", "m"],
         "acknowledge[0]: unknown key 'colour'", cwd=_bad_acks_project),
    Case("nightly with a malformed acknowledgements file",
         lambda t: ["nightly", "--results-repo", str(t / "none.git"), "--checkout", str(t / "co"),
                    "--machine-file", str(t / "machine.json")], "acknowledge[0]: unknown key 'colour'",
         cwd=_bad_acks_project),
    Case("nightly unreachable results repository",
         lambda t: ["nightly", "--results-repo", str(t / "none.git"), "--checkout", str(t / "co"),
                    "--machine-file", str(t / "machine.json")], "unreachable", cwd=_nightly_project_with_suite, subprocess=True),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_is_one_line_exit_2_and_touches_nothing(case: Case, tmp_path: Path, monkeypatch, capsys) -> None:
    argv = case.argv(tmp_path)
    cwd = case.cwd(tmp_path) if case.cwd else tmp_path
    before = snapshot(tmp_path)
    if case.subprocess:
        r = subprocess.run(harness_argv(*argv), cwd=cwd, env=clean_env(), capture_output=True, text=True,
                           timeout=120, stdin=subprocess.DEVNULL)
    else:
        r = cli_in_process(argv, cwd, monkeypatch, capsys)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert lines[0].startswith("harness") and case.says in lines[0], lines[0]
    print(f"{case.name}: {lines[0]}")   # pytest -rP lists every case with its line
    after = snapshot(tmp_path)
    assert {k: after.get(k) for k in before} == before, "a file that was there changed"
    if case.name == "nightly unreachable results repository":
        assert not (tmp_path / "machine.json").exists(), "the machine file was written before the check"


# --- command arms that misbehave: recorded as failed runs, exit 1, never a traceback ---------

MISBEHAVING = {
    "garbage on stdout": ({"FAKE_GARBAGE": "1"}, "no result JSON on the last stdout line"),
    "a non-numeric rate": ({"FAKE_RATE": "fast"}, "decode_tokens_per_s"),
    "a non-zero exit": ({"FAKE_CRASH": "1"}, "exited with status 3"),
    "a hang past its timeout": ({"FAKE_SLEEP_S": "30"}, "timed out after 1 s"),
}


@pytest.mark.parametrize("name", sorted(MISBEHAVING))
def test_a_misbehaving_command_arm_fails_its_runs_not_the_session(name: str, tmp_path: Path) -> None:
    env, error = MISBEHAVING[name]
    suite = write_suite(tmp_path, [command_arm("ok"), command_arm("bad", env=env, timeout_s=1)])
    rec = tmp_path / "r.json"
    r = subprocess.run(harness_argv("run", str(suite), "--record", str(rec)), cwd=tmp_path, env=clean_env(),
                       capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-3000:]
    runs = load(rec)["runs"]
    bad = [x for x in runs if x["arm"] == "bad"]
    assert bad and all(x["status"] == "failed" and error in x["error"] for x in bad), bad[0]
    assert all(x["status"] == "ok" for x in runs if x["arm"] == "ok")
    # The record renders, failures and all.
    rep = subprocess.run(harness_argv("report", str(rec)), cwd=tmp_path, env=clean_env(), capture_output=True,
                         text=True, timeout=120)
    assert rep.returncode == 0 and "Traceback" not in rep.stderr, rep.stderr[-2000:]
    assert f"{len(bad)} of {len(runs)} measured runs failed (bad)" in rep.stdout, rep.stdout[:1500]


def test_an_arm_whose_gate_declines_reads_declined_not_a_speedup(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, [command_arm("classic", env={"FAKE_TOK_S": "100"}),
                                   command_arm("b3", 3, env={"FAKE_DECLINE": "1", "FAKE_TOK_S": "136"})])
    r = subprocess.run(harness_argv("run", str(suite), "--record", str(tmp_path / "r.json")), cwd=tmp_path,
                       env={**clean_env(), "COLUMNS": "250"}, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    b3 = next(ln for ln in r.stdout.splitlines() if ln.startswith("b3"))
    assert b3.endswith(" declined") and "1.36x" not in r.stdout, r.stdout


def test_a_flood_of_output_is_kept_as_a_bounded_tail(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, [command_arm("flood", env={"FAKE_FLOOD_MB": "8", "FAKE_CRASH": "1"})])
    rec = tmp_path / "r.json"
    r = subprocess.run(harness_argv("run", str(suite), "--record", str(rec)), cwd=tmp_path, env=clean_env(),
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert rec.stat().st_size < 200_000, rec.stat().st_size
    assert all(x["status"] == "failed" for x in load(rec)["runs"])


# --- secrets ------------------------------------------------------------------------------

def test_secret_values_never_reach_a_record_or_a_report(tmp_path: Path) -> None:
    secrets = {"HF_TOKEN": "hf_s3cr3tTokenValue42", "LAB_DB_PASSWORD": 'pa"ss word!99',
               "AWS_SECRET_ACCESS_KEY": "AKIAxyzSecretKeyValue"}
    suite = write_suite(tmp_path, [command_arm("ok"), command_arm("leaky", env={"FAKE_PRINT_ENV": "1"})])
    rec = tmp_path / "r.json"
    env = clean_env(**secrets)
    r = subprocess.run(harness_argv("run", str(suite), "--record", str(rec)), cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 1, r.stderr[-2000:]
    leaky = [x for x in load(rec)["runs"] if x["arm"] == "leaky"]
    assert leaky and "[redacted $HF_TOKEN]" in (leaky[0].get("stderr_tail") or ""), leaky[0]
    md = subprocess.run(harness_argv("report", str(rec)), cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=120).stdout
    outputs = [p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file() and p != suite]
    outputs += [md, r.stdout]
    for value in secrets.values():
        for text in outputs:
            assert value not in text and json.dumps(value)[1:-1] not in text, value


# --- Ctrl-C: one line and 130, however early and however often --------------------------------

@pytest.mark.parametrize("when", ["numpy loading", 0.4])
def test_ctrl_c_while_loading_is_one_line_and_130(when: str | float, tmp_path: Path) -> None:
    import signal
    import time
    proc = subprocess.Popen(harness_argv("run", str(_suite(tmp_path)), "--record", str(tmp_path / "r.json")),
                            cwd=tmp_path, env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Mid-import of the harness (after Python's own start-up, which no program can guard: under
    # CI's load a fixed 0.4 s once fell inside it, and the default SIGINT killed the process): the
    # moment numpy's extension is mapped into the process, then, for a float, that much later.
    maps, deadline = Path(f"/proc/{proc.pid}/maps"), time.monotonic() + 30
    while time.monotonic() < deadline and "_multiarray_umath" not in maps.read_text():
        time.sleep(0.002)
    if isinstance(when, float):
        time.sleep(when)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, (proc.returncode, err[-2000:])
    assert err.strip().splitlines()[-1].startswith("harness: interrupted"), err


def test_a_second_ctrl_c_still_ends_with_130_and_keeps_the_record(tmp_path: Path) -> None:
    import signal
    import time
    suite = write_suite(tmp_path, [command_arm("a", env={"FAKE_SLEEP_S": "0.3"})], repetitions=6)
    rec = tmp_path / "r.json"
    proc = subprocess.Popen(harness_argv("run", str(suite), "--record", str(rec)), cwd=tmp_path, env=clean_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (rec.exists() and load(rec)["runs"]):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "Traceback" not in err, (proc.returncode, err[-2000:])
    data = load(rec)
    assert data["complete"] is False and data["runs"] and all(x["status"] == "ok" for x in data["runs"])
