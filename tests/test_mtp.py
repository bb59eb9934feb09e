"""The MTP drafter on the embedded target: output, round bookkeeping, the profile split, loading,
and the engine's attention-path choice (its per-process latch)."""
from __future__ import annotations

import json
import shutil

import pytest

import specdec  # noqa: F401  (BLAS preload first)
from specdec import cuda
from specdec.engine import generate
from specdec.errors import SpecdecError
from specdec.loading import EMBEDDED_DIR, EMBEDDED_TARGET, load_pair
from specdec.mtp import STEP_STAGES
from specdec.prompts import load_prompts

pytestmark = pytest.mark.real_engine

MTP = EMBEDDED_DIR / "mtp"
CODE = load_prompts("code")[0][1]


@pytest.fixture(scope="module")
def pair():
    return load_pair(EMBEDDED_TARGET, MTP)


@pytest.fixture(scope="module")
def classic_ids(pair):
    return generate(pair, CODE, block=1, max_tokens=48, ignore_eos=True).token_ids


def test_the_embedded_mtp_head_loads_as_an_mtp_drafter(pair):
    assert pair.drafter_kind == "mtp"
    # It borrows the tied embedding as its LM head: nothing of its own projects to the vocabulary.
    assert pair.drafter_borrows == {"embedding": "model.embed_tokens.", "lm_head": "model.embed_tokens."}
    assert pair.drafter_quantization["quantized"] and pair.drafter_quantization["linear_layers"] > 0


@pytest.mark.parametrize("block", [2, 3, 4])
def test_temperature_zero_output_is_the_targets(pair, classic_ids, monkeypatch, block):
    # The target verifies every proposal, so the MTP head can change round boundaries, never the
    # tokens, where the verify block equals the chain; the override keeps it speculative where the
    # probe fails (an inexact verify block may then differ: compare only where it passed).
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    res = generate(pair, CODE, block=block, max_tokens=48, ignore_eos=True)
    d = res.diagnostics
    assert d.mode == "speculative" and d.generated_tokens == 48
    assert res.arm["drafter_kind"] == "mtp"
    if res.gate.outcome == "passed":
        assert res.token_ids == classic_ids
    # Every round drafts block-1 tokens except the last ones, capped by max_tokens.
    assert all(len(r.drafted) <= block - 1 for r in d.rounds_log)
    assert d.proposed == sum(len(r.drafted) for r in d.rounds_log)
    # One accept-hook forward per round (it seeds the next round); draft_block runs K-2 steps.
    split = d.drafter_split
    assert split["accept_hook"]["forwards"] == d.rounds
    assert split.get("draft_block", {"forwards": 0})["forwards"] <= d.rounds * max(block - 2, 0)


def test_a_one_token_prompt_drafts_from_the_second_round(pair, monkeypatch):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    d = generate(pair, [5], block=3, max_tokens=12, ignore_eos=True).diagnostics
    assert d.generated_tokens == 12
    assert d.rounds_log[0].drafted == []          # no target hidden state yet: nothing to seed from
    assert len(d.rounds_log[1].drafted) == 2


def test_sampling_with_the_mtp_head_is_reproducible(pair, monkeypatch):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    a = generate(pair, CODE, block=3, max_tokens=32, temp=0.8, seed=3, ignore_eos=True)
    b = generate(pair, CODE, block=3, max_tokens=32, temp=0.8, seed=3, ignore_eos=True)
    assert a.token_ids == b.token_ids and len(a.token_ids) == 32


@pytest.mark.parametrize("block", [2, 4])
def test_profile_mode_splits_each_drafter_forward_and_closes(pair, monkeypatch, block):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    monkeypatch.setenv("SPECDEC_PROFILE", "1")
    d = generate(pair, CODE, block=block, max_tokens=64, ignore_eos=True).diagnostics
    for phase in ("draft_block", "accept_hook"):
        stages = d.drafter_split[phase]["ms"]
        if block > 2 or phase == "accept_hook":      # at block 2 draft_block runs no head forward
            assert set(STEP_STAGES) <= set(stages), stages
        # Contiguous intervals of one clock from the phase's start reading ("entry") to its end
        # reading ("exit"): they sum to the phase's own time, whatever ran in between.
        assert sum(stages.values()) == pytest.approx(d.phase_ms[phase], rel=1e-9), (phase, stages)
        assert {"entry", "exit"} <= set(stages)
        assert set(stages) <= set(d.to_dict()["phase_notes"])   # the result says what each stage includes
    assert "trim" in d.drafter_split["accept_hook"]["ms"]
    assert d.profile_syncs > d.rounds and d.profile_sync_ms > 0   # the head counts its own syncs


def test_default_mode_counts_forwards_and_times_no_stage(pair, monkeypatch):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    d = generate(pair, CODE, block=3, max_tokens=24, ignore_eos=True).diagnostics
    assert d.drafter_split["accept_hook"]["ms"] == {}
    assert d.drafter_split["accept_hook"]["forwards"] == d.rounds
    # Per-round shape log: verify ms, the KV length before it (growing), first use in this process.
    kv = [r.kv_len for r in d.rounds_log]
    assert kv == sorted(kv) and kv[0] > 0 and all(r.verify_ms > 0 for r in d.rounds_log)
    again = generate(pair, CODE, block=3, max_tokens=24, ignore_eos=True).diagnostics
    assert not any(r.first_use for r in again.rounds_log)   # the same shapes, run before


def test_an_mtp_head_for_another_target_is_refused(tmp_path):
    bad = tmp_path / "mtp"
    shutil.copytree(MTP, bad)
    cfg = json.loads((bad / "config.json").read_text())
    cfg["hidden_size"] = 256
    (bad / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(SpecdecError) as e:
        load_pair(EMBEDDED_TARGET, bad)
    assert "\n" not in str(e.value) and str(bad) in str(e.value)


# --- the attention path on CUDA ---------------------------------------------------------

@pytest.fixture
def fresh_latch(monkeypatch):
    monkeypatch.setattr(cuda, "_latched", None)
    monkeypatch.setattr(cuda, "on_cuda", lambda: True)
    monkeypatch.delenv(cuda.MLX_VAR, raising=False)
    monkeypatch.delenv(cuda.ENGINE_VAR, raising=False)


def test_off_cuda_there_is_no_choice():
    assert cuda.on_cuda() is False
    assert cuda.apply_attention_default()["cudnn_sdpa"] is None


def test_the_engine_default_turns_cudnn_attention_off_and_leaves_no_variable(fresh_latch):
    import os
    got = cuda.apply_attention_default()
    assert got["cudnn_sdpa"] is False and "engine default" in got["decided_by"]
    assert cuda.MLX_VAR not in os.environ      # the harness sees the user's environment only


def test_a_users_mlx_variable_wins_and_is_named(fresh_latch, monkeypatch):
    monkeypatch.setenv(cuda.MLX_VAR, "1")
    got = cuda.apply_attention_default()
    assert got["cudnn_sdpa"] is True and cuda.MLX_VAR in got["decided_by"]


@pytest.mark.parametrize("value, on", [("1", True), (" 2", True), ("0", False), ("true", False), ("off", False),
                                       ("on", False), ("", False)])
def test_a_users_value_is_read_as_mlx_reads_it(fresh_latch, monkeypatch, value, on):
    # MLX reads the variable with atoi: "true" and "on" are 0, cuDNN off.
    monkeypatch.setenv(cuda.MLX_VAR, value)
    assert cuda.apply_attention_default()["cudnn_sdpa"] is on


def test_a_target_whose_logits_are_more_than_its_head_is_refused_an_mtp_drafter(pair):
    from specdec import loading

    target = pair.target
    loading._check_logits_are_the_head(target, EMBEDDED_TARGET)      # plain llama: logits are the head's
    base = type(target)
    scaled = type("Scaled", (base,), {"__call__": lambda self, *a, **k: base.__call__(self, *a, **k) * 0.5})
    target.__class__ = scaled                                         # e.g. a logit scale after the head
    try:
        with pytest.raises(SpecdecError, match="not its LM head applied to its hidden states"):
            loading._check_logits_are_the_head(target, EMBEDDED_TARGET)
    finally:
        target.__class__ = base


def test_asking_for_the_other_path_in_the_same_process_fails(fresh_latch, monkeypatch):
    cuda.apply_attention_default()
    monkeypatch.setenv(cuda.ENGINE_VAR, "1")
    with pytest.raises(SpecdecError, match="once per process"):
        cuda.apply_attention_default()


def test_a_session_keeps_its_loaded_pairs_across_rounds(tmp_path):
    # The warm-up loads the pair and meets each verify shape first; every measured round after it
    # reuses the same loaded pair, so its shapes are repeats (a session that reloaded the models
    # per round made every round of every repetition a first use).
    from harness_helpers import REPO, run_cli
    suite = tmp_path / "s.toml"
    suite.write_text('name = "s"\nmax_tokens = 12\nrepetitions = 2\nwarmups = 1\ncooldown_s = 0\n'
                     '[quiet]\nenabled = false\n[watch]\nenabled = false\n'
                     '[[pairings]]\nname = "p"\ntarget = "embedded"\ndrafter = "embedded:mtp"\n'
                     '[[arms]]\nname = "b3"\npairing = "p"\nblock = 3\nenv = { SPECDEC_ALLOW_INEXACT = "1" }\n'
                     '[[prompts]]\ncategory = "code"\nlimit = 1\n')
    rec = tmp_path / "r.json"
    proc = run_cli("run", str(suite), "--record", str(rec), cwd=REPO, timeout=300)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(rec.read_text())["runs"]
    warm, measured = runs[0], runs[1:]
    assert warm["warmup"] and all(e["first_use"] for e in warm["diagnostics"]["rounds_log"])
    assert len(measured) == 2
    for r in measured:
        assert not any(e["first_use"] for e in r["diagnostics"]["rounds_log"])
