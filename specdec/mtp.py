"""An MTP drafter: one decoder layer seeded from the target's hidden state, borrowing the
target's embedding and LM head (DeepSeek-V3 / Qwen3.5 MTP style).

Position p of the head takes the target's hidden state H_p (which predicted token p+1) and the
embedding of token p+1, and predicts token p+2. Its own output hidden state seeds the next
draft step. Per round:
- the accept hook (`accept`) drops the head's entries computed from its own hidden states,
  appends the committed tokens against the target's true verify hidden states, and precomputes
  the next round's first draft from the last of them (a drafter forward per round);
- `draft_block` hands out that seed and runs the remaining K-2 steps.

Profile mode (SPECDEC_PROFILE) syncs after every stage of a step and splits its time into ids
upload, layers, LM head projection, sample and readback; the stages are contiguous intervals of
one clock, so they close against the phase that contains them.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.base import create_attention_mask
from mlx_lm.models.cache import KVCache, trim_prompt_cache
from mlx_lm.models.llama import ModelArgs, TransformerBlock

from specdec.diagnostics import Counts

MODEL_TYPE = "specdec_mtp"
# Stages of one drafter forward, in order (profile mode); the accept hook adds its cache trim.
STEP_STAGES = ("ids_upload", "layers", "lm_head", "sample", "readback")


@dataclass
class MTPArgs:
    hidden_size: int              # the target's hidden size (the head reads its hidden states)
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int               # the target's vocabulary: the head projects with its LM head
    rms_norm_eps: float = 1e-5
    rope_theta: float = 10000.0
    max_position_embeddings: int = 2048
    model_type: str = MODEL_TYPE

    @classmethod
    def from_dict(cls, d: dict) -> MTPArgs:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def layer_args(self) -> ModelArgs:
        return ModelArgs(model_type="llama", hidden_size=self.hidden_size, num_hidden_layers=1,
                         intermediate_size=self.intermediate_size, num_attention_heads=self.num_attention_heads,
                         num_key_value_heads=self.num_key_value_heads, rms_norm_eps=self.rms_norm_eps,
                         vocab_size=self.vocab_size, rope_theta=self.rope_theta,
                         max_position_embeddings=self.max_position_embeddings, tie_word_embeddings=True)


class MTPHead(nn.Module):
    """The head's own weights: two input norms, the fc projection, one layer, a final norm."""

    def __init__(self, args: MTPArgs):
        super().__init__()
        self.args = args
        d = args.hidden_size
        self.enorm = nn.RMSNorm(d, eps=args.rms_norm_eps)
        self.hnorm = nn.RMSNorm(d, eps=args.rms_norm_eps)
        self.fc = nn.Linear(2 * d, d, bias=False)
        self.layer = TransformerBlock(args.layer_args())
        self.norm = nn.RMSNorm(d, eps=args.rms_norm_eps)

    def __call__(self, embeds: mx.array, hidden: mx.array, cache=None) -> mx.array:
        """embeds, hidden [B, S, d] -> the head's hidden state [B, S, d] (post-norm, as the
        target's final hidden state is)."""
        x = self.fc(mx.concatenate([self.enorm(embeds), self.hnorm(hidden)], axis=-1))
        x = self.layer(x, create_attention_mask(x, cache), cache=cache)
        return self.norm(x)


def is_mtp_dir(model_dir: Path) -> bool:
    try:
        return json.loads((model_dir / "config.json").read_text()).get("model_type") == MODEL_TYPE
    except (OSError, ValueError, AttributeError):
        return False


def load_head(model_dir: Path) -> MTPHead:
    args = MTPArgs.from_dict(json.loads((model_dir / "config.json").read_text()))
    head = MTPHead(args)
    weights = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        weights.update(mx.load(str(f)))
    head.load_weights(list(weights.items()), strict=True)
    mx.eval(head.parameters())  # at load: no sync of a generation
    return head


def target_parts(target: nn.Module):
    """(embedding, LM head, hidden-state forward) of an mlx-lm target; the LM head is the
    embedding read as a linear layer when the target ties them."""
    inner = getattr(target, "model", None)
    if inner is None or not hasattr(inner, "embed_tokens"):
        raise ValueError("the target does not expose model.embed_tokens (an mlx-lm model with an inner .model)")
    args = getattr(target, "args", None)
    tied = getattr(args, "tie_word_embeddings", True) or not hasattr(target, "lm_head")
    lm_head = inner.embed_tokens.as_linear if tied else target.lm_head
    return inner.embed_tokens, lm_head, inner


def borrowed_tensors(target: nn.Module) -> dict[str, str]:
    """What the head reads from the target, by role -> the target's parameter prefix."""
    args = getattr(target, "args", None)
    tied = getattr(args, "tie_word_embeddings", True) or not hasattr(target, "lm_head")
    return {"embedding": "model.embed_tokens.", "lm_head": "model.embed_tokens." if tied else "lm_head."}


class MTPDrafter:
    """The Drafter protocol (specdec.drafter) for an MTP head.

    Invariant between rounds: the head's cache holds positions up to the one before the newest
    committed token y, and `_seed` is its proposal for the token after y (with the head's
    hidden state there), or None when it has no target hidden state yet (a 1-token prompt)."""

    wants_hidden = True
    profiles_itself = True

    def __init__(self, head: MTPHead, target: nn.Module, profile: bool = False, counts: Counts | None = None):
        self.head = head
        self.counts = counts if counts is not None else Counts()
        self.embed, self.lm_head, _ = target_parts(target)
        self.cache = [KVCache()]
        self.profile = profile
        self._seed: tuple[mx.array, mx.array | None, mx.array] | None = None  # (id [1], probs, hidden [1,1,d])
        self._fed = 0                     # head cache entries added by the last draft_block
        self.split = {"draft_block": _Split(), "accept_hook": _Split()}
        self._clock: _Clock | None = None  # the open phase's clock, until phase_end

    # --- the protocol ------------------------------------------------------------------

    def prefill(self, prompt: mx.array, hidden: mx.array | None = None, sample=None) -> None:
        """hidden: the target's hidden states over prompt[:-1] ([1, L-1, d]); the last position
        seeds the first round."""
        if hidden is None or prompt.size < 2:
            return
        self._seed = self._forward(prompt[1:][None], hidden, None, sample)
        mx.eval([c.state for c in self.cache])
        self.counts.host_syncs += 1

    def draft_block(self, y: mx.array, n: int, sample, started: float | None = None) -> tuple[mx.array, mx.array | None]:
        """started: the perf_counter reading where the caller's draft_block phase began (profile
        mode): the time from there to the first stage is the stage "entry"."""
        self._fed = 0
        split = self.split["draft_block"]
        clock = self._clock = _Clock(self.profile, split, started, self.counts)
        if n <= 0 or self._seed is None:
            clock.done()
            return mx.array([], dtype=mx.uint32), None
        tok, p, h = self._seed
        ids, probs = [tok], ([p] if p is not None else [])
        for _ in range(n - 1):
            split.forwards += 1
            tok, p, h = self._forward(tok[None], h, clock, sample)
            self._fed += 1
            ids.append(tok)
            if p is not None:
                probs.append(p)
        out = mx.concatenate(ids).astype(mx.uint32), (mx.concatenate(probs) if probs else None)
        clock.sync([a for a in out if a is not None])  # the block's ids, assembled (profile mode)
        clock.done()
        return out

    def accept(self, n_accepted: int, n_drafted: int, drafted: list[int], hidden: mx.array | None,
               emitted: list[int] | None = None, sample=None, started: float | None = None) -> None:
        """Append the committed tokens (accepted drafts, then the target's token) against the
        target's verify hidden states, and seed the next round from the last of them."""
        split = self.split["accept_hook"]
        clock = self._clock = _Clock(self.profile, split, started, self.counts)
        if self._fed:
            trim_prompt_cache(self.cache, self._fed)
            self._fed = 0
        clock.lap("trim")
        if hidden is None or not emitted:
            self._seed = None
            clock.done()
            return
        split.forwards += 1
        ids = mx.array(emitted, dtype=mx.uint32)[None]
        self.counts.host_uploads += 1
        hid = hidden[:, :len(emitted)]
        self._seed = self._forward(ids, hid, clock, sample)
        clock.done()

    def phase_end(self, at: float) -> None:
        """The caller's phase (draft_block or the accept hook) ended at perf_counter `at`: the time
        since the last stage is the stage "exit" (profile mode), so the stages sum to the phase."""
        if self._clock is not None:
            self._clock.lap("exit", at)
            self._clock = None

    def state(self) -> list:
        out = [c.state for c in self.cache]
        if self._seed is not None:
            out += [a for a in self._seed if a is not None]
        return out

    def profile_syncs(self) -> tuple[int, float]:
        """Syncs this drafter made in profile mode, and ms spent in them (the engine's counters)."""
        return (sum(x.syncs for x in self.split.values()), sum(x.sync_ms for x in self.split.values()))

    def split_dict(self) -> dict:
        return {name: s.to_dict() for name, s in self.split.items() if s.forwards or s.ms}

    # --- one forward -------------------------------------------------------------------

    def _forward(self, ids: mx.array, hidden: mx.array, clock: _Clock | None, sample):
        """Run the head over ids [1, S] against hidden [1, S, d]; with `sample`, project the last
        position and sample it: (id [1], probs or None, hidden [1, 1, d])."""
        c = clock or _Clock(False, None)
        c.sync([ids, hidden])
        c.lap("ids_upload")
        h = self.head(self.embed(ids), hidden, cache=self.cache[0])
        self.counts.drafter_forwards += 1
        self.counts.drafter_tokens += ids.size
        c.sync([h])
        c.lap("layers")
        if sample is None:
            return None
        last = h[:, -1:, :]
        logits = self.lm_head(last)[:, -1, :]
        c.sync([logits])
        c.lap("lm_head")
        tok, p = sample(logits)
        c.sync([tok] + ([p] if p is not None else []))
        c.lap("sample")
        if c.profile:
            tok.item()
            self.counts.host_syncs += 1
        else:
            mx.async_eval(tok)  # dispatch now; the verify readout syncs
        c.lap("readback")
        return tok, p, last


@dataclass
class _Split:
    forwards: int = 0
    ms: dict | None = None
    syncs: int = 0            # profile-mode syncs and the time spent in them
    sync_ms: float = 0.0

    def add(self, stage: str, ms: float) -> None:
        if self.ms is None:
            self.ms = {}
        self.ms[stage] = self.ms.get(stage, 0.0) + ms

    def to_dict(self) -> dict:
        return {"forwards": self.forwards, "ms": dict(self.ms or {})}


class _Clock:
    """Contiguous stage intervals of one clock (profile mode only): every lap ends one stage
    and starts the next, so the stages sum to the time from the first read to `done`."""

    def __init__(self, profile: bool, split: _Split | None, started: float | None = None,
                 counts: Counts | None = None):
        self.profile = profile and split is not None
        self.split = split
        self.counts = counts
        self.t = time.perf_counter() if self.profile else 0.0
        if self.profile and started is not None:
            # The caller's phase began earlier: its bookkeeping up to here is the stage "entry".
            self.t = started
            self.lap("entry")

    def sync(self, arrays) -> None:
        if self.profile:
            s = time.perf_counter()
            mx.eval(arrays)
            self.split.syncs += 1
            if self.counts is not None:
                self.counts.host_syncs += 1
            self.split.sync_ms += (time.perf_counter() - s) * 1e3

    def lap(self, stage: str, now: float | None = None) -> None:
        if not self.profile:
            return
        now = time.perf_counter() if now is None else now
        self.split.add(stage, (now - self.t) * 1e3)
        self.t = now

    def done(self) -> None:
        # Loop bookkeeping after the last stage belongs to the last stage's neighbour: readback.
        self.lap("readback")
