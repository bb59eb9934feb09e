"""A persistent engine worker: one process per commit under test, so two commits can be
measured run by run, alternating, without paying a process start and a model load per run.

The worker runs this harness (the driver's) with the commit's checkout first on sys.path and
as its working directory: an in-process engine is imported from the checkout, and a
command engine runs there, so each side measures its own commit's engine. It loads each
pairing once and keeps it, like an in-process session does.

Protocol, JSON lines over pipes. The worker's first line is {"ready": true, ...} (or
{"ready": false, "error": ...}); then for each request {"arm", "pairing", "prompt"} (names in
the suite it was given) one answer {"ok": true, "result", "overrides", "stderr_tail", "dispatch_measurement_ms"} or
{"ok": false, "error", "stderr_tail", "overrides"}. Anything the engine prints goes to the
worker's stderr (a log file), never into the protocol.

`python -m harness.collect.worker --suite-json FILE --engine-root DIR`
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

import msgspec

from harness.collect.engines import EngineFailure, EngineOutput, Engines, RunRequest
from harness.collect.files import write_text_atomic
from harness.core import schema
from harness.core.redact import redact

READY_TIMEOUT_S = 120.0   # imports and the BLAS preload; models load at the first run


# --- the protocol's messages -------------------------------------------------------------

class Ready(msgspec.Struct, kw_only=True, omit_defaults=True):
    """The worker's first line: started (with its pid, engine root and what each in-process
    engine's process preparation did) or not (with the one-line error)."""
    ready: bool
    error: str | None = None
    pid: int | None = None
    engine_root: str | None = None
    prepared: dict[str, Any] | None = None


class Request(msgspec.Struct, kw_only=True):
    """One run asked of the worker: names in the suite it was given."""
    arm: str
    pairing: str
    prompt: str


class Answer(msgspec.Struct, kw_only=True):
    """The worker's answer to one request: the engine's result, or the error that ended it.
    `result` is the engine result's JSON object, decoded strictly by the driver."""
    ok: bool
    result: dict[str, Any] | None = None
    error: str | None = None
    overrides: dict[str, str] = {}
    stderr_tail: str | None = None
    dispatch_measurement_ms: float | None = None


_ENCODER = msgspec.json.Encoder()


def _line(msg: msgspec.Struct) -> str:
    return _ENCODER.encode(msg).decode("utf-8") + "\n"


# --- the worker process ----------------------------------------------------------------

def _serve(proto: IO[str], suite_json: Path, engine_root: Path) -> int:
    from harness.collect.suite import suite_from_record

    # The checkout's engine packages shadow the installed ones; the harness is already imported
    # from the driver's install, and its submodules resolve through the loaded package.
    sys.path.insert(0, str(engine_root))
    importlib.invalidate_caches()
    # A command engine is a child process: it sees the checkout through PYTHONPATH, so
    # `{python} -m package` runs this commit's source, not an installed copy.
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(engine_root), os.environ.get("PYTHONPATH")) if p)
    os.chdir(engine_root)
    info = Ready(ready=True, pid=os.getpid(), engine_root=str(engine_root))
    try:
        suite = suite_from_record(json.loads(suite_json.read_text(encoding="utf-8")), str(suite_json))
        # Only an in-process arm's engine is imported here (its BLAS preload, before anything
        # loads MLX); a command engine's process decides its own.
        from harness.core.declare import prepare_process
        info.prepared = prepare_process({suite.engine(a).name: suite.engine(a) for a in suite.arms
                                            if a.adapter != "command"}.values())
    except Exception as e:  # noqa: BLE001 - reported to the driver as one line
        proto.write(_line(Ready(ready=False, error=f"{type(e).__name__}: {e}")))
        proto.flush()
        return 2
    proto.write(_line(info))
    proto.flush()
    engines = Engines()
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            req = msgspec.json.decode(line, type=Request)
            rr = RunRequest(arm=suite.arm(req.arm), pairing=suite.pairing(req.pairing),
                            prompt=suite.prompt(req.prompt), settings=suite.settings)
            out = engines.run(rr)
            answer = Answer(ok=True, result=schema.to_builtins(out.result), overrides=out.overrides,
                            stderr_tail=out.stderr_tail, dispatch_measurement_ms=out.dispatch_measurement_ms)
        except EngineFailure as f:
            answer = Answer(ok=False, error=f.error, stderr_tail=f.stderr_tail, overrides=f.overrides)
        except Exception as e:  # noqa: BLE001 - an adapter bug fails this run, not the session
            answer = Answer(ok=False, error=f"{type(e).__name__}: {e}")
        proto.write(_line(answer))
        proto.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m harness.collect.worker")
    p.add_argument("--suite-json", required=True)
    p.add_argument("--engine-root", required=True)
    args = p.parse_args(argv)
    # The protocol keeps the real stdout; everything else printed goes to stderr.
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the driver decides when a worker ends
    return _serve(proto, Path(args.suite_json), Path(args.engine_root).resolve())


# --- the driver's side -------------------------------------------------------------------

class Worker:
    """One worker process; `run(req)` is the Engines interface the runner calls."""

    def __init__(self, name: str, engine_root: Path, suite: dict[str, Any], log_dir: Path) -> None:
        self.name = name
        self.engine_root = Path(engine_root).resolve()
        self.suite = suite
        self.log_path = Path(log_dir) / f"worker-{name}.log"
        self.info = Ready(ready=False)
        self._proc: subprocess.Popen[str] | None = None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._tmp = tempfile.TemporaryDirectory(prefix=f"harness-worker-{name}-")
        self._suite_file = Path(self._tmp.name) / "suite.json"
        self._suite_file.write_text(json.dumps(suite), encoding="utf-8")
        self.restarts = 0       # starts after the process was found dead (a crash)
        self.generation = 0     # processes started so far: a run's worker_generation
        # Held while a process is started or taken to be stopped: a thread starting the worker
        # (a restart's warm-up) and the driver closing it on Ctrl-C never leave one running.
        self._lock = threading.Lock()
        self._closed = False

    # An empty working directory: `python -m` puts it first on sys.path, and a checkout there
    # would shadow the driver's harness.
    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "a", encoding="utf-8")
        argv = [sys.executable, "-m", "harness.collect.worker", "--suite-json", str(self._suite_file),
                "--engine-root", str(self.engine_root)]
        with self._lock:
            if self._closed:
                log.close()
                raise EngineFailure(f"worker {self.name} was closed")
            self._proc = subprocess.Popen(argv, cwd=self._tmp.name, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                          stderr=log, text=True, start_new_session=True, bufsize=1)
            self._lines = queue.Queue()
            self.generation += 1
            threading.Thread(target=self._read, args=(self._proc.stdout, self._lines),
                             name=f"worker-{self.name}", daemon=True).start()
        log.close()
        first = self._next(READY_TIMEOUT_S)
        if first is None:
            raise EngineFailure(f"worker {self.name} did not start: {self.log_tail()}")
        try:
            self.info = msgspec.json.decode(first, type=Ready)
        except msgspec.DecodeError as e:   # a line that is not the protocol's: the worker is broken
            raise EngineFailure(f"worker {self.name} could not start: {e}") from None
        if not self.info.ready:
            raise EngineFailure(f"worker {self.name} could not start: {self.info.error}")

    @staticmethod
    def _read(stream: IO[str] | None, out: queue.Queue[str | None]) -> None:
        assert stream is not None
        for line in stream:
            out.put(line)
        out.put(None)

    def _next(self, timeout_s: float) -> str | None:
        try:
            return self._lines.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def log_tail(self, n: int = 2000) -> str:
        try:
            return self.log_path.read_text(encoding="utf-8", errors="replace")[-n:].strip()
        except OSError:
            return ""

    def run(self, req: RunRequest) -> EngineOutput:
        now = self._proc
        if now is None or now.poll() is not None:
            if now is not None:
                self.restarts += 1
            self.start()
        # This call's process: close() from another thread may take self._proc away meanwhile.
        proc = self._proc
        if proc is None or proc.stdin is None:
            raise EngineFailure(f"worker {self.name} was closed")
        msg = Request(arm=req.arm.name, pairing=req.pairing.name, prompt=req.prompt.name)
        try:
            proc.stdin.write(_line(msg))
            proc.stdin.flush()
        except (OSError, ValueError):   # ValueError: the pipe was closed under us
            self.stop()
            raise EngineFailure(f"worker {self.name} is gone: {self.log_tail()}") from None
        line = self._next(req.arm.timeout_s + 30.0)
        if line is None:
            alive = proc.poll() is None
            self.stop()
            raise EngineFailure(f"worker {self.name} timed out after {req.arm.timeout_s:g} s" if alive
                                else f"worker {self.name} exited: {self.log_tail(300)}", self.log_tail())
        ans = msgspec.json.decode(line, type=Answer)
        if not ans.ok or ans.result is None:
            raise EngineFailure(ans.error or "failed", ans.stderr_tail, ans.overrides)
        return EngineOutput(result=schema.decode_engine_result(ans.result), overrides=ans.overrides,
                            stderr_tail=ans.stderr_tail, dispatch_measurement_ms=ans.dispatch_measurement_ms)

    def stop(self, grace_s: float = 5.0) -> None:
        """End the worker and everything it started (its own process group): its input closed,
        then killed if it has not ended within grace_s (0: at once)."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            if proc.stdin:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()

    def close(self, grace_s: float = 5.0) -> None:
        """Stop the worker for good: no thread can start it again after this."""
        with self._lock:
            self._closed = True
        self.stop(grace_s)
        self._tmp.cleanup()
        # The log is the engine's own stderr, written by its process: secrets come out once it is done.
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
            if (clean := redact(text)) != text:
                write_text_atomic(self.log_path, clean)
        except OSError:
            pass


if __name__ == "__main__":
    raise SystemExit(main())
