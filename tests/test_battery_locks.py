"""One writer per record and per baselines file: a second writer is one line naming the holder
(pid, host, start, command) and exit 2 before any run, and the first session's runs are all kept.
A holder that dies (even kill -9) never blocks the next writer, and a holder that finishes leaves
no lock file behind.

Races need real processes: the holder is a `harness` subprocess whose engine sleeps as long as
a file says (FAKE_SLEEP_FILE), and the second writer runs in this process once the holder's first
run has started (FAKE_COUNT_FILE).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from harness_helpers import clean_env, command_arm, harness_argv, load, write_suite
from session_faults import cli, dead_pid, indices, interrupt_after, leftovers, one_line, wait_for

PLANNED = 4


def _suite(t: Path) -> Path:
    env = {"FAKE_SLEEP_FILE": str(t / "sleep"), "FAKE_COUNT_FILE": str(t / "started")}
    return write_suite(t, [command_arm("a", 1, env), command_arm("b", 2, env)], repetitions=2)


def _started(t: Path) -> int:
    try:
        return int((t / "started").read_text() or 0)
    except (OSError, ValueError):
        return 0


def _incomplete(t: Path, monkeypatch, capsys, keep: int = 1, command: str = "run") -> Path:
    """A record of `command`'s session, kept as a kill after `keep` runs leaves it."""
    s, rec = _suite(t), t / "r.json"
    argv = (["baseline", "record", s] if command == "baseline" else [command, s]) + [
        "--record", rec, "--baselines", t / "b.json"]
    assert cli(argv, t, monkeypatch, capsys).returncode == 0
    data = load(rec)
    data["complete"], data["runs"] = False, data["runs"][:keep]
    data.pop("baselines_stored", None)
    rec.write_text(json.dumps(data))
    if command == "baseline":
        (t / "b.json").unlink()
    return rec


@contextmanager
def _holder(t: Path, *args: Any) -> Iterator[subprocess.Popen]:
    """A `harness` process mid-session: its engine sleeps in its first run until the test lets
    it go (removes the sleep file); waited for, or killed, on the way out."""
    (t / "sleep").write_text("120")
    before = _started(t)
    proc = subprocess.Popen(harness_argv(*map(str, args)), cwd=t, env=clean_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _started(t) > before or proc.poll() is not None, what="the holder's first run")
        assert proc.poll() is None, proc.communicate()
        yield proc
    finally:
        (t / "sleep").unlink(missing_ok=True)
        if proc.poll() is None:
            try:
                proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


def _names_holder(line: str, proc: subprocess.Popen, what: str, target: Path, command: str) -> None:
    assert line.startswith(f"harness: {target}: this {what} is being written by another harness (pid {proc.pid} "
                           f"on {socket.gethostname()}, since "), line
    assert command in line and line.endswith("; wait for it to finish"), line


@dataclass(frozen=True)
class Race:
    id: str
    holder: Callable[[Path, Path], list[Any]]      # (tmp, suite) -> the holder's argv
    second: Callable[[Path, Path], list[Any]]      # (tmp, suite) -> the second writer's argv
    what: str                                      # the file the line names: record | baselines file
    incomplete: str | None = None                  # a record of this kind exists first (resumes)


def _run(t: Path, s: Path) -> list[Any]:
    return ["run", s, "--record", t / "r.json", "--baselines", t / "b.json"]


def _resume(t: Path, s: Path) -> list[Any]:
    return ["run", "--resume", t / "r.json"]


RACES = [
    Race("two resumes at once", _resume, _resume, "record", incomplete="run"),
    Race("a resume while the run is going", _run, _resume, "record"),
    Race("a second run onto the record a run is writing", _run, _run, "record"),
    Race("a check onto the record a run is writing", _run,
         lambda t, s: ["check", s, "--record", t / "r.json", "--baselines", t / "b.json"], "record"),
    Race("a baseline record onto the record a run is writing", _run,
         lambda t, s: ["baseline", "record", s, "--record", t / "r.json", "--baselines", t / "b2.json"], "record"),
    Race("two baseline records to the same baselines file",
         lambda t, s: ["baseline", "record", s, "--record", t / "r.json", "--baselines", t / "b.json"],
         lambda t, s: ["baseline", "record", s, "--record", t / "r2.json", "--baselines", t / "b.json"],
         "baselines file"),
    Race("a baseline record while a resumed baseline session stores there", _resume,
         lambda t, s: ["baseline", "record", s, "--record", t / "r2.json", "--baselines", t / "b.json"],
         "baselines file", incomplete="baseline"),
    Race("a resume of a baseline session while it runs",
         lambda t, s: ["baseline", "record", s, "--record", t / "r.json", "--baselines", t / "b.json"],
         _resume, "record"),
]


@pytest.mark.parametrize("race", RACES, ids=[r.id for r in RACES])
def test_a_second_writer_is_one_line_naming_the_holder_and_nothing_is_lost(race: Race, tmp_path: Path,
                                                                          monkeypatch, capsys) -> None:
    t = tmp_path
    if race.incomplete:
        _incomplete(t, monkeypatch, capsys, command=race.incomplete)
    s = _suite(t)
    if race.second(t, s)[0] == "check":   # a check needs baselines to start at all
        (t / "b.json").write_text(json.dumps({"schema_version": 1, "kind": "harness.baselines", "entries": {}}))
    holder_argv = race.holder(t, s)
    with _holder(t, *holder_argv) as proc:
        started = _started(t)
        r = cli(race.second(t, s), t, monkeypatch, capsys)
        line = one_line(r)
        target = t / ("b.json" if race.what == "baselines file" else "r.json")
        _names_holder(line, proc, race.what, target, "harness " + " ".join(map(str, holder_argv[:2])))
        assert _started(t) == started, "the refused writer ran something"
        # The holder's lock is still in place: a third writer is refused too.
        one_line(cli(race.second(t, s), t, monkeypatch, capsys))
    assert proc.returncode == 0, proc.stderr[-2000:]
    data = load(t / "r.json")
    assert data["complete"] is True and indices(t / "r.json") == list(range(PLANNED))
    assert len(data["resumes"]) == (1 if holder_argv[1] == "--resume" else 0), "a refused resume was noted"
    assert not (t / "r2.json").exists() and not (t / "b2.json").exists()
    if holder_argv[0] == "baseline" or race.incomplete == "baseline":
        assert len(json.loads((t / "b.json").read_text())["entries"]) == 2
    assert leftovers(t) == []


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill -9 of the holder", "SIGTERM of the holder"])
def test_a_holder_that_dies_never_blocks_the_next_writer(sig: int, tmp_path: Path, monkeypatch, capsys) -> None:
    t = tmp_path
    rec = t / "r.json"
    with _holder(t, *_run(t, _suite(t))) as proc:
        proc.send_signal(sig)
        proc.wait(timeout=30)
    assert proc.returncode == (-signal.SIGKILL if sig == signal.SIGKILL else 130)
    if sig == signal.SIGTERM:
        assert leftovers(t) == [], "the interrupted holder left its lock file"
    r = cli(["run", "--resume", rec], t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert load(rec)["complete"] is True and indices(rec) == list(range(PLANNED))
    assert leftovers(t) == []


@pytest.mark.parametrize("content", ["dead", "garbage", "empty"],
                         ids=["a lock file left by a dead process", "a lock file of garbage",
                              "an empty lock file"])
def test_a_lock_file_nobody_holds_does_not_block(content: str, tmp_path: Path, monkeypatch, capsys) -> None:
    t = tmp_path
    rec = _incomplete(t, monkeypatch, capsys)
    text = {"dead": json.dumps({"pid": dead_pid(), "host": socket.gethostname(), "started": "2020-01-01T00:00:00",
                                "command": ["harness", "run"]}), "garbage": "\x00not json", "empty": ""}[content]
    (t / ".r.json.lock").write_text(text)
    r = cli(["run", "--resume", rec], t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert load(rec)["complete"] is True and indices(rec) == list(range(PLANNED))
    assert leftovers(t) == []


SESSIONS = {
    "run": lambda t, s: _run(t, s),
    "check": lambda t, s: ["check", s, "--record", t / "r.json", "--baselines", t / "b.json"],
    "baseline record": lambda t, s: ["baseline", "record", s, "--record", t / "r.json", "--baselines", t / "b.json"],
    "resume": _resume,
}


@pytest.mark.parametrize("kind", list(SESSIONS), ids=[f"no lock file after a finished {k}" for k in SESSIONS])
def test_no_lock_file_is_left_after_a_session(kind: str, tmp_path: Path, monkeypatch, capsys) -> None:
    t = tmp_path
    s = _suite(t)
    if kind == "check":
        assert cli(["baseline", "record", s, "--record", t / "pre.json", "--baselines", t / "b.json"],
                   t, monkeypatch, capsys).returncode == 0
    if kind == "resume":
        _incomplete(t, monkeypatch, capsys)
    r = cli(SESSIONS[kind](t, s), t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert leftovers(t) == []


def test_no_lock_file_is_left_after_an_interrupted_session(tmp_path: Path, monkeypatch, capsys) -> None:
    t = tmp_path
    interrupt_after(monkeypatch, 1)
    r = cli(_run(t, _suite(t)), t, monkeypatch, capsys)
    assert r.returncode == 130 and "Traceback" not in r.stderr
    assert indices(t / "r.json") == [0] and leftovers(t) == []


# --- the lock itself (harness.collect.lock), in this process ----------------------------------

def test_a_second_lock_in_the_same_process_is_refused_with_the_holders_details(tmp_path: Path) -> None:
    from harness.collect.lock import Locked, acquire
    target = tmp_path / "r.json"
    with acquire(target, "record", ["harness", "run", "--resume", "r.json"]):
        with pytest.raises(Locked) as e:
            acquire(target, "record")
        assert str(e.value) == (f"{target}: this record is being written by another harness (pid {os.getpid()} on "
                                f"{socket.gethostname()}, since {json.loads((tmp_path / '.r.json.lock').read_text())['started']}, "
                                "harness run --resume r.json); wait for it to finish")
    assert leftovers(tmp_path) == []
    with acquire(target, "record"):   # released: free again
        pass


def test_a_holder_that_has_not_written_its_details_yet_is_still_refused(tmp_path: Path) -> None:
    import fcntl

    from harness.collect.lock import Locked, acquire
    path = tmp_path / ".r.json.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with pytest.raises(Locked, match=r"another harness \(no details yet\)"):
            acquire(tmp_path / "r.json", "record")
        assert path.exists(), "a refused writer removed the holder's lock file"
    finally:
        os.close(fd)


def test_a_lock_file_replaced_while_waiting_is_not_trusted(tmp_path: Path, monkeypatch) -> None:
    """The unlink race: the holder lets go (removing the file) just as we open it; we then lock a
    file no longer at the path, and must try again rather than share the lock with the next one."""
    import fcntl

    from harness.collect import lock as lock_mod
    target, path = tmp_path / "r.json", tmp_path / ".r.json.lock"
    real, calls = fcntl.flock, [0]

    def flock(fd: int, op: int) -> None:
        calls[0] += 1
        if calls[0] == 1:
            path.unlink()                 # the holder releases between our open and our flock
            path.write_text("{}")         # and a newcomer makes a new file there
        real(fd, op)
    monkeypatch.setattr(lock_mod.fcntl, "flock", flock)
    held = lock_mod.acquire(target, "record")
    monkeypatch.setattr(lock_mod.fcntl, "flock", real)
    try:
        assert calls[0] == 2, "the lock on the unlinked file was trusted"
        assert os.fstat(held._fd).st_ino == path.stat().st_ino
        with pytest.raises(lock_mod.Locked):
            lock_mod.acquire(target, "record")
    finally:
        held.release()
    assert not path.exists()
