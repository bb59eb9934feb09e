"""The contention watch in a process of its own, so that it never waits for the engine's GIL.

An in-process engine runs its decode loop in the harness's own Python process. A watch thread
there needs the GIL for every sample, and every read of /proc hands the GIL back to the engine
for up to the switch interval (5 ms): against a decode loop that holds the GIL, a thread watch
took 1-2 samples in a 0.13 s run where 20 were due (scripts/studies/watch_overhead.py). This process
samples on its own schedule and measures our tree from outside: the harness process
(root_pid), its descendants (this process is one, the engine's children too) and its parent
chain.

Protocol, JSON lines over pipes. The helper's first line is {"ready": true}. Then, per run,
{"cmd": "start", "threshold_pct", "interval_s", "predicted_s"} is answered {"started": true}
once the watch has primed, and {"cmd": "stop"} with the watch's result. Between runs the helper
takes a reading every quarter second, so a run's first samples reach back into the recent
past, as the quiet wait's readings do for a thread watch. End of input: the helper exits.

`python -m harness.collect.host.watcher --root PID`
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import IO, Any

import msgspec

from harness.collect.host.load import ForeignCpuSampler, min_window_for
from harness.collect.host.quiet import ContentionWatch

READY_TIMEOUT_S = 30.0      # the helper's start: a Python process and psutil
REPLY_TIMEOUT_S = 10.0      # a start or stop answer: a sample or two, ~1 ms
IDLE_READING_S = 0.25


class WatcherLost(Exception):
    """The helper did not answer (it died, or took longer than REPLY_TIMEOUT_S)."""


# --- the messages: JSON lines, a request on the helper's stdin, a reply on its stdout --------

class Start(msgspec.Struct, kw_only=True, tag="start", tag_field="cmd"):
    """Start a watch of the run about to begin."""
    threshold_pct: float
    interval_s: float
    predicted_s: float | None = None


class Stop(msgspec.Struct, kw_only=True, tag="stop", tag_field="cmd"):
    """Stop the watch: the run has ended."""


class Reply(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The helper's answer: ready (with its pid) once started, started, or the watch's result."""
    ready: bool = False
    pid: int | None = None
    started: bool = False
    result: dict[str, Any] | None = None


# --- the helper process ------------------------------------------------------------------

def serve(root_pid: int, inp: IO[str], out: IO[str]) -> None:
    """Answer start/stop requests until `inp` ends."""
    sampler = ForeignCpuSampler(min_window_s=min_window_for(15.0), root_pid=root_pid)
    sampler.prime()
    lock = threading.Lock()
    active: list[ContentionWatch] = []     # the watch running now, if any
    done = threading.Event()

    def idle_readings() -> None:
        while not done.wait(IDLE_READING_S):
            with lock:
                if not active:
                    sampler.prime()

    threading.Thread(target=idle_readings, name="idle-readings", daemon=True).start()

    def say(reply: Reply) -> None:
        out.write(msgspec.json.encode(reply).decode() + "\n")
        out.flush()

    say(Reply(ready=True, pid=os.getpid()))
    for line in inp:
        msg = msgspec.json.decode(line, type=Start | Stop)
        if isinstance(msg, Start):
            w = ContentionWatch(threshold_pct=msg.threshold_pct, interval_s=msg.interval_s,
                                predicted_s=msg.predicted_s, root_pid=root_pid, sampler=sampler)
            with lock:
                active.append(w)
            w.__enter__()
            say(Reply(started=True))
        else:
            with lock:
                w = active.pop()
            w.__exit__(None, None, None)
            say(Reply(result=w.result()))
    done.set()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m harness.collect.host.watcher")
    ap.add_argument("--root", type=int, required=True, help="the harness process whose tree is ours")
    args = ap.parse_args(argv)
    try:
        serve(args.root, sys.stdin, sys.stdout)
    except (KeyboardInterrupt, BrokenPipeError):   # the harness was interrupted or went away
        pass
    return 0


# --- the harness's side ----------------------------------------------------------------------

class WatchProcess:
    """One helper per session, started by the first request. `request` raises WatcherLost when
    the helper cannot start or stops answering; Watcher then watches in a thread and says so."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[str] | None = None
        self._lines: list[str] = []
        self._cond = threading.Condition()

    def _start(self) -> subprocess.Popen[str]:
        try:
            proc = subprocess.Popen([sys.executable, "-m", "harness.collect.host.watcher", "--root", str(os.getpid())],
                                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                    text=True, bufsize=1)
        except OSError as e:
            raise WatcherLost(f"cannot start the watch process: {e}") from None
        self._proc = proc
        threading.Thread(target=self._read, args=(proc,), name="watcher-reader", daemon=True).start()
        first = self._reply(READY_TIMEOUT_S)
        if not first.ready:
            self.close()
            raise WatcherLost(f"the watch process did not start: {first}")
        return proc

    def _read(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            with self._cond:
                self._lines.append(line)
                self._cond.notify_all()
        with self._cond:
            self._lines.append("")     # end of output: the helper is gone
            self._cond.notify_all()

    def _reply(self, timeout_s: float) -> Reply:
        with self._cond:
            if not self._cond.wait_for(lambda: bool(self._lines), timeout_s):
                raise WatcherLost(f"the watch process did not answer in {timeout_s:g} s")
            line = self._lines.pop(0)
        if not line:
            raise WatcherLost("the watch process exited")
        try:
            return msgspec.json.decode(line, type=Reply)
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise WatcherLost(f"the watch process wrote {line[:80]!r}") from None

    def request(self, msg: Start | Stop) -> Reply:
        proc = self._proc or self._start()
        try:
            assert proc.stdin is not None
            proc.stdin.write(msgspec.json.encode(msg).decode() + "\n")
            proc.stdin.flush()
        except (OSError, ValueError) as e:
            raise WatcherLost(f"the watch process is gone: {e}") from None
        return self._reply(REPLY_TIMEOUT_S)

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.close()    # end of input: the helper exits
        try:
            proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Watcher:
    """A session's contention watches: each in the helper process, or in a thread of this
    process once the helper could not start or stopped answering. Every result's "watcher"
    says which ("process", or "thread: " and why)."""

    def __init__(self, thread_sampler: Callable[[], Any]) -> None:
        self._proc = WatchProcess()
        self._thread_sampler = thread_sampler   # the sampler a thread watch shares (the quiet wait's)
        self.lost: str | None = None

    def watch(self, threshold_pct: float, interval_s: float, predicted_s: float | None) -> _OneWatch:
        return _OneWatch(self, threshold_pct, interval_s, predicted_s)

    def _thread_watch(self, threshold_pct: float, interval_s: float, predicted_s: float | None) -> ContentionWatch:
        return ContentionWatch(threshold_pct=threshold_pct, interval_s=interval_s, predicted_s=predicted_s,
                               sampler=self._thread_sampler())

    def close(self) -> None:
        self._proc.close()


class _OneWatch:
    def __init__(self, owner: Watcher, threshold_pct: float, interval_s: float, predicted_s: float | None) -> None:
        self._owner, self._args = owner, (threshold_pct, interval_s, predicted_s)
        self._active: Any = None
        self._result: dict[str, Any] | None = None
        self._how = "process"

    def _lose(self, why: WatcherLost) -> None:
        self._owner.lost = str(why)
        self._owner.close()

    def __enter__(self) -> _OneWatch:
        if self._owner.lost is None:
            threshold_pct, interval_s, predicted_s = self._args
            try:
                got = self._owner._proc.request(Start(threshold_pct=threshold_pct, interval_s=interval_s,
                                                      predicted_s=predicted_s))
                if not got.started:
                    raise WatcherLost(f"the watch process answered {got}")
                return self
            except WatcherLost as e:
                self._lose(e)
        self._how = f"thread: {self._owner.lost}"
        self._active = self._owner._thread_watch(*self._args).__enter__()
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        if self._active is not None:
            self._active.__exit__(exc_type, *exc)
            self._result = dict(self._active.result()) if exc_type is None else None
            return
        try:
            got = self._owner._proc.request(Stop())
            if got.result is None:
                raise WatcherLost(f"the watch process answered {got}")
            self._result = got.result
        except WatcherLost as e:
            if exc_type is not None:
                return   # the run raised (Ctrl-C reaches the helper too): its error is the one to see
            # Lost during the run: nothing watched it (0 samples marks it), the next run uses a thread.
            self._lose(e)
            self._how = f"lost during this run: {e}"
            self._result = {"samples": 0, "contended_samples": 0, "contended_fraction": None}

    def result(self) -> dict[str, Any]:
        assert self._result is not None, "result() before the watch ended"
        return {**self._result, "watcher": self._how}


if __name__ == "__main__":
    raise SystemExit(main())
