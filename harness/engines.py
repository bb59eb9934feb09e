"""Engine adapters: specdec in-process, stock mlx-lm in-process, and any CLI (command).

Every adapter returns an `EngineOutput` whose `result` has the shape of specdec's result JSON
(docs/architecture.md), so the runner and every analysis see one shape. An adapter raises
`EngineFailure` for a crashed or timed-out run; the runner records it and goes on.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Protocol

from harness.suite import EMBEDDED, Arm, Pairing, Prompt, Settings

STDERR_TAIL_CHARS = 2000


@dataclass(frozen=True)
class RunRequest:
    arm: Arm
    pairing: Pairing
    prompt: Prompt
    settings: Settings


@dataclass
class EngineOutput:
    result: dict[str, Any]          # specdec's result JSON shape
    overrides: dict[str, str]       # arm env + inherited prefixed env, as the engine saw it
    stderr_tail: str | None = None


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


def _failure_from_exception(e: BaseException, overrides: dict[str, str]) -> EngineFailure:
    return EngineFailure(f"{type(e).__name__}: {e}", _tail(traceback.format_exc()), overrides)


# --- specdec in-process ----------------------------------------------------------------

class SpecdecAdapter:
    """Loads each pairing once per distinct arm env (env may change how the pair loads)."""

    def __init__(self) -> None:
        self._pairs: dict[tuple, Any] = {}

    def run(self, req: RunRequest) -> EngineOutput:
        arm, s = req.arm, req.settings
        with env_applied(arm.env):
            overrides = overrides_in_force(arm.env, os.environ, s.override_prefixes, s.override_ignore)
            try:
                from specdec.engine import generate
                pair = self._pair(req)
                res = generate(pair, req.prompt.text, block=arm.block, max_tokens=s.max_tokens,
                               temp=s.temp, seed=s.seed, ignore_eos=s.ignore_eos)
                result = res.to_dict()
            except Exception as e:  # the engine under test may fail in any way; record it
                raise _failure_from_exception(e, overrides) from None
        # The engine's own view of its overrides is a fact too; keep the union.
        overrides.update({k: str(v) for k, v in (result.get("overrides") or {}).items()})
        return EngineOutput(result=result, overrides=dict(sorted(overrides.items())))

    def _pair(self, req: RunRequest) -> Any:
        key = (req.pairing, tuple(sorted(req.arm.env.items())))
        if key not in self._pairs:
            from specdec.loading import load_pair
            p = req.pairing
            # (None, None) is the engine's own embedded pair; otherwise resolved directories.
            if p.target == EMBEDDED and p.drafter == EMBEDDED:
                self._pairs[key] = load_pair(None, None)
            else:
                dd = p.drafter_dir()
                self._pairs[key] = load_pair(str(p.target_dir()), None if dd is None else str(dd))
        return self._pairs[key]


# --- stock mlx-lm in-process -----------------------------------------------------------

class MlxLmAdapter:
    """Stock mlx-lm: `generate_step` (classic) or `speculative_generate_step` (K-1 drafts).

    Timing: the harness prefills the prompt (all but its last token) into the KV caches
    itself and evaluates them, then starts the clock; decode_ms runs from handing the last
    prompt token to the generator until the last token reaches the host (mlx-lm yields
    Python ints, so each yield is a sync). It therefore includes the first decode step and
    excludes prefill and model loading, like specdec's decode_ms. mlx-lm pipelines one step
    ahead, so a step computed after the last token may still be in flight: not counted.
    There is no round split (phase_ms is empty); acceptance comes from `from_draft`.
    """

    def __init__(self) -> None:
        self._models: dict[tuple, Any] = {}

    def _load(self, path: Path, env: Mapping[str, str]) -> Any:
        key = (str(path), tuple(sorted(env.items())))
        if key not in self._models:
            from mlx_lm import load
            self._models[key] = load(str(path))
        return self._models[key]

    def run(self, req: RunRequest) -> EngineOutput:
        arm, s = req.arm, req.settings
        with env_applied(arm.env):
            overrides = overrides_in_force(arm.env, os.environ, s.override_prefixes, s.override_ignore)
            try:
                result = self._generate(req)
            except Exception as e:
                raise _failure_from_exception(e, overrides) from None
        result["overrides"] = overrides
        return EngineOutput(result=result, overrides=overrides)

    def _generate(self, req: RunRequest) -> dict[str, Any]:
        import mlx.core as mx
        import mlx_lm
        from mlx_lm.generate import generate_step, speculative_generate_step
        from mlx_lm.models.cache import make_prompt_cache
        from mlx_lm.sample_utils import make_sampler

        arm, s, pairing = req.arm, req.settings, req.pairing
        model, tok = self._load(pairing.target_dir(), arm.env)
        draft = None
        if not arm.classic:
            dd = pairing.drafter_dir()
            if dd is None:
                raise ValueError(f"arm {arm.name!r}: block {arm.block} needs a drafter")
            draft, _ = self._load(dd, arm.env)
        ids = tok.encode(req.prompt.text)
        if not ids:
            raise ValueError("the prompt encodes to no tokens")
        mx.random.seed(s.seed)
        sampler = make_sampler(temp=s.temp)
        caches = [make_prompt_cache(model)] + ([make_prompt_cache(draft)] if draft is not None else [])
        models = [model] + ([draft] if draft is not None else [])

        t0 = time.perf_counter()
        prompt = mx.array(ids, mx.uint32)
        for m, c in zip(models, caches):
            rest = prompt[:-1]
            while rest.size > 0:  # chunked like mlx-lm's own prefill
                m(rest[:512][None], cache=c)
                mx.eval([x.state for x in c])
                rest = rest[512:]
        t1 = time.perf_counter()

        last = prompt[-1:]
        if draft is None:
            stream = ((t, False) for t, _ in generate_step(
                last, model, max_tokens=s.max_tokens, sampler=sampler, prompt_cache=caches[0]))
        else:
            stream = ((t, d) for t, _, d in speculative_generate_step(
                last, model, draft, num_draft_tokens=arm.block - 1, max_tokens=s.max_tokens,
                sampler=sampler, prompt_cache=caches[0] + caches[1]))
        eos = set(getattr(tok, "eos_token_ids", None) or [])
        out_ids: list[int] = []
        flags: list[bool] = []
        t2 = t1
        for t, from_draft in stream:
            t = int(t)
            if not s.ignore_eos and t in eos:
                break
            out_ids.append(t)
            flags.append(bool(from_draft))
            t2 = time.perf_counter()
        text = tok.decode(out_ids)
        decode_ms = (t2 - t1) * 1000.0
        n = len(out_ids)
        diag = _mlx_lm_diagnostics(flags, arm.block, s.max_tokens)
        diag.update({
            "prompt_tokens": len(ids), "generated_tokens": n,
            "prefill_ms": (t1 - t0) * 1000.0, "decode_ms": decode_ms,
            "phase_ms": {}, "closure_error_ms": None,
            "decode_tokens_per_s": n / (decode_ms / 1000.0) if decode_ms > 0 else None,
            "ms_per_token": decode_ms / n if n else None,
            "profile": False, "profile_syncs": 0,
            "timing": "harness prefill excluded; first decode step to last token on host",
        })
        return {
            "text": text, "token_ids": out_ids,
            "text_sha256": hashlib.sha256(text.encode("utf-8")).hexdigest(),
            "arm": {"mode": "classic" if arm.classic else "speculative", "block": arm.block,
                    "temp": s.temp, "seed": s.seed, "max_tokens": s.max_tokens,
                    "ignore_eos": s.ignore_eos, "drafter_quantized": None,
                    "target": str(pairing.target_dir()),
                    "drafter": None if arm.classic else str(pairing.drafter_dir())},
            # Stock mlx-lm has no exactness probe: speculative decoding always engages.
            "gate": {"outcome": "not_applicable", "engaged": not arm.classic,
                     "reading": "stock mlx-lm has no exactness probe", "differing_bytes": [],
                     "logit_bytes": None, "message": "no gate in this engine"},
            "engine": {"name": "mlx-lm", "version": mlx_lm.__version__,
                       "mlx": getattr(mx, "__version__", "unknown"), "mlx_lm": mlx_lm.__version__,
                       "device": str(mx.default_device()), "blas": "unknown"},
            "diagnostics": diag,
        }


def _mlx_lm_diagnostics(flags: list[bool], block: int, max_tokens: int) -> dict[str, Any]:
    """Rebuild rounds from `from_draft`: a round is its accepted drafts then one target token.

    A round cut short by max_tokens ends after its accepted drafts, with no target token;
    such a round proposed only the drafts that fit (mlx-lm drafts min(K-1, remaining)).
    """
    if block == 1:
        return {"mode": "classic", "block_size": 1, "rounds": len(flags), "proposed": 0,
                "accepted": 0, "acceptance_rate": None, "per_step_tested": 0,
                "per_step_acceptance": None, "emitted_per_verify": 1.0 if flags else None,
                "rounds_log": []}
    k = block - 1
    rounds: list[tuple[int, int, int]] = []   # (offset, proposed, accepted)
    acc, start = 0, 0
    for f in flags:
        if f:
            acc += 1
        else:
            rounds.append((start, min(k, max_tokens - start), acc))
            start, acc = start + acc + 1, 0
    if acc:
        rounds.append((start, min(k, max_tokens - start), acc))
    proposed = sum(r[1] for r in rounds)
    accepted = sum(r[2] for r in rounds)
    tested = sum(a + (1 if a < p else 0) for _, p, a in rounds)
    by_pos_p = [0] * k
    by_pos_a = [0] * k
    first_miss = [0] * (k + 1)
    for _, p, a in rounds:
        for i in range(p):
            by_pos_p[i] += 1 if i <= a else 0   # positions tested up to the first miss
            by_pos_a[i] += 1 if i < a else 0
        first_miss[a if a < p else k] += 1
    return {
        "mode": "speculative", "block_size": block, "rounds": len(rounds),
        "proposed": proposed, "accepted": accepted,
        "acceptance_rate": accepted / proposed if proposed else None,
        "per_step_tested": tested,
        "per_step_acceptance": accepted / tested if tested else None,
        "emitted_per_verify": len(flags) / len(rounds) if rounds else None,
        "zero_accept_rounds": sum(1 for _, p, a in rounds if a == 0),
        "partial_accept_rounds": sum(1 for _, p, a in rounds if 0 < a < p),
        "full_accept_rounds": sum(1 for _, p, a in rounds if a == p),
        "proposed_by_position": by_pos_p, "accepted_by_position": by_pos_a,
        "acceptance_by_position": [a / p if p else None for a, p in zip(by_pos_a, by_pos_p)],
        "first_miss_histogram": first_miss,
        "rounds_log": [{"offset": o, "proposed": p, "accepted": a} for o, p, a in rounds],
    }


# --- any engine with a CLI --------------------------------------------------------------

class CommandAdapter:
    """Runs an argv list (never a shell) with a copy of the environment plus the arm's env.

    The result is the last non-empty stdout line parsed as specdec's result JSON; failing
    that, the arm's tok_s_regex (one capture group) over stdout then stderr.
    """

    def run(self, req: RunRequest) -> EngineOutput:
        arm, s, pairing = req.arm, req.settings, req.pairing
        assert arm.command is not None
        env = dict(os.environ)
        env.update(arm.env)
        overrides = overrides_in_force(arm.env, env, s.override_prefixes, s.override_ignore)
        with tempfile.TemporaryDirectory(prefix="harness-") as tmp:
            prompt_file = Path(tmp) / "prompt.txt"
            prompt_file.write_text(req.prompt.text, encoding="utf-8")
            dd = pairing.drafter_dir()
            values = {
                "prompt_file": str(prompt_file), "prompt": req.prompt.text,
                "max_tokens": s.max_tokens, "block": arm.block, "num_draft": arm.block - 1,
                "model": str(pairing.target_dir()), "draft_model": "" if dd is None else str(dd),
                "temp": s.temp, "seed": s.seed, "python": sys.executable,
            }
            argv = [part.format_map(values) for part in arm.command]
            stdout, stderr, rc = self._spawn(argv, env, arm.timeout_s, overrides)
        if rc != 0:
            raise EngineFailure(f"command exited with status {rc}: {argv[0]}", _tail(stderr), overrides)
        result = _parse_result(stdout, stderr, arm, s, pairing)
        if result is None:
            what = "no result JSON on the last stdout line"
            what += " and tok_s_regex did not match" if arm.tok_s_regex else " (and no tok_s_regex)"
            raise EngineFailure(what, _tail(stderr) or _tail(stdout), overrides)
        overrides.update({k: str(v) for k, v in (result.get("overrides") or {}).items()})
        result["overrides"] = dict(sorted(overrides.items()))
        return EngineOutput(result=result, overrides=result["overrides"], stderr_tail=_tail(stderr))

    @staticmethod
    def _spawn(argv: list[str], env: dict[str, str], timeout_s: float,
               overrides: dict[str, str]) -> tuple[str, str, int]:
        try:
            # Own session, so a timeout kills the whole process group, grandchildren too.
            proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, start_new_session=True)
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


def _parse_result(stdout: str, stderr: str, arm: Arm, s: Settings,
                  pairing: Pairing) -> dict[str, Any] | None:
    lines = [ln for ln in stdout.splitlines() if ln.strip()]
    if lines:
        try:
            d = json.loads(lines[-1])
        except ValueError:
            d = None
        if isinstance(d, dict) and isinstance(d.get("diagnostics"), dict) \
                and d["diagnostics"].get("decode_tokens_per_s") is not None:
            return d
    if arm.tok_s_regex:
        rx = re.compile(arm.tok_s_regex)
        for stream in (stdout, stderr):
            matches = list(rx.finditer(stream))
            if matches:
                try:
                    tps = float(matches[-1].group(1))
                except ValueError:
                    return None
                return _regex_result(tps, arm, s, pairing)
    return None


def _regex_result(tps: float, arm: Arm, s: Settings, pairing: Pairing) -> dict[str, Any]:
    """A result that knows only tok/s: no tokens, no gate, so no identity and no shipping claim."""
    return {
        "text": None, "token_ids": None, "text_sha256": None,
        "arm": {"mode": "classic" if arm.classic else "speculative", "block": arm.block,
                "temp": s.temp, "seed": s.seed, "max_tokens": s.max_tokens,
                "ignore_eos": s.ignore_eos, "drafter_quantized": None,
                "target": str(pairing.target_dir()), "drafter": None},
        "gate": {"outcome": "unknown", "engaged": None, "reading": "the engine reported only tok/s",
                 "differing_bytes": [], "logit_bytes": None, "message": ""},
        "overrides": {},
        "engine": {"name": "command", "version": "unknown"},
        "diagnostics": {"decode_tokens_per_s": tps, "ms_per_token": 1000.0 / tps if tps else None},
    }


@dataclass
class Engines:
    """One adapter per engine kind, kept for the session so loaded models are reused."""
    adapters: dict[str, Adapter] = field(default_factory=lambda: {
        "specdec": SpecdecAdapter(), "mlx-lm": MlxLmAdapter(), "command": CommandAdapter()})

    def run(self, req: RunRequest) -> EngineOutput:
        return self.adapters[req.arm.engine].run(req)
