"""The battery: engine results no engine can have measured, and records that do not match their suite.

An engine's NaN, infinity, negative time, non-positive tok/s, bad token id, empty output or a
count that contradicts its ids, by every way in (a command arm's tok_s_regex, its result JSON,
an in-process adapter's dict), fails that run with one line naming the field: the session goes
on, exits 1, writes strict JSON, and the record reports. A record an older harness wrote with
such runs reports them set aside. A record whose runs do not match its suite (an arm it lacks,
an index twice, past the plan, or not the plan's run) is one line and exit 2, for report and
for resume, and is left as it was.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from harness_helpers import REPO, cli_in_process, command_arm, load, write_suite

RECORD_FX = REPO / "tests" / "fixtures" / "report" / "record.json"
RATE_RX = r"at (\S+) tok/s"


def _refuse(name: str) -> Any:
    raise ValueError(f"not strict JSON: {name}")


def _strict(path: Path) -> dict[str, Any]:
    """The file as strict JSON reads it: a bare NaN or Infinity is an error."""
    return json.loads(path.read_text(), parse_constant=_refuse)


def _cli(argv: list[str], tmp: Path, monkeypatch: Any, capsys: Any) -> subprocess.CompletedProcess:
    r = cli_in_process(argv, tmp, monkeypatch, capsys)
    assert "Traceback" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-3000:]
    return r


def _report_ok(rec: Path, tmp: Path, monkeypatch: Any, capsys: Any) -> str:
    r = _cli(["report", str(rec)], tmp, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def _session_fails_the_bad_arm(tmp: Path, bad: dict[str, Any], says: str, monkeypatch: Any,
                               capsys: Any) -> None:
    """A session of a good arm and `bad`: exit 1, the bad arm's runs failed with one line naming
    the field, the good arm's ok, the record strict JSON, and its report renders."""
    suite = write_suite(tmp, [command_arm("good"), bad])
    rec = tmp / "r.json"
    r = _cli(["run", str(suite), "--record", str(rec)], tmp, monkeypatch, capsys)
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    data = _strict(rec)
    assert "Traceback" not in json.dumps(data)
    runs = load(rec)["runs"]
    failed = [x for x in runs if x["arm"] == "bad"]
    assert failed and all(x["status"] == "failed" and "failed" in x["marks"] for x in failed), failed[0]
    for x in failed:
        assert "\n" not in x["error"] and says in x["error"], x["error"]
        assert x["decode_tokens_per_s"] is None and x["token_ids"] is None, x
    assert all(x["status"] == "ok" for x in runs if x["arm"] == "good")
    md = _report_ok(rec, tmp, monkeypatch, capsys)
    assert f"{len(failed)} of {len(runs)} measured runs failed (bad)" in md, md[:1500]


# --- a command arm's tok_s_regex ------------------------------------------------------------

REGEX = {
    "tok_s_regex captures nan": ("nan", "diagnostics.decode_tokens_per_s is nan, a throughput must be"),
    "tok_s_regex captures inf": ("inf", "diagnostics.decode_tokens_per_s is inf, a throughput must be"),
    "tok_s_regex captures -5": ("-5", "diagnostics.decode_tokens_per_s is -5, a throughput must be"),
    "tok_s_regex captures 0": ("0", "diagnostics.decode_tokens_per_s is 0, a throughput must be"),
}


@pytest.mark.parametrize("case", sorted(REGEX))
def test_a_rate_no_engine_measures_fails_the_run(case: str, tmp_path: Path, monkeypatch, capsys) -> None:
    rate, says = REGEX[case]
    bad = command_arm("bad", env={"FAKE_PLAIN": "1", "FAKE_TOK_S": rate}, tok_s_regex=RATE_RX)
    _session_fails_the_bad_arm(tmp_path, bad, says, monkeypatch, capsys)


# --- a command arm's result JSON ------------------------------------------------------------

ONLY_DECODE_MS = {"ms_per_token": None, "decode_tokens_per_s": None}
JSON_CASES: dict[str, tuple[dict[str, str], str]] = {
    "json decode_ms -5 (tok/s -1600)": ({"FAKE_DIAG": json.dumps({"decode_ms": -5, **ONLY_DECODE_MS})},
                                        "engine result: diagnostics.decode_ms is -5, a time must be a finite "
                                        "number >= 0"),
    "json decode_ms 0": ({"FAKE_DIAG": json.dumps({"decode_ms": 0, **ONLY_DECODE_MS})},
                         "diagnostics.decode_ms is 0"),
    "json ms_per_token -2 alone": ({"FAKE_DIAG": json.dumps({"decode_ms": None, "ms_per_token": -2,
                                                             "decode_tokens_per_s": None})},
                                   "diagnostics.ms_per_token is -2"),
    "json decode_tokens_per_s -5 alone": ({"FAKE_DIAG": json.dumps({"decode_ms": None, "ms_per_token": None,
                                                                    "decode_tokens_per_s": -5})},
                                          "diagnostics.decode_tokens_per_s is -5"),
    "json prefill_ms -1": ({"FAKE_DIAG": json.dumps({"prefill_ms": -1})}, "diagnostics.prefill_ms is -1"),
    "json phase_ms verify -2": ({"FAKE_DIAG": json.dumps({"phase_ms": {"draft": 1.0, "verify": -2}})},
                                "diagnostics.phase_ms.verify is -2"),
    "json rounds_log verify_ms -1": ({"FAKE_DIAG": json.dumps({"rounds_log": [
        {"offset": 0, "accepted": 1, "proposed": 2, "verify_ms": -1}]})}, "diagnostics.rounds_log[0].verify_ms is -1"),
    "json gate probe_ms -3": ({"FAKE_RESULT": json.dumps({"gate": {"outcome": "not_applicable", "probe_ms": -3}})},
                              "gate.probe_ms is -3"),
    "json token id -1": ({"FAKE_RESULT": json.dumps({"token_ids": [-1] + [98] * 7})},
                         "token_ids[0] is -1, a token id must be a whole number >= 0"),
    "json token id 1.5": ({"FAKE_RESULT": json.dumps({"token_ids": [97, 1.5] + [98] * 6})}, "token_ids[1]"),
    "json generated_tokens 0 and no ids": ({"FAKE_RESULT": json.dumps({"token_ids": []}),
                                            "FAKE_DIAG": json.dumps({"generated_tokens": 0})},
                                           "diagnostics.generated_tokens is 0"),
    "json generated_tokens 0 beside 8 ids": ({"FAKE_DIAG": json.dumps({"generated_tokens": 0})},
                                             "diagnostics.generated_tokens is 0"),
    "json generated_tokens 5 contradicts 8 ids": ({"FAKE_DIAG": json.dumps({"generated_tokens": 5})},
                                                  "diagnostics.generated_tokens is 5 but token_ids holds 8 ids"),
    "json generated_tokens -3": ({"FAKE_DIAG": json.dumps({"generated_tokens": -3})},
                                 "diagnostics.generated_tokens is -3"),
    "json proposed -1": ({"FAKE_DIAG": json.dumps({"proposed": -1})}, "diagnostics.proposed is -1, a count must be"),
}


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_a_result_json_no_engine_measures_fails_the_run(case: str, tmp_path: Path, monkeypatch, capsys) -> None:
    env, says = JSON_CASES[case]
    _session_fails_the_bad_arm(tmp_path, command_arm("bad", env=env), says, monkeypatch, capsys)


# --- an in-process adapter's result dict (NaN and infinity come only this way or by regex) ----

def _good_result() -> dict[str, Any]:
    ids = [97 + i for i in range(8)]
    return {"token_ids": ids, "text": "".join(map(chr, ids)),
            "diagnostics": {"mode": "classic", "generated_tokens": 8, "prefill_ms": 1.0, "decode_ms": 80.0,
                            "phase_ms": {"target_step": 79.0, "residual": 1.0}, "acceptance_rate": None}}


def _diag(**kw: Any) -> Callable[[dict[str, Any]], None]:
    return lambda r: r["diagnostics"].update(kw)


IN_PROCESS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "in-process decode_ms nan": (_diag(decode_ms=math.nan), "diagnostics.decode_ms is nan"),
    "in-process decode_ms -5": (_diag(decode_ms=-5.0), "diagnostics.decode_ms is -5"),
    "in-process prefill_ms inf": (_diag(prefill_ms=math.inf), "diagnostics.prefill_ms is inf"),
    "in-process phase_ms nan": (_diag(phase_ms={"target_step": math.nan, "residual": 1.0}),
                                "diagnostics.phase_ms.target_step is nan"),
    "in-process decode_tokens_per_s inf": (_diag(decode_ms=None, decode_tokens_per_s=math.inf),
                                           "diagnostics.decode_tokens_per_s is inf"),
    "in-process acceptance_rate nan": (_diag(acceptance_rate=math.nan),
                                       "diagnostics.acceptance_rate is nan, a number must be finite"),
    "in-process token id -1": (lambda r: r["token_ids"].__setitem__(3, -1), "token_ids[3] is -1"),
    "in-process no token": (lambda r: r.update(token_ids=[], text="") or r["diagnostics"].pop("generated_tokens"),
                            "diagnostics.generated_tokens is 0"),
}


@pytest.mark.parametrize("case", sorted(IN_PROCESS))
def test_an_in_process_result_no_engine_measures_fails_the_run(case: str, tmp_path: Path, monkeypatch,
                                                                capsys) -> None:
    from harness.collect import engines
    change, says = IN_PROCESS[case]

    class InProcess:
        """Every arm's adapter is an in-process one here; the arm named bad returns `change`d results."""

        def run(self, req: Any) -> Any:
            result = _good_result()
            if req.arm.name == "bad":
                change(result)
            return engines.run_in_process(req, lambda overrides: result)

    monkeypatch.setattr(engines, "_adapter", lambda kind: InProcess())
    _session_fails_the_bad_arm(tmp_path, command_arm("bad"), says, monkeypatch, capsys)


# --- every JSON writer is strict ------------------------------------------------------------

@pytest.mark.parametrize("compact", [True, False], ids=["compact record write", "indented record write"])
def test_the_record_writer_refuses_nan(compact: bool, tmp_path: Path) -> None:
    from harness.collect.record import write_json_atomic  # record.py's own writer, wherever it lives
    p = tmp_path / "r.json"
    p.write_text("{}\n")
    with pytest.raises(ValueError):
        write_json_atomic(p, {"x": math.nan}, compact=compact)
    assert p.read_text() == "{}\n" and [x.name for x in tmp_path.iterdir()] == ["r.json"]


def test_the_run_journal_refuses_nan(tmp_path: Path, monkeypatch, capsys) -> None:
    from harness.collect.record import Record
    suite = write_suite(tmp_path, [command_arm("a")], repetitions=1)
    rec = tmp_path / "r.json"
    assert _cli(["run", str(suite), "--record", str(rec)], tmp_path, monkeypatch, capsys).returncode == 0
    record = Record.load(rec)
    run = msgspec.structs.replace(record.runs[0], index=1, wall_s=math.nan)
    with pytest.raises(ValueError):
        record.add_run(run)
    journal = record.journal_path
    assert not journal.exists() or "NaN" not in journal.read_text()


# --- records an older harness wrote: such runs set aside, named, never a traceback ----------

def _old_record(tmp: Path, change: Callable[[dict[str, Any]], None]) -> tuple[Path, dict[str, Any]]:
    """The fixture record with its first measured ok run changed as an older harness kept it
    (json.dumps writes NaN and Infinity bare)."""
    data = json.loads(RECORD_FX.read_text())
    run = next(r for r in data["runs"] if not r["warmup"] and r["status"] == "ok")
    change(run)
    p = tmp / "old.json"
    p.write_text(json.dumps(data))
    return p, run


def _both(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """The run's copy and its diagnostics' (the runner copies one into the other)."""
    def change(run: dict[str, Any]) -> None:
        run[key] = value
        run["diagnostics"][key] = value
    return change


def _regex_nan(run: dict[str, Any]) -> None:
    """As the old harness kept a tok_s_regex capture of nan: a rate and nothing else."""
    run.update(decode_tokens_per_s=math.nan, ms_per_token=math.nan, token_ids=None, generated_tokens=None)
    run["diagnostics"] = {"decode_tokens_per_s": math.nan, "ms_per_token": math.nan}


def _phase_inf(run: dict[str, Any]) -> None:
    run["diagnostics"]["phase_ms"]["target_step"] = math.inf


def _token(run: dict[str, Any]) -> None:
    run["token_ids"][0] = -1


OLD_RECORDS: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "old record decode_ms -5": (lambda r: r["diagnostics"].update(decode_ms=-5.0), "diagnostics.decode_ms is -5"),
    # Version 4 kept a copy in diagnostics; the migration keeps the run's own figure only.
    "old record ms_per_token -0.625": (_both("ms_per_token", -0.625), "ms_per_token is -0.625"),
    "old record tok/s NaN": (_both("decode_tokens_per_s", math.nan), "diagnostics.decode_tokens_per_s is nan"),
    "old record tok_s_regex nan": (_regex_nan, "diagnostics.decode_tokens_per_s is nan"),
    "old record phase_ms Infinity": (_phase_inf, "diagnostics.phase_ms.target_step is inf"),
    "old record token id -1": (_token, "token_ids[0] is -1"),
    "old record generated_tokens 0": (_both("generated_tokens", 0), "diagnostics.generated_tokens is 0"),
}


@pytest.mark.parametrize("case", sorted(OLD_RECORDS))
def test_an_old_record_reports_with_such_runs_set_aside(case: str, tmp_path: Path, monkeypatch, capsys) -> None:
    change, says = OLD_RECORDS[case]
    rec, run = _old_record(tmp_path, change)
    before = rec.read_bytes()
    md = _report_ok(rec, tmp_path, monkeypatch, capsys)
    named = f"run {run['index']} ({run['arm']} on {run['prompt']}) set aside: "
    assert named in md and says in md.split(named, 1)[1].split("\n", 1)[0], md[:2500]
    assert "set aside on load: " + says.split(" is ")[0] in md   # the Rows thrown away row
    assert rec.read_bytes() == before


def test_resuming_a_record_that_holds_nan_writes_strict_json(tmp_path: Path, monkeypatch, capsys) -> None:
    suite = write_suite(tmp_path, [command_arm("a")])
    rec = tmp_path / "r.json"
    assert _cli(["run", str(suite), "--record", str(rec)], tmp_path, monkeypatch, capsys).returncode == 0
    data = json.loads(rec.read_text())
    data.update(complete=False, finished=None, runs=data["runs"][:1])
    data["runs"][0]["decode_tokens_per_s"] = math.nan
    data["runs"][0]["diagnostics"]["decode_tokens_per_s"] = math.nan
    rec.write_text(json.dumps(data))
    r = _cli(["run", "--resume", str(rec)], tmp_path, monkeypatch, capsys)
    assert r.returncode == 1, r.stderr[-2000:]
    runs = _strict(rec)["runs"]
    assert [x["status"] for x in runs] == ["failed", "ok"], runs
    # The NaN is left out: null where the run keeps the field, absent from its diagnostics.
    assert "set_aside" in runs[0]["marks"] and runs[0]["decode_tokens_per_s"] is None, runs[0]
    assert "decode_tokens_per_s" not in runs[0]["diagnostics"], runs[0]
    md = _report_ok(rec, tmp_path, monkeypatch, capsys)
    assert "run 0 (a on p1) set aside: diagnostics.decode_tokens_per_s is nan" in md, md[:2000]


# --- a record whose runs do not match its suite: one line, exit 2, the file left as it was ----

def _refused(argv: list[str], rec: Path, says: str, tmp: Path, monkeypatch: Any, capsys: Any) -> None:
    before = rec.read_bytes()
    r = _cli(argv, tmp, monkeypatch, capsys)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith(f"harness: {rec}: run "), r.stderr
    assert says in lines[0], lines[0]
    assert rec.read_bytes() == before


def _fixture_run(i: int, **kw: Any) -> Callable[[dict[str, Any]], None]:
    return lambda data: data["runs"][i].update(kw)


def _twice(data: dict[str, Any]) -> None:
    data["runs"][6]["index"] = data["runs"][5]["index"]


REPORT_CASES: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "report: a run names an arm its suite lacks": (_fixture_run(7, arm="ghost"), "run 7 names arm 'ghost'"),
    "report: a run names a prompt its suite lacks": (_fixture_run(7, prompt="ghost"), "run 7 names prompt 'ghost'"),
    "report: a run names a pairing its suite lacks": (_fixture_run(7, pairing="ghost"),
                                                      "run 7 names pairing 'ghost'"),
    "report: a run index twice": (_twice, "run 5 appears twice"),
}


@pytest.mark.parametrize("case", sorted(REPORT_CASES))
def test_a_record_that_does_not_match_its_suite_is_one_line(case: str, tmp_path: Path, monkeypatch,
                                                            capsys) -> None:
    change, says = REPORT_CASES[case]
    data = json.loads(RECORD_FX.read_text())
    assert [r["index"] for r in data["runs"]] == list(range(len(data["runs"])))
    change(data)
    rec = tmp_path / "bad.json"
    rec.write_text(json.dumps(data))
    _refused(["report", str(rec)], rec, says, tmp_path, monkeypatch, capsys)


def _unfinished(tmp: Path, monkeypatch: Any, capsys: Any) -> Path:
    """A two-arm session's record (plan: 0 a, 1 b, 2 b, 3 a), its last run dropped: resumable."""
    suite = write_suite(tmp, [command_arm("a"), command_arm("b")])
    rec = tmp / "r.json"
    assert _cli(["run", str(suite), "--record", str(rec)], tmp, monkeypatch, capsys).returncode == 0
    data = json.loads(rec.read_text())
    assert [(r["index"], r["arm"], r["repetition"]) for r in data["runs"]] == \
        [(0, "a", 0), (1, "b", 0), (2, "b", 1), (3, "a", 1)]
    data.update(complete=False, finished=None, runs=data["runs"][:3])
    rec.write_text(json.dumps(data))
    return rec


def _edit(rec: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(rec.read_text())
    change(data)
    rec.write_text(json.dumps(data))


def _journal_twice(rec: Path) -> None:
    """A journal that holds one run twice (the record holds runs 0 and 1)."""
    data = json.loads(rec.read_text())
    run = data["runs"].pop()
    rec.write_text(json.dumps(data))
    line = json.dumps(run) + "\n"
    rec.with_name(rec.name + ".journal").write_text(line + line)


RESUME_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "resume: a run names an arm its suite lacks": (lambda p: _edit(p, _fixture_run(1, arm="ghost")),
                                                  "run 1 names arm 'ghost'"),
    "resume: a run index twice": (lambda p: _edit(p, lambda d: d["runs"][2].update(index=1)), "run 1 appears twice"),
    "resume: a journal holding a run twice": (_journal_twice, "run 2 appears twice"),
    "resume: a run index past the plan": (lambda p: _edit(p, _fixture_run(2, index=9)),
                                          "run 9 is outside the record's plan of 4 runs"),
    "resume: a run whose arm is not the plan's": (lambda p: _edit(p, _fixture_run(0, arm="b")),
                                                 "run 0 has arm 'b' where the record's plan has 'a'"),
    "resume: a run whose repetition is not the plan's": (lambda p: _edit(p, _fixture_run(2, repetition=0)),
                                                        "run 2 has repetition 0 where the record's plan has 1"),
    "resume: a measured run marked a warm-up": (lambda p: _edit(p, _fixture_run(1, warmup=True)),
                                                "run 1 has warmup True where the record's plan has False"),
}


@pytest.mark.parametrize("case", sorted(RESUME_CASES))
def test_resuming_a_record_that_does_not_match_its_plan_is_one_line(case: str, tmp_path: Path, monkeypatch,
                                                                    capsys) -> None:
    change, says = RESUME_CASES[case]
    rec = _unfinished(tmp_path, monkeypatch, capsys)
    change(rec)
    _refused(["run", "--resume", str(rec)], rec, says, tmp_path, monkeypatch, capsys)
