"""Load a target and drafter from mlx-lm model directories and check they can pair."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx.utils import tree_flatten
from mlx_lm.utils import load as mlx_lm_load

from specdec import cuda, mtp, overrides
from specdec.errors import SpecdecError

EMBEDDED_DIR = Path(__file__).resolve().parent / "models"
EMBEDDED_TARGET = EMBEDDED_DIR / "target"
EMBEDDED_DRAFTER = EMBEDDED_DIR / "drafter"
QUANT_BITS, QUANT_GROUP = 4, 64


@dataclass
class Pair:
    target: nn.Module
    tokenizer: object  # mlx-lm TokenizerWrapper
    target_dir: Path
    drafter: nn.Module | None = None
    drafter_dir: Path | None = None
    drafter_quantization: dict = field(default_factory=dict)
    # "draft-model" (an independent small model) or "mtp" (a head on the target's hidden states,
    # borrowing its embedding and LM head: `drafter_borrows` names those target tensors).
    drafter_kind: str | None = None
    drafter_borrows: dict = field(default_factory=dict)
    # Probe readings by (block, forced): the engine probes a pair once per block, as a shipping
    # engine does at start-up, and reuses the reading; the override decision is made per call.
    probe_readings: dict = field(default_factory=dict)
    attention: dict = field(default_factory=dict)   # the attention path chosen (specdec.cuda)
    # The test-only fault's credit by fraction (engine._InjectedWork), kept with the loaded pair so
    # that F holds over a process's generations: a 32-token run at F = 0.03 is owed 0.96 forwards.
    injected: dict = field(default_factory=dict)

    @property
    def eos_ids(self) -> set[int]:
        ids = getattr(self.tokenizer, "eos_token_ids", None) or set()
        return set(ids)


def check_model_dir(path: str | Path, role: str) -> Path:
    """A directory with config.json and safetensors weights, or SpecdecError naming what is missing."""
    p = Path(path).expanduser()
    if not p.exists():
        raise SpecdecError(f"{role} model directory {p} does not exist")
    if not p.is_dir():
        raise SpecdecError(f"{role} model path {p} is not a directory (give an mlx-lm model directory)")
    if not (p / "config.json").is_file():
        raise SpecdecError(f"{role} model directory {p} has no config.json (not an mlx-lm model directory)")
    if not any(p.glob("*.safetensors")):
        raise SpecdecError(f"{role} model directory {p} has no *.safetensors weights")
    if not any((p / f).is_file() for f in TOKENIZER_FILES):
        raise SpecdecError(f"{role} model directory {p} has no tokenizer files (one of "
                           f"{', '.join(TOKENIZER_FILES)}); copy the tokenizer of the model it was made from")
    return p


# What mlx-lm's tokenizer loading reads; a directory with none of them cannot be decoded.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "tiktoken.model", "vocab.json")


def check_pair_dirs(target_dir: str | Path, drafter_dir: str | Path | None) -> None:
    """What load_pair would refuse, found without loading a model: missing files, and a drafter
    whose tokenizer.json vocabulary is not the target's (SpecdecError)."""
    t = check_model_dir(target_dir, "target")
    if drafter_dir is None:
        return
    d = check_model_dir(drafter_dir, "drafter")
    tv, dv = _file_vocab(t), _file_vocab(d)
    if tv is not None and dv is not None and tv != dv:
        only = len(set(tv.items()) ^ set(dv.items()))
        raise SpecdecError(
            f"tokenizer mismatch: target {t} has {len(tv)} tokens, drafter {d} has {len(dv)} ({only} entries "
            "differ); target and drafter must share one tokenizer")


def _file_vocab(model_dir: Path) -> dict | None:
    try:
        vocab = json.loads((model_dir / "tokenizer.json").read_text()).get("model", {}).get("vocab")
    except (OSError, ValueError, AttributeError):
        return None
    return vocab if isinstance(vocab, dict) else None


def _load(path: Path, role: str):
    try:
        return mlx_lm_load(str(path))
    except Exception as exc:  # mlx-lm raises many types for a broken directory
        # The whole message on one line: mlx-lm's lists continue below their first line.
        said = " ".join(str(exc).split())[:400] or type(exc).__name__
        raise SpecdecError(f"{role} model directory {path} could not be loaded: {said}") from None


def _vocab(tokenizer) -> dict:
    inner = getattr(tokenizer, "_tokenizer", tokenizer)
    return inner.get_vocab()


def _config_vocab(path: Path) -> int | None:
    cfg = json.loads((path / "config.json").read_text())
    return cfg.get("vocab_size") or cfg.get("text_config", {}).get("vocab_size")


def check_same_tokenizer(target_dir: Path, target_tok, drafter_dir: Path, drafter_tok) -> None:
    """Refuse a pair whose tokenizers or output vocabularies differ: drafted ids would mean other tokens."""
    tv, dv = _vocab(target_tok), _vocab(drafter_tok)
    if tv != dv:
        only = len(set(tv.items()) ^ set(dv.items()))
        raise SpecdecError(
            f"tokenizer mismatch: target {target_dir} has {len(tv)} tokens, drafter {drafter_dir} has "
            f"{len(dv)} ({only} entries differ); target and drafter must share one tokenizer")
    tn, dn = _config_vocab(target_dir), _config_vocab(drafter_dir)
    if tn != dn:
        raise SpecdecError(f"vocabulary size mismatch: target {target_dir} has {tn} logits, drafter "
                           f"{drafter_dir} has {dn}; they must share one vocabulary")


def quantize_drafter(model: nn.Module, model_dir: Path) -> dict:
    """4-bit affine, group 64, on the drafter's linear layers, unless it is already quantized."""
    cfg = json.loads((model_dir / "config.json").read_text())
    if "quantization" in cfg:
        return {"quantized": True, "how": "checkpoint already quantized", **cfg["quantization"]}
    count = 0

    def linear_that_fits(_path: str, module: nn.Module) -> bool:
        nonlocal count
        ok = isinstance(module, nn.Linear) and module.weight.shape[-1] % QUANT_GROUP == 0
        count += ok
        return ok

    nn.quantize(model, group_size=QUANT_GROUP, bits=QUANT_BITS, class_predicate=linear_that_fits)
    mx.eval(model.parameters())
    return {"quantized": True, "how": "at load", "bits": QUANT_BITS, "group_size": QUANT_GROUP,
            "mode": "affine", "linear_layers": count}


def load_pair(model_dir: str | Path | None = None, draft_model_dir: str | Path | None = None,
              quantize_drafter_: bool | None = None, with_drafter: bool = True) -> Pair:
    """Target (default: the embedded one) and, unless with_drafter is False, its drafter.

    With no model_dir the embedded pair is used and the embedded drafter comes with it; a
    user-given target gets a drafter only when draft_model_dir is given.
    """
    target_dir = check_model_dir(model_dir or EMBEDDED_TARGET, "target")
    if draft_model_dir is None and model_dir is None and with_drafter:
        draft_model_dir = EMBEDDED_DRAFTER
    drafter_dir = check_model_dir(draft_model_dir, "drafter") if (draft_model_dir and with_drafter) else None
    attention = cuda.apply_attention_default()
    target, tok = _load(target_dir, "target")
    pair = Pair(target=target, tokenizer=tok, target_dir=target_dir, attention=attention)
    if drafter_dir is not None and mtp.is_mtp_dir(drafter_dir):
        drafter = _load_mtp(drafter_dir, target, target_dir)
        pair.drafter_kind, pair.drafter_borrows = "mtp", mtp.borrowed_tensors(target)
    elif drafter_dir is not None:
        drafter, dtok = _load(drafter_dir, "drafter")
        check_same_tokenizer(target_dir, tok, drafter_dir, dtok)
        pair.drafter_kind = "draft-model"
    if drafter_dir is not None:
        if quantize_drafter_ is None:
            quantize_drafter_ = overrides.flag("SPECDEC_QUANTIZE_DRAFTER", default=True)
        pair.drafter, pair.drafter_dir = drafter, drafter_dir
        pair.drafter_quantization = (quantize_drafter(drafter, drafter_dir) if quantize_drafter_
                                     else {"quantized": False, "how": "SPECDEC_QUANTIZE_DRAFTER=0 or quantize_drafter=False"})
    return pair


def _load_mtp(path: Path, target: nn.Module, target_dir: Path) -> nn.Module:
    """An MTP head, checked against the target it reads from (hidden size, vocabulary)."""
    try:
        head = mtp.load_head(path)
        mtp.target_parts(target)
    except (ValueError, KeyError, TypeError, OSError) as exc:
        said = " ".join(str(exc).split())[:300] or type(exc).__name__
        raise SpecdecError(f"MTP drafter directory {path} could not be loaded: {said}") from None
    targs = getattr(target, "args", None)
    th, tv = getattr(targs, "hidden_size", None), getattr(targs, "vocab_size", None)
    if (th, tv) != (head.args.hidden_size, head.args.vocab_size):
        raise SpecdecError(f"MTP drafter {path} reads hidden size {head.args.hidden_size} and vocabulary "
                           f"{head.args.vocab_size}, but target {target_dir} has {th} and {tv}: it was "
                           "trained for another target")
    _check_logits_are_the_head(target, target_dir)
    return head


def _check_logits_are_the_head(target: nn.Module, target_dir: Path) -> None:
    """With an MTP drafter the verify forward projects the target's hidden states with its LM
    head itself: refuse a target whose logits are more than that (softcapping, a logit scale),
    or speculative output would differ from the target's own."""
    from mlx_lm.models.cache import make_prompt_cache

    _, lm_head, inner = mtp.target_parts(target)
    ids = mx.array([[1, 2, 3, 4]], dtype=mx.uint32)
    full = target(ids, cache=make_prompt_cache(target))
    split = lm_head(inner(ids, cache=make_prompt_cache(target)))
    if full.shape != split.shape or not bool(mx.array_equal(full, split)):
        raise SpecdecError(f"target {target_dir}: its logits are not its LM head applied to its hidden states "
                           "(it transforms them after the head, e.g. softcapping or a logit scale); an MTP "
                           "drafter's verify path would not reproduce them: use a draft model with this target")


def parameter_count(model: nn.Module) -> int:
    return sum(v.size for _, v in tree_flatten(model.parameters()))


def parameter_bytes(model: nn.Module) -> int:
    """Bytes of a model's arrays as loaded (quantized weights, scales and biases included)."""
    return sum(v.nbytes for _, v in tree_flatten(model.parameters()))


def embedded_info() -> dict:
    """Paths, parameter counts and on-disk sizes of the embedded pair."""
    out = {}
    for role, path in (("target", EMBEDDED_TARGET), ("drafter", EMBEDDED_DRAFTER)):
        cfg = json.loads((path / "config.json").read_text())
        files = sorted(path.glob("*"))
        weights = [f for f in files if f.suffix == ".safetensors"]
        from safetensors import safe_open  # header only: no weights are loaded
        params = 0
        for w in weights:
            with safe_open(str(w), framework="numpy") as fh:
                for key in fh.keys():
                    shape = fh.get_slice(key).get_shape()
                    n = 1
                    for d in shape:
                        n *= d
                    params += n
        out[role] = {"path": str(path), "parameters": params,
                     "weights_bytes": sum(w.stat().st_size for w in weights),
                     "directory_bytes": sum(f.stat().st_size for f in files if f.is_file()),
                     "architecture": cfg.get("model_type"), "layers": cfg.get("num_hidden_layers"),
                     "hidden_size": cfg.get("hidden_size"), "vocab_size": cfg.get("vocab_size")}
    training = EMBEDDED_DIR / "training.json"
    if training.exists():
        out["training"] = json.loads(training.read_text())
    return out
