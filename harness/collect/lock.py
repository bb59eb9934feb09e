"""One writer at a time per file: the lock a session holds, from before its first run to its
last write, on the record it writes (and so its journal) and on a baselines file it writes.

The lock is fcntl.flock on `.NAME.lock` beside the file; the lock file holds the holder's pid,
host, start time and command as JSON, for the one line a second writer gets. The kernel drops
a flock when its holder dies (even kill -9), so a lock file left behind never blocks: the next
writer takes it. The holder removes the file when it lets go; a writer that opened the file just
before that finds, once it holds the lock, that the path is gone or names another file, and
tries again (the unlink race).

Where fcntl does not exist (Windows), nothing is locked: two writers are not refused there, and
the last record written wins, as before this lock.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import shlex
import socket
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType

import msgspec

from harness.collect.files import remove_stale_temps
from harness.core.errors import UserError

try:
    import fcntl
except ImportError:   # Windows: see the module docstring
    fcntl = None  # type: ignore[assignment]

# Tries after losing the unlink race; each loss means the holder let go meanwhile, so a few do.
_RACE_TRIES = 50


class Locked(UserError):
    """Another process holds the lock: its one line names the holder."""


def lock_path(target: Path) -> Path:
    return target.with_name(f".{target.name}.lock")


class FileLock:
    """A held lock on `target` (a context manager; release() lets go and removes the lock file)."""

    def __init__(self, target: Path, fd: int | None):
        self.target, self.path, self._fd = target, lock_path(target), fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            # Unlink while still holding it: a waiter that opened this file then sees it gone.
            if _same_file(fd, self.path):
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
        finally:
            os.close(fd)

    def __enter__(self) -> FileLock:
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


def acquire(target: str | Path, what: str, command: Sequence[str] = ()) -> FileLock:
    """Hold the lock on `target` (the `what`: "record", "baselines file"), or raise Locked with one
    line naming the holder. OSError when the lock file cannot be written (a full disk, a read-only
    place): the caller says what that means for its session. Holding it, stale temp files of
    `target` (a killed writer's) are removed."""
    target = Path(target)
    if fcntl is None:
        return FileLock(target, None)
    path = lock_path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(_RACE_TRIES):
        # O_CLOEXEC (Python's default too): an engine child must not inherit, and so keep, the lock.
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info = _read_info(fd)
            os.close(fd)
            raise Locked(f"{target}: this {what} is being written by another harness ({describe(info)}); "
                         "wait for it to finish") from None
        except BaseException:
            os.close(fd)
            raise
        if not _same_file(fd, path):
            os.close(fd)              # the holder removed it as we opened it: take the new one
            continue
        lock = FileLock(target, fd)
        try:
            _write_info(fd, command)
            remove_stale_temps(target)
        except BaseException:
            lock.release()
            raise
        return lock
    raise UserError(f"{target}: could not lock the {what}: its lock file {path} keeps being replaced")


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)


class LockInfo(msgspec.Struct, kw_only=True):
    """What the lock file says of its holder (a field it lacks or holds oddly: not known)."""
    pid: int | None = None
    host: str | None = None
    started: str | None = None
    command: list[str] = []


def _write_info(fd: int, command: Sequence[str]) -> None:
    info = LockInfo(pid=os.getpid(), host=socket.gethostname(),
                    started=_dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds"),
                    command=list(command))
    data = (json.dumps(msgspec.to_builtins(info)) + "\n").encode()
    os.ftruncate(fd, 0)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)   # a full disk says so here, before any run, not at the first record write


def _read_info(fd: int) -> LockInfo:
    try:
        return msgspec.json.decode(os.pread(fd, 65536, 0), type=LockInfo)
    except (OSError, msgspec.DecodeError):
        return LockInfo()   # the holder has not written it yet (it just took the lock), or an odd file


def describe(info: LockInfo) -> str:
    """The holder in words: pid, host, since when, its command; what is known of it."""
    parts = []
    if info.pid:
        parts.append(f"pid {info.pid}" + (f" on {info.host}" if info.host else ""))
    if info.started:
        parts.append(f"since {info.started}")
    if info.command:
        parts.append(shlex.join(info.command))
    return ", ".join(parts) or "no details yet"
