"""What every generation reports: counters, acceptance, and the round's time split.

Default mode reads the clock at phase boundaries but syncs only where the algorithm must (the
verify readout), so a lazy phase's device time lands in the phase that syncs. `attribution`
says which mode produced the split; PHASE_NOTES says what each figure includes.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

PHASE_NOTES = {
    "prefill_ms": "target and drafter forwards over the prompt, all but its last token; excluded from decode",
    "probe_ms": "the exactness probe (K single-token steps and one K-wide block), run once per loaded pair and block (0 when reused); excluded from decode",
    "decode_ms": "wall time from the end of prefill to the last emitted token",
    "draft_block": "host time issuing the round's drafter forwards (a draft model: K-1; an MTP head: K-2, "
                   "its first draft came from the accept hook) (default mode: device work is "
                   "asynchronous and finishes inside verify_forward; profile mode: synced here)",
    "verify_forward": "target forward over K positions and the one host readout of drafted and verified ids "
                      "(default mode: includes drafter device work still running)",
    "accept_hook": "drafter catch-up on the accepted tokens (draft model: cache trim, or the pending last "
                   "draft; MTP head: a forward over the committed tokens against the target's verify hidden "
                   "states, which also drafts the next round's first token)",
    "verify_finalize": "target KV rollback of the rejected tail",
    "residual": "the walk over drafted vs verified ids, sampling bookkeeping, EOS checks, logging",
    "target_step": "classic decode: one target forward per token and its readout (pipelined one step ahead)",
    "peak_memory_bytes": "MLX's peak memory over prefill and decode (its counter reset after the probe): "
                         "everything resident (both models' weights) plus the KV caches and activations",
    "resident_memory_bytes": "MLX's memory in use when the counter was reset: every loaded model's weights "
                             "(a process may hold several pairs) and caches",
    "model_memory_bytes": "the weights this generation used, as loaded: the target's, plus the drafter's when "
                          "speculation engaged",
}

# What each stage of an MTP head's drafter forward includes (profile mode: specdec.mtp times them).
STAGE_NOTES = {
    "entry": "the round's host bookkeeping from the phase's start to the first stage (profile mode)",
    "trim": "drop the head's cache entries built from its own hidden states (accept hook only)",
    "ids_upload": "token ids to the device and the target's verify hidden states sliced (host to device)",
    "layers": "embedding lookup, two input norms, fc projection, the decoder layer, final norm",
    "lm_head": "the borrowed target LM head: a full-vocabulary projection of one position",
    "sample": "argmax (temperature 0) or a categorical draw over the projected logits",
    "readback": "the drafted id read back to the host (profile mode only: by default ids stay on the device)",
    "exit": "from the last stage back to the round loop, where the caller's phase ends (profile mode)",
}


@dataclass
class Counts:
    """Work counted where it happens (harness.core.counters' names): each host sync next to its
    eval or readback, each forward where a model is called. Plain ints, no syncs of their own."""
    host_syncs: int = 0        # evaluations and scalar readbacks that wait for the device
    target_forwards: int = 0
    drafter_forwards: int = 0
    target_tokens: int = 0     # positions fed to the target's forwards
    drafter_tokens: int = 0
    host_uploads: int = 0      # this engine's own: token ids copied from the host to the device

    def since(self, before: Counts) -> dict[str, int]:
        """What was counted after `before` (a copy taken then), by name."""
        now, then = asdict(self), asdict(before)
        return {k: v - then[k] for k, v in now.items()}


@dataclass
class RoundLog:
    offset: int          # generated-text offset (in tokens) where this round starts
    drafted: list[int]
    accepted: int
    verify_ms: float | None = None   # this round's verify_forward phase
    kv_len: int | None = None        # target KV length before the verify forward (its shape: T=drafted+1)
    first_use: bool | None = None    # this (T, KV length) had not run on this loaded target before


@dataclass
class Diagnostics:
    mode: str                       # classic | speculative
    block_size: int
    prompt_tokens: int = 0
    generated_tokens: int = 0
    rounds: int = 0                 # target verify forwards (speculative) or 0 (classic)
    proposed: int = 0
    accepted: int = 0
    per_step_tested: int = 0        # positions tested up to and including the first miss
    zero_accept_rounds: int = 0
    partial_accept_rounds: int = 0
    full_accept_rounds: int = 0
    proposed_by_position: list[int] = field(default_factory=list)
    accepted_by_position: list[int] = field(default_factory=list)
    first_miss_histogram: list[int] = field(default_factory=list)  # [i]: first miss at draft i; [-1]: none
    prefill_ms: float = 0.0
    probe_ms: float = 0.0
    decode_ms: float = 0.0
    phase_ms: dict[str, float] = field(default_factory=dict)
    profile: bool = False
    profile_syncs: int = 0
    profile_sync_ms: float = 0.0
    peak_memory_bytes: int | None = None      # MLX's peak over prefill and decode
    resident_memory_bytes: int | None = None  # in use when that counter was reset
    model_memory_bytes: int | None = None     # weights this generation used (drafter only if engaged)
    rounds_log: list[RoundLog] = field(default_factory=list)
    # MTP drafter, profile mode: per phase ("draft_block", "accept_hook") the drafter forwards
    # and ms per stage (specdec.mtp.STEP_STAGES); default mode: forwards only.
    drafter_split: dict | None = None
    # Work over the decode (Counts.since the end of prefill), the engine's own counters too.
    counters: dict[str, int] | None = None

    def _stages(self) -> set[str]:
        return {st for ph in (self.drafter_split or {}).values() for st in (ph.get("ms") or {})}

    @property
    def acceptance_rate(self) -> float | None:
        return self.accepted / self.proposed if self.proposed else None

    @property
    def per_step_acceptance(self) -> float | None:
        return self.accepted / self.per_step_tested if self.per_step_tested else None

    @property
    def emitted_per_verify(self) -> float | None:
        return self.generated_tokens / self.rounds if self.rounds else None

    @property
    def closure_error_ms(self) -> float:
        return self.decode_ms - sum(self.phase_ms.values())

    def to_dict(self) -> dict:
        d = asdict(self)
        d.update(
            acceptance_rate=self.acceptance_rate,
            per_step_acceptance=self.per_step_acceptance,
            emitted_per_verify=self.emitted_per_verify,
            acceptance_by_position=[a / p if p else None for a, p in
                                    zip(self.accepted_by_position, self.proposed_by_position)],
            closure_error_ms=self.closure_error_ms,
            decode_tokens_per_s=(self.generated_tokens / (self.decode_ms / 1e3)) if self.decode_ms else None,
            ms_per_token=(self.decode_ms / self.generated_tokens) if self.generated_tokens else None,
            attribution=("per-stage (profile mode: one sync after each stage)" if self.profile
                         else "unattributed between draft_block and verify_forward (lazy; one sync per round)"),
            phase_notes={**{k: v for k, v in PHASE_NOTES.items()
                            if k in self.phase_ms or k.endswith(("_ms", "_bytes"))},
                         **{k: v for k, v in STAGE_NOTES.items() if k in self._stages()}},
        )
        return d
