"""Resuming: whatever a session prints as its follow-up does what it says, for every session kind
(a resumed check reports as a check, a resumed baseline session stores its baselines); temp files
a killed writer left are cleaned by the next writer, and only those; records, journals and
baselines follow the umask, as reports do.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from harness_helpers import command_arm, last_json, load, write_suite
from session_faults import cli, dead_pid, follow_up, indices, interrupt_after, leftovers, one_line

PLANNED = {"run": 4, "check": 2, "baseline": 4}


def _suite(t: Path, name: str = "fx", **env: str) -> Path:
    return write_suite(t, [command_arm("a", 1, dict(env) or None), command_arm("b", 2, dict(env) or None)],
                       name=name, repetitions=2)


def _session(kind: str, s: Path, rec: Path, b: Path, *extra: str) -> list[Any]:
    head = ["baseline", "record", s] if kind == "baseline" else [kind, s]
    return [*head, "--record", rec, "--baselines", b, *extra]


def _baselines(t: Path, b: Path, monkeypatch, capsys, s: Path | None = None) -> bytes:
    r = cli(_session("baseline", s or _suite(t, "base"), t / "base-rec.json", b), t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    return b.read_bytes()


def _interrupted(argv: list[Any], t: Path, monkeypatch, capsys, after: int = 1) -> str:
    """Run a session that Ctrl-C stops after `after` runs; its one line (exit 130)."""
    with monkeypatch.context() as m:
        interrupt_after(m, after)
        line = one_line(cli(argv, t, m, capsys), rc=130)
    assert "(complete: false); finish with: " in line, line
    return line


# --- the printed follow-up finishes every kind of session -----------------------------------

FOLLOW_UPS = [("run", "r.json"), ("check", "r.json"), ("baseline", "r.json"),
              ("run", "my records/it's r.json"), ("baseline", "my records/it's r.json")]


@pytest.mark.parametrize("kind,name", FOLLOW_UPS,
                         ids=[f"interrupted {k}{'' if n == 'r.json' else ', a path with a space and a quote'}"
                              for k, n in FOLLOW_UPS])
def test_the_printed_follow_up_finishes_the_session(kind: str, name: str, tmp_path: Path, monkeypatch, capsys) -> None:
    t, rec, b = tmp_path, tmp_path / name, tmp_path / "b.json"
    s = _suite(t)
    if kind == "check":
        _baselines(t, b, monkeypatch, capsys, s)
    line = _interrupted(_session(kind, s, rec, b), t, monkeypatch, capsys)
    assert indices(rec) == [0]
    r = cli(follow_up(line) + (["--json"] if kind == "baseline" else []), t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr and load(rec)["complete"] is True
    assert indices(rec) == list(range(PLANNED[kind])) and leftovers(rec.parent) == []
    if kind == "check":
        assert "identity against own baselines" in r.stdout and "identical" in r.stdout
    if kind == "baseline":
        out = last_json(r.stdout)
        assert out["kind"] == "harness.baselines.outcome" and [o["status"] for o in out["outcomes"]] == ["stored"] * 2
        assert len(json.loads(b.read_text())["entries"]) == 2


def test_a_resumed_baseline_update_replaces_and_keeps_history(tmp_path: Path, monkeypatch, capsys) -> None:
    t, rec, b = tmp_path, tmp_path / "r.json", tmp_path / "b.json"
    _baselines(t, b, monkeypatch, capsys, _suite(t))
    line = _interrupted(_session("baseline", _suite(t, "new", FAKE_PERTURB_AT="1"), rec, b, "--update"),
                        t, monkeypatch, capsys)
    r = cli([*follow_up(line), "--json"], t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert [o["status"] for o in last_json(r.stdout)["outcomes"]] == ["updated"] * 2
    assert all(len(e["history"]) == 1 for e in json.loads(b.read_text())["entries"].values())


def test_a_resumed_baseline_without_update_keeps_differing_baselines(tmp_path: Path, monkeypatch, capsys) -> None:
    t, rec, b = tmp_path, tmp_path / "r.json", tmp_path / "b.json"
    had = _baselines(t, b, monkeypatch, capsys, _suite(t))
    line = _interrupted(_session("baseline", _suite(t, "new", FAKE_PERTURB_AT="1"), rec, b), t, monkeypatch, capsys)
    r = cli([*follow_up(line), "--json"], t, monkeypatch, capsys)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert [o["status"] for o in last_json(r.stdout)["outcomes"]] == ["exists_differs"] * 2
    assert b.read_bytes() == had


def test_a_baseline_record_killed_before_its_baselines_were_stored_is_finished_by_resume(tmp_path: Path, monkeypatch,
                                                                                        capsys) -> None:
    t, rec, b = tmp_path, tmp_path / "r.json", tmp_path / "b.json"
    assert cli(_session("baseline", _suite(t), rec, b), t, monkeypatch, capsys).returncode == 0
    # As kill -9 leaves it between the record's last write and the baselines write.
    data = load(rec)
    data.pop("baselines_stored", None)
    rec.write_text(json.dumps(data))
    b.unlink()
    r = cli(["run", "--resume", rec], t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(json.loads(b.read_text())["entries"]) == 2 and indices(rec) == list(range(4))


def test_resuming_an_old_baseline_record_does_not_roll_back_newer_baselines(tmp_path: Path, monkeypatch,
                                                                          capsys) -> None:
    t, b = tmp_path, tmp_path / "b.json"
    old = t / "old.json"
    assert cli(_session("baseline", _suite(t), old, b), t, monkeypatch, capsys).returncode == 0
    assert cli(_session("baseline", _suite(t, "new", FAKE_PERTURB_AT="1"), t / "new.json", b, "--update"),
               t, monkeypatch, capsys).returncode == 0
    newer = b.read_bytes()
    r = cli(["run", "--resume", old], t, monkeypatch, capsys)
    assert r.returncode == 0 and "is complete; nothing to resume" in r.stderr
    assert b.read_bytes() == newer


def test_a_resumed_baseline_session_stores_where_resume_says(tmp_path: Path, monkeypatch, capsys) -> None:
    t, rec = tmp_path, tmp_path / "r.json"
    line = _interrupted(_session("baseline", _suite(t), rec, t / "b.json"), t, monkeypatch, capsys)
    r = cli([*follow_up(line), "--baselines", t / "elsewhere.json"], t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(json.loads((t / "elsewhere.json").read_text())["entries"]) == 2 and not (t / "b.json").exists()


@pytest.mark.parametrize("case", ["differs", "no baseline"],
                         ids=["resumed check of a changed output exits 1 with the check's table",
                              "resumed check of an arm with no baseline exits 1 as check does"])
def test_a_resumed_check_judges_as_check_does(case: str, tmp_path: Path, monkeypatch, capsys) -> None:
    t, rec, b = tmp_path, tmp_path / "r.json", tmp_path / "b.json"
    if case == "differs":
        _baselines(t, b, monkeypatch, capsys, _suite(t))
        s = _suite(t, "new", FAKE_PERTURB_AT="1")
    else:
        _baselines(t, b, monkeypatch, capsys, write_suite(t, [command_arm("a", 1)], name="only-a", repetitions=2))
        s = _suite(t)
    line = _interrupted(_session("check", s, rec, b), t, monkeypatch, capsys)
    r = cli(follow_up(line), t, monkeypatch, capsys)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "identity against own baselines" in r.stdout
    assert ("differs at token 1" if case == "differs" else "no_baseline") in r.stdout
    if case == "no baseline":
        assert "some arms have no baseline" in r.stderr


# --- temp files a killed writer left -------------------------------------------------------------

def _killed_writer_temp(d: Path, target: str) -> Path:
    """A temp file beside `target` as the harness names them, left by a writer that kill -9 ended."""
    code = ("import os, sys, tempfile; fd, p = tempfile.mkstemp(prefix='.%s.%d.' % (sys.argv[2], os.getpid()), "
            "suffix='.tmp', dir=sys.argv[1]); os.write(fd, b'{\"half'); print(p, flush=True); "
            "os.kill(os.getpid(), 9)")
    r = subprocess.run([sys.executable, "-c", code, str(d), target], capture_output=True, text=True)
    assert r.returncode == -9
    return Path(r.stdout.strip())


@contextmanager
def _live_process() -> Iterator[int]:
    p = subprocess.Popen(["sleep", "60"])
    try:
        yield p.pid
    finally:
        p.kill()
        p.wait()


def _resume_case(t: Path, monkeypatch, capsys) -> tuple[Path, list[Any]]:
    rec = t / "r.json"
    line = _interrupted(_session("run", _suite(t), rec, t / "b.json"), t, monkeypatch, capsys)
    return rec, follow_up(line)


def test_a_temp_file_a_killed_writer_left_is_removed_at_resume(tmp_path: Path, monkeypatch, capsys) -> None:
    rec, again = _resume_case(tmp_path, monkeypatch, capsys)
    left = _killed_writer_temp(tmp_path, "r.json")
    assert left.exists() and left.name.startswith(".r.json.")
    assert cli(again, tmp_path, monkeypatch, capsys).returncode == 0
    assert not left.exists() and leftovers(tmp_path) == []


def test_a_temp_file_of_the_baselines_is_removed_by_the_next_baseline_record(tmp_path: Path, monkeypatch,
                                                                           capsys) -> None:
    left = _killed_writer_temp(tmp_path, "b.json")
    r = cli(_session("baseline", _suite(tmp_path), tmp_path / "r.json", tmp_path / "b.json"), tmp_path,
            monkeypatch, capsys)
    assert r.returncode == 0 and not left.exists() and leftovers(tmp_path) == []


def test_a_temp_file_is_removed_when_a_new_session_takes_the_path(tmp_path: Path, monkeypatch, capsys) -> None:
    left = _killed_writer_temp(tmp_path, "r.json")   # a session killed while creating r.json
    r = cli(_session("run", _suite(tmp_path), tmp_path / "r.json", tmp_path / "b.json"), tmp_path, monkeypatch, capsys)
    assert r.returncode == 0 and not left.exists() and leftovers(tmp_path) == []


def _names_kept(live_pid: int) -> list[str]:
    dead = dead_pid()
    return [f".r.json.{live_pid}.abcdefgh.tmp",      # its writer is still running
            f".other.json.{dead}.abcdefgh.tmp",      # another file's
            f".r.json.old.{dead}.abcdefgh.tmp",      # another file's (r.json.old)
            ".r.json.notes.tmp",                     # not the harness's pattern
            f".r.json.{dead}.ABCDEFGH.tmp",
            f"r.json.{dead}.abcdefgh.tmp",
            f".r.json.{dead}.abcdefgh.tmp.bak",
            f".r.json.{dead}.abcdefg.tmp"]


@pytest.mark.parametrize("i", range(8), ids=["writer still running", "another file's temp",
                                             "a longer name's temp", "not the harness's pattern",
                                             "upper-case random part", "no leading dot", "a suffix after .tmp",
                                             "seven random characters"])
def test_files_that_are_not_a_dead_writers_temp_of_the_record_are_kept(i: int, tmp_path: Path, monkeypatch,
                                                                      capsys) -> None:
    rec, again = _resume_case(tmp_path, monkeypatch, capsys)
    with _live_process() as pid:
        name = _names_kept(pid)[i]
        (tmp_path / name).write_text("the user's, or a live writer's")
        assert cli(again, tmp_path, monkeypatch, capsys).returncode == 0
        assert (tmp_path / name).read_text() == "the user's, or a live writer's"
    assert load(rec)["complete"] is True


def test_a_reader_of_the_record_removes_no_temp_file(tmp_path: Path, monkeypatch, capsys) -> None:
    rec, _ = _resume_case(tmp_path, monkeypatch, capsys)
    left = _killed_writer_temp(tmp_path, "r.json")
    r = cli(["report", rec, "--out", tmp_path / "r.md"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert left.exists(), "a reader, holding no lock, removed a temp file"


# --- modes: records, journals, baselines and lock files follow the umask ------------------------

def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@contextmanager
def _umask(mask: int) -> Iterator[None]:
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002], ids=["umask 022", "umask 027", "umask 002"])
def test_what_a_session_writes_follows_the_umask(mask: int, tmp_path: Path, monkeypatch, capsys) -> None:
    t, rec, b = tmp_path, tmp_path / "r.json", tmp_path / "b.json"
    want = 0o666 & ~mask
    seen: dict[str, int] = {}
    from harness.collect import runner
    real = runner.run_one

    def run_one(*a: Any, **k: Any) -> Any:
        # Mid-session, after the first run: the journal (and the lock file, where there is one).
        for p in (rec.with_name(rec.name + ".journal"), t / ".r.json.lock"):
            if p.exists():
                seen[p.name] = _mode(p)
        return real(*a, **k)
    monkeypatch.setattr(runner, "run_one", run_one)
    with _umask(mask):
        r = cli(_session("baseline", _suite(t), rec, b), t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert seen.get("r.json.journal") == want, seen
    assert {n: m for n, m in seen.items() if n.endswith(".lock")} in ({}, {".r.json.lock": want})
    assert (_mode(rec), _mode(b)) == (want, want)


def test_a_resumed_record_keeps_its_own_mode(tmp_path: Path, monkeypatch, capsys) -> None:
    rec, again = _resume_case(tmp_path, monkeypatch, capsys)
    rec.chmod(0o640)
    with _umask(0o002):
        assert cli(again, tmp_path, monkeypatch, capsys).returncode == 0
    assert _mode(rec) == 0o640 and load(rec)["complete"] is True
