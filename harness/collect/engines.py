"""Engine adapters' common parts and the command adapter (any engine with a CLI).

Every adapter returns an `EngineOutput` whose `result` is a `harness.core.schema.EngineResult`, so
the runner and every analysis see one shape. An adapter raises `EngineFailure` for a crashed,
timed-out or malformed run; the runner records it and goes on. The in-process adapters live in
harness/collect/adapters/ (one module per engine) and are imported only when an arm uses them.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from harness.collect.host.dispatch import dispatch_measurement_ms
from harness.collect.suite import Arm, Pairing, Prompt, Settings
from harness.collect.tree import engine_tree
from harness.core.declare import builtin_modules
from harness.core.results import usable
from harness.core.schema import (
    ArmInfo,
    Diagnostics,
    EngineInfo,
    EngineResult,
    Gate,
    ResultError,
    decode_engine_result,
)

if TYPE_CHECKING:
    from harness.collect.textparse import TextParser

STDERR_TAIL_CHARS = 2000


@dataclass(frozen=True)
class RunRequest:
    arm: Arm
    pairing: Pairing
    prompt: Prompt
    settings: Settings


@dataclass
class EngineOutput:
    result: EngineResult
    overrides: dict[str, str]       # arm env + inherited prefixed env, as the engine saw it
    stderr_tail: str | None = None
    dispatch_measurement_ms: float | None = None   # right after the run (suite `dispatch_measurement`)


class EngineFailure(Exception):
    def __init__(self, error: str, stderr_tail: str | None = None,
                 overrides: dict[str, str] | None = None):
        super().__init__(error)
        self.error = error
        self.stderr_tail = stderr_tail
        self.overrides = overrides or {}


class Adapter(Protocol):
    def run(self, req: RunRequest) -> EngineOutput: ...


# --- environment ---------------------------------------------------------------------

@contextlib.contextmanager
def env_applied(env: Mapping[str, str]) -> Iterator[None]:
    """Apply an arm's env for an in-process call, then restore os.environ exactly.

    The whole environment is snapshotted, so even a variable the engine itself sets does not
    leak into the next arm.
    """
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        yield
    finally:
        for k in [k for k in os.environ if k not in saved]:
            del os.environ[k]
        for k, v in saved.items():
            if os.environ.get(k) != v:
                os.environ[k] = v


def overrides_in_force(arm_env: Mapping[str, str], environ: Mapping[str, str],
                       prefixes: tuple[str, ...] | list[str],
                       ignore: tuple[str, ...] | list[str] = ()) -> dict[str, str]:
    """Every arm env var, plus inherited vars with an engine prefix (what the engine sees)."""
    out = {k: v for k, v in environ.items()
           if any(k.startswith(p) for p in prefixes) and k not in ignore}
    out.update(arm_env)
    return dict(sorted(out.items()))


def _tail(s: str | bytes | None, n: int = STDERR_TAIL_CHARS) -> str | None:
    if s is None:
        return None
    if isinstance(s, bytes):
        s = s.decode("utf-8", "replace")
    return s[-n:]


def failure_from_exception(e: BaseException, overrides: dict[str, str]) -> EngineFailure:
    return EngineFailure(f"{type(e).__name__}: {e}", _tail(traceback.format_exc()), overrides)


def run_in_process(req: RunRequest, generate: Callable[[dict[str, str]], dict[str, Any]]) -> EngineOutput:
    """One in-process generation under the arm's env: `generate(overrides)` returns the engine's
    result dict, decoded strictly here; any exception fails this run, never the session. The
    overrides are the harness's view and the engine's own, united."""
    arm, s = req.arm, req.settings
    with env_applied(arm.env):
        overrides = overrides_in_force(arm.env, os.environ, arm.override_prefixes, s.override_ignore)
        try:
            result = decode_engine_result(generate(overrides))
        except Exception as e:  # the engine under test may fail in any way; record it
            raise failure_from_exception(e, overrides) from None
    overrides.update(result.overrides)
    return EngineOutput(result=result, overrides=dict(sorted(overrides.items())))


# --- any engine with a CLI --------------------------------------------------------------

class CommandAdapter:
    """Runs an argv list (never a shell) with a copy of the environment plus the arm's env.

    The result is what the engine's parse table reads from its text (harness.collect.textparse),
    when it declares one; else the last non-empty stdout line, one JSON object per the engine
    contract (docs/engine-contract.md, schema/engine-result.schema.json); failing that, the arm's
    tok_s_regex (one capture group) over stdout then stderr.
    """

    def run(self, req: RunRequest) -> EngineOutput:
        arm, s, pairing = req.arm, req.settings, req.pairing
        assert arm.command is not None
        env = dict(os.environ)
        env.update(arm.env)
        overrides = overrides_in_force(arm.env, env, arm.override_prefixes, s.override_ignore)
        # The environment running the harness comes first on PATH: under asv and pr-check that
        # is the commit's own, so a console-script engine is that commit's build, not whichever
        # copy the shell would find.
        env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
        with tempfile.TemporaryDirectory(prefix="harness-") as tmp:
            prompt_file = Path(tmp) / "prompt.txt"
            prompt_file.write_text(req.prompt.text, encoding="utf-8")
            dd = pairing.drafter_dir()
            values = {
                "prompt_file": str(prompt_file), "prompt": req.prompt.text,
                "max_tokens": s.max_tokens, "block": arm.block, "num_draft": arm.block - 1,
                "model": str(pairing.target_dir()), "draft_model": "" if dd is None else str(dd),
                "temp": s.temp, "seed": s.seed, "python": sys.executable,
                "ignore_eos": "1" if s.ignore_eos else "0", "tree": engine_tree(),
            }
            argv = [part.format_map(values) for part in arm.command]
            stdout, stderr, rc = self._spawn(argv, env, arm.timeout_s, overrides)
        if rc != 0:
            raise EngineFailure(f"command exited with status {rc}: {argv[0]}", _tail(stderr), overrides)
        try:
            result = parse_result(stdout, stderr, arm, s, pairing)
        except ResultError as e:
            raise EngineFailure(f"{argv[0]}: {e}", _tail(stderr) or _tail(stdout), overrides) from None
        if result.engine.name == "unknown":
            result.engine.name = arm.engine
        overrides.update(result.overrides)
        result.overrides = dict(sorted(overrides.items()))
        return EngineOutput(result=result, overrides=result.overrides, stderr_tail=_tail(stderr))

    @staticmethod
    def _spawn(argv: list[str], env: dict[str, str], timeout_s: float,
               overrides: dict[str, str]) -> tuple[str, str, int]:
        try:
            # Own session, so a timeout kills the whole process group, grandchildren too; and on
            # Linux the engine dies with the harness, even a harness killed by SIGKILL.
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True,
                                    preexec_fn=die_with_parent())
        except OSError as e:
            raise EngineFailure(f"cannot start command {argv[0]!r}: {e}", None, overrides) from None
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            raise EngineFailure(f"command timed out after {timeout_s:g} s: {argv[0]}",
                                _tail(err) or _tail(out), overrides) from None
        except BaseException:
            # Ctrl-C while the command runs: do not leave it behind.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
        return out, err, proc.returncode


PR_SET_PDEATHSIG = 1   # linux/prctl.h


def die_with_parent() -> Callable[[], None] | None:
    """A preexec_fn under which the kernel SIGKILLs the child when this process dies, however it
    dies (Linux: prctl(PR_SET_PDEATHSIG)); None elsewhere. macOS has no such call: there an engine
    outlives a harness killed by SIGKILL (a timeout, Ctrl-C and SIGTERM still kill its process
    group), as docs/engine-contract.md says. The signal comes when the *thread* that started the
    child ends, so engines are started from the session's own thread (the runner's), never a
    short-lived one. What the child runs is one ctypes call and getppid: nothing that takes a
    lock another thread could hold at the fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    # Built here, in the parent: prctl is variadic, so each argument goes as a full C long.
    args = (ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0),
            ctypes.c_ulong(0), ctypes.c_ulong(0))
    parent = os.getpid()

    def preexec() -> None:
        prctl(*args)
        if os.getppid() != parent:   # the harness died before prctl took hold: no signal will come
            os.kill(os.getpid(), signal.SIGKILL)
    return preexec


CONTRACT = "see docs/engine-contract.md"


def parse_result(stdout: str, stderr: str, arm: Arm, s: Settings, pairing: Pairing) -> EngineResult:
    """The engine's result from its output; ResultError says what is missing and what to do."""
    if arm.parser is not None:
        parser: TextParser = arm.parser   # the suite's Arm holds it untyped
        return parser.result(stdout, stderr, _arm_info(arm, s, pairing))
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    last = lines[-1].strip() if lines else ""
    json_error: ResultError | None = None
    if last.startswith("{"):
        try:
            return decode_engine_result(last)
        except ResultError as e:
            json_error = e
    if arm.tok_s_regex:
        rx = re.compile(arm.tok_s_regex)
        for stream in (stdout, stderr):
            matches = list(rx.finditer(stream))
            if matches:
                try:
                    return _regex_result(float(matches[-1].group(1)), arm, s, pairing)
                except ValueError:
                    raise ResultError(f"tok_s_regex matched {matches[-1].group(0)!r}, "
                                      "whose first group is not a number") from None
    if json_error is not None:
        raise ResultError(f"last stdout line: {json_error}; {CONTRACT}")
    seen = f"it reads {last[:80]!r}" if last else "stdout is empty"
    what = f"no result JSON on the last stdout line ({seen})"
    what += "; tok_s_regex did not match either" if arm.tok_s_regex else ""
    raise ResultError(f"{what}: print one JSON object with token_ids (or diagnostics.generated_tokens) "
                      f"and diagnostics.decode_ms (or ms_per_token, decode_tokens_per_s); {CONTRACT}")


def _regex_result(tps: float, arm: Arm, s: Settings, pairing: Pairing) -> EngineResult:
    """A result that knows only tok/s: no tokens, no gate, so no identity and no shipping claim."""
    return EngineResult(
        arm=_arm_info(arm, s, pairing),
        gate=Gate(outcome="unknown", reading="the engine reported only tok/s"),
        engine=EngineInfo(name=arm.engine),
        # Nothing derived from a rate the runner's gate refuses (nan, inf, <= 0): it names the rate.
        diagnostics=Diagnostics(decode_tokens_per_s=tps, ms_per_token=1000.0 / tps if usable(tps) else None))


def _arm_info(arm: Arm, s: Settings, pairing: Pairing) -> ArmInfo:
    """What the harness asked of the engine, for a result that reads only figures from text."""
    return ArmInfo(mode="classic" if arm.classic else "speculative", block=arm.block, temp=s.temp,
                   seed=s.seed, max_tokens=s.max_tokens, ignore_eos=s.ignore_eos,
                   target=str(pairing.target_dir()))


def _adapter(kind: str) -> Adapter:
    if kind == "command":
        return CommandAdapter()
    import importlib
    adapter: Adapter = importlib.import_module(builtin_modules()[kind]).ADAPTER()
    return adapter


class RunsEngines(Protocol):
    """What the runner measures through: Engines in this process, or a compare-commits worker."""

    def run(self, req: RunRequest) -> EngineOutput: ...


@dataclass
class Engines:
    """One adapter per adapter kind, made on first use and kept for the session so loaded models
    are reused; an in-process engine is imported only when an arm runs it."""
    adapters: dict[str, Adapter] = field(default_factory=dict)

    def run(self, req: RunRequest) -> EngineOutput:
        kind = req.arm.adapter
        if kind not in self.adapters:
            self.adapters[kind] = _adapter(kind)
        out = self.adapters[kind].run(req)
        if req.settings.dispatch_measurement:
            # In this process, the one that dispatched an in-process engine's work.
            out.dispatch_measurement_ms = dispatch_measurement_ms()
        return out
