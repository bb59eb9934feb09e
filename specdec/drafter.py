"""The drafter protocol the round loop calls, and the independent draft-model drafter.

Invariant between rounds: the drafter's cache holds every committed token except the newest
one (`y`, emitted but not yet fed to any model). An MTP head fits the same protocol: it sets
`wants_hidden` and seeds its next block from the target's verify hidden states in `accept`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import mlx.core as mx
import mlx.nn as nn
from mlx_lm.models.cache import make_prompt_cache, trim_prompt_cache

from specdec.diagnostics import Counts

Sampler = Callable[[mx.array], mx.array]  # logits [1, V] -> (ids [1], probs [1, V] | None)


class Drafter(Protocol):
    wants_hidden: bool
    profiles_itself: bool   # in profile mode it syncs (and times) its own stages

    def prefill(self, prompt: mx.array, hidden: mx.array | None = None, sample=None) -> None:
        """Consume all prompt tokens but the last (which the first round feeds); `hidden` is the
        target's hidden states over them, for a drafter that wants them."""

    def draft_block(self, y: mx.array, n: int, sample) -> tuple[mx.array, mx.array | None]:
        """Propose n tokens after y: (ids [n], draft probabilities [n, V] or None at temp 0). Lazy."""

    def accept(self, n_accepted: int, n_drafted: int, drafted: list[int], hidden: mx.array | None,
               emitted: list[int] | None = None, sample=None) -> None:
        """Catch up on the accepted tokens after a verify (the accept hook); `emitted` is the
        round's committed tokens, `hidden` the target's verify hidden states."""

    def state(self) -> list:
        """Arrays a profile-mode sync evaluates to settle this drafter's pending work."""

    def phase_end(self, at: float) -> None:
        """A drafter that profiles itself: the engine's draft_block or accept-hook phase ended at
        perf_counter `at` (its stages then sum to the phase)."""


class DraftModelDrafter:
    """An independent small model with its own KV cache."""

    wants_hidden = False
    profiles_itself = False

    def __init__(self, model: nn.Module, counts: Counts | None = None):
        self.model = model
        self.cache = make_prompt_cache(model)
        self.counts = counts if counts is not None else Counts()
        # Set when a whole block was accepted: its last draft was never fed to the drafter, so
        # the next block feeds it together with y (one forward, as mlx-lm does).
        self._pending: int | None = None

    def prefill(self, prompt: mx.array, hidden: mx.array | None = None, sample=None) -> None:
        if prompt.size > 1:
            self.model(prompt[None, :-1], cache=self.cache)
            self.counts.drafter_forwards += 1
            self.counts.drafter_tokens += prompt.size - 1
            mx.eval([c.state for c in self.cache])
            self.counts.host_syncs += 1

    def draft_block(self, y: mx.array, n: int, sample) -> tuple[mx.array, mx.array | None]:
        ids, probs = [], []
        x = y
        if self._pending is not None:
            x = mx.concatenate([mx.array([self._pending], dtype=y.dtype), y])
            self._pending = None
        for _ in range(n):
            logits = self.model(x[None], cache=self.cache)[:, -1, :]
            self.counts.drafter_forwards += 1
            self.counts.drafter_tokens += x.size
            tok, p = sample(logits)
            mx.async_eval(tok)  # dispatch now, no host sync: the verify readout syncs
            ids.append(tok)
            if p is not None:
                probs.append(p)
            x = tok
        if not ids:
            return mx.array([], dtype=mx.uint32), None
        return mx.concatenate(ids).astype(mx.uint32), (mx.concatenate(probs) if probs else None)

    def accept(self, n_accepted: int, n_drafted: int, drafted: list[int], hidden: mx.array | None,
               emitted: list[int] | None = None, sample=None) -> None:
        # The cache now holds y plus drafts 1..n-1 (n_drafted positions); committed are y plus
        # the accepted drafts. A fully accepted block leaves the last draft to feed next round.
        if n_drafted == 0:
            return
        if n_accepted == n_drafted:
            self._pending = drafted[-1]
        else:
            self.rollback(n_drafted - 1 - n_accepted)

    def rollback(self, n: int) -> None:
        if n > 0:
            trim_prompt_cache(self.cache, n)

    def state(self) -> list:
        return [c.state for c in self.cache]
