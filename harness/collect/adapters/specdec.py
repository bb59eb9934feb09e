"""specdec in process: its declaration (phases and their roles, overrides, profile variable, prompts, tools),
its adapter, its embedded model pair, its BLAS preload and its verify-forward scaling.

The only module of the harness that imports specdec, and only inside functions: declaring the
engine loads neither specdec nor MLX.
"""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from typing import Any

from harness.collect.engines import EngineOutput, RunRequest, run_in_process
from harness.collect.models import weights_problem
from harness.collect.suite import Pairing
from harness.core.declare import EngineDecl

NAME = "specdec"


def _prompts(category: str) -> list[tuple[str, str]]:
    from specdec.prompts import load_prompts
    return [(str(n), str(t)) for n, t in load_prompts(category)]


DECLARATION = EngineDecl(
    name=NAME, adapter=NAME,
    phases=("draft_block", "verify_forward", "accept_hook", "verify_finalize", "target_step", "residual"),
    # What the analyses read: the drafter step from draft_block, the target's verify from verify_forward.
    roles={"draft": "draft_block", "verify": "verify_forward"},
    # Its own counter beside the standard ones (harness.core.counters).
    counters={"host_uploads": "token ids copied from the host to the device (the next round's input)"},
    phase_labels={"draft_block": "`draft_block`", "verify_forward": "verify forward (T={block})",
                  "accept_hook": "accept hook", "verify_finalize": "verify finalize (rollback)",
                  "target_step": "target step (T=1)", "residual": "residual",
                  # The MTP drafter's stages (diagnostics.drafter_split, profile mode).
                  "entry": "entry (round bookkeeping)", "trim": "cache trim", "ids_upload": "ids upload", "layers": "layers (fc + decoder layer)",
                  "lm_head": "LM head (borrowed)", "sample": "sample", "readback": "readback",
                  "exit": "exit (back to the round loop)"},
    overrides={
        "SPECDEC_ALLOW_INEXACT": "engages speculative decoding even where the exactness probe fails",
        "SPECDEC_PROFILE": "syncs after every round stage to attribute time (changes the timing it measures)",
        "SPECDEC_QUANTIZE_DRAFTER": "0 keeps the drafter dense instead of quantizing it to 4-bit at load",
        "SPECDEC_BLAS": "reference runs MLX's bundled reference BLAS instead of the preloaded OpenBLAS",
        "SPECDEC_CUDNN_SDPA": "1 keeps MLX's cuDNN attention on CUDA, which the engine turns off by default",
        "SPECDEC_INJECT_WORK": "test-only fault: adds a fraction of a forward's device work to every target decode forward",
        "SPECDEC_FORCE_PROBE": "test-only: fail perturbs the probe so the gate fails; pass reads it as byte-identical",
    },
    override_prefixes=("SPECDEC_", "MLX_"),
    profile_var="SPECDEC_PROFILE",
    # MLX decides device numerics: Metal on a Mac, CUDA on NVIDIA, its CPU backend (BLAS) elsewhere.
    numerics="MLX (Metal / CUDA; CPU BLAS on a CPU device)",
    tools={"scaling": "python -m specdec scaling"},
    split_notes={"default": "draft_block is the host issuing the drafter; its device work finishes inside "
                            "verify_forward (unattributed)",
                 "profile": "one sync after each stage"},
    prompt_loader=_prompts,
    prepare_process=lambda: preload_blas(),   # defined below; resolved when called
    default_for_undeclared_arms=True,
)


def embedded_dir(which: str) -> Path:
    """specdec's embedded model directory, found without importing (and so loading MLX)."""
    spec = importlib.util.find_spec(NAME)
    if spec is None or not spec.submodule_search_locations:
        return Path(NAME) / "models" / which
    return Path(list(spec.submodule_search_locations)[0]) / "models" / which


def preload_blas() -> str | None:
    """Import specdec before anything imports mlx.core, so its OpenBLAS preload takes effect for
    an in-process run; returns the package directory, None when specdec is absent or broken."""
    if importlib.util.find_spec(NAME) is None:
        return None
    try:
        mod = importlib.import_module(NAME)
    except Exception:  # a broken engine checkout shows up in its runs, not here
        return None
    if mod.__file__ is None:   # a bare `specdec/` directory on sys.path, imported as a namespace
        return None
    return str(Path(mod.__file__).resolve().parent)


def check_inputs(pairing: Any) -> str | None:
    """What the engine would refuse for this pairing (missing files, a tokenizer mismatch),
    found before the session starts; None when it would load."""
    if not (pairing.target == "embedded" and pairing.drafter == "embedded"):
        from specdec.errors import SpecdecError
        from specdec.loading import check_pair_dirs
        try:
            check_pair_dirs(pairing.target_dir(), pairing.drafter_dir())
        except SpecdecError as e:
            return str(e)
    return weights_problem({"target": pairing.target_dir(), "drafter": pairing.drafter_dir()})


def measure_scaling(pairing: Any, context_tokens: int = 512) -> dict[str, Any]:
    """Verify-forward cost scaling of a pairing's target at T = 1, 2, 3, 4, 8."""
    from specdec.loading import load_pair
    from specdec.scaling import verify_forward_cost_scaling
    pair = load_pair(pairing.target_dir(), with_drafter=False)
    out = verify_forward_cost_scaling(pair.target, context_tokens=context_tokens)
    out.update(pairing=pairing.name, target=str(pairing.target_dir()))
    return out


class SpecdecAdapter:
    """Loads each pairing once per distinct arm env (env may change how the pair loads)."""

    def __init__(self) -> None:
        self._pairs: dict[tuple[Pairing, tuple[tuple[str, str], ...]], Any] = {}

    def run(self, req: RunRequest) -> EngineOutput:
        return run_in_process(req, lambda _overrides: self._generate(req))

    def _generate(self, req: RunRequest) -> dict[str, Any]:
        from specdec.engine import generate
        s = req.settings
        res = generate(self._pair(req), req.prompt.text, block=req.arm.block, max_tokens=s.max_tokens,
                       temp=s.temp, seed=s.seed, ignore_eos=s.ignore_eos)
        return res.to_dict()

    def _pair(self, req: RunRequest) -> Any:
        key = (req.pairing, tuple(sorted(req.arm.env.items())))
        if key not in self._pairs:
            from specdec.loading import load_pair
            p = req.pairing
            # (None, None) is the engine's own embedded pair; otherwise resolved directories.
            if p.target == "embedded" and p.drafter == "embedded":
                self._pairs[key] = load_pair(None, None)
            else:
                dd = p.drafter_dir()
                self._pairs[key] = load_pair(str(p.target_dir()), None if dd is None else str(dd))
        return self._pairs[key]


ADAPTER = SpecdecAdapter
