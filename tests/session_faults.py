"""Faults for the session batteries (locks, disk, resume): a session interrupted after N runs, a
disk that fills at one write point, a second writer, and what the user must still have after.

Everything here goes through what both the harness of today and an older one call (os.open,
builtins.open, the runner's run_one, the CLI's main), never a module only one of them has, so a
battery case fails on the old code for the reason it names, not for an import.
"""

from __future__ import annotations

import builtins
import errno
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness_helpers import cli_in_process, command_arm, load, write_suite

TEMP_NAME = re.compile(r"\.(?P<target>.+?)\.(?:\d+\.)?[a-z0-9_]{8}\.tmp")


def suite(tmp: Path, arms: int = 2, repetitions: int = 2, **env: str) -> Path:
    """A fixture suite of `arms` command arms (classic `a`, speculative `b`), one prompt."""
    names = [("a", 1), ("b", 2), ("c", 3)][:arms]
    return write_suite(tmp, [command_arm(n, k, dict(env) or None) for n, k in names], repetitions=repetitions)


def cli(argv: list[str], cwd: Path, monkeypatch: Any, capsys: Any) -> subprocess.CompletedProcess:
    return cli_in_process([str(a) for a in argv], cwd, monkeypatch, capsys)


def complaints(r: subprocess.CompletedProcess) -> list[str]:
    """stderr without the runner's progress lines ("[3/8] run 2 arm=..."), which go there off a terminal."""
    return [ln for ln in r.stderr.splitlines() if ln.strip() and not re.match(r"\[\d+/\d+\] run ", ln)]


def one_line(r: subprocess.CompletedProcess, rc: int = 2) -> str:
    """The one `harness: ...` line a refused or failed command says, asserting it is just that."""
    lines = complaints(r)
    assert r.returncode == rc, (r.returncode, r.stderr[-2000:])
    assert "Traceback" not in r.stderr, r.stderr[-3000:]
    assert len(lines) == 1 and lines[0].startswith("harness: "), r.stderr[-2000:]
    return lines[0]


def follow_up(line: str) -> list[str]:
    """The argv after `harness` of the command a line says to finish with."""
    m = re.search(r"finish with: (.+)$", line)
    assert m, line
    words = shlex.split(m.group(1))
    assert words[0] == "harness", line
    return words[1:]


def interrupt_after(monkeypatch: Any, n: int) -> None:
    """Ctrl-C as the session's run n+1 starts (n runs kept), as the CLI's own handler raises it."""
    from harness.collect import runner
    real, calls = runner.run_one, [0]

    def run_one(*a: Any, **k: Any) -> Any:
        calls[0] += 1
        if calls[0] > n:
            raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(runner, "run_one", run_one)


def indices(path: Path) -> list[int]:
    return sorted(r["index"] for r in load(path)["runs"])


def leftovers(d: Path) -> list[str]:
    """Lock and temp files left in a directory."""
    return sorted(p.name for p in d.iterdir() if p.name.endswith((".lock", ".tmp")))


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def wait_for(cond: Callable[[], bool], timeout: float = 60.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def lock_holder(target: Path) -> dict[str, Any] | None:
    """What `.NAME.lock` beside `target` says of its holder, once it says it."""
    p = target.with_name(f".{target.name}.lock")
    try:
        data = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("pid") else None


class FullDisk:
    """Writes under `root` fail with OSError(err) where `full(kind, target)` says so.

    kind: "journal" (a record's run journal, opened to append: the write fails half-way, as a
    disk that fills mid-line does), "temp" (an atomic write's temp file beside `target`), "lock"
    (a lock file beside `target`), "file" (any other file opened to write). `appends` counts the
    journal appends so far, one per run kept; `failed` the kinds refused. healthy() ends it.
    """

    def __init__(self, monkeypatch: Any, root: Path, full: Callable[[str, str], bool], err: int = errno.ENOSPC):
        self.root, self.full, self.err = str(root), full, err
        self.appends, self.failed, self.on = 0, [], True
        self._doomed: set[int] = set()
        self._open, self._os_open, self._write = builtins.open, os.open, os.write
        monkeypatch.setattr(builtins, "open", self._builtin_open)
        monkeypatch.setattr(os, "open", self._patched_os_open)
        monkeypatch.setattr(os, "write", self._patched_write)

    def healthy(self) -> None:
        self.on = False

    def _classify(self, path: Any) -> tuple[str, str] | None:
        try:
            p = os.path.abspath(os.fspath(path))
        except TypeError:
            return None
        if not p.startswith(self.root + os.sep):
            return None
        name = os.path.basename(p)
        if name.endswith(".journal"):
            return "journal", name[:-len(".journal")]
        if name.startswith(".") and name.endswith(".lock"):
            return "lock", name[1:-len(".lock")]
        m = TEMP_NAME.fullmatch(name)
        if m:
            return "temp", m.group("target")
        return "file", name

    def _refuse(self, kind: str, target: str, path: Any) -> bool:
        if self.on and self.full(kind, target):
            self.failed.append(kind)
            return True
        return False

    def _error(self, path: Any = None) -> OSError:
        return OSError(self.err, os.strerror(self.err), None if path is None else os.fspath(path))

    def _builtin_open(self, file: Any, mode: str = "r", *a: Any, **k: Any) -> Any:
        c = self._classify(file) if isinstance(file, (str, os.PathLike)) and set(mode) & set("wax+") else None
        if c is None:
            return self._open(file, mode, *a, **k)
        kind, target = c
        if kind == "journal":
            self.appends += 1
            f = self._open(file, mode, *a, **k)
            return _HalfWrites(f, self._error()) if self._refuse(kind, target, file) else f
        if self._refuse(kind, target, file):
            raise self._error(file)
        return self._open(file, mode, *a, **k)

    def _patched_os_open(self, path: Any, flags: int, mode: int = 0o777, *, dir_fd: int | None = None) -> int:
        writes = flags & (os.O_WRONLY | os.O_RDWR | os.O_APPEND | os.O_CREAT)
        c = self._classify(path) if writes and dir_fd is None else None
        if c is None:
            return self._os_open(path, flags, mode, dir_fd=dir_fd)
        kind, target = c
        if kind == "journal":
            self.appends += 1
            fd = self._os_open(path, flags, mode)
            if self._refuse(kind, target, path):
                self._doomed.add(fd)
            return fd
        if self._refuse(kind, target, path):
            raise self._error(path)
        return self._os_open(path, flags, mode)

    def _patched_write(self, fd: int, data: Any) -> int:
        if fd in self._doomed:
            self._doomed.discard(fd)   # half the line lands, then the disk is full
            self._write(fd, bytes(data)[:max(1, len(data) // 2)])
            raise self._error()
        return self._write(fd, data)


class _HalfWrites:
    """A file whose next write lands half its text, then fails: a disk filling mid-line."""

    def __init__(self, f: Any, error: OSError):
        self._f, self._error = f, error

    def write(self, s: Any) -> int:
        self._f.write(s[:max(1, len(s) // 2)])
        self._f.flush()
        raise self._error

    def __enter__(self) -> _HalfWrites:
        return self

    def __exit__(self, *exc: Any) -> None:
        self._f.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)
