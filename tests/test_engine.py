"""The engine on the embedded pair: exactness, counters, closure, gate, overrides, bad input."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import specdec  # noqa: F401  (BLAS preload first)
from specdec.engine import generate
from specdec.errors import SpecdecError
from specdec.loading import EMBEDDED_DRAFTER, EMBEDDED_TARGET, load_pair
from specdec.prompts import CATEGORIES, load_prompts

pytestmark = pytest.mark.real_engine   # every test here loads MLX and the embedded pair

REPO = Path(__file__).resolve().parent.parent
CODE = load_prompts("code")[0][1]


def cli(*args: str, env: dict | None = None, timeout: int = 300) -> subprocess.CompletedProcess:
    full = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "specdec", *args], capture_output=True, text=True,
                          env=full, timeout=timeout)


def last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def pair():
    return load_pair()


def test_speculative_equals_classic_where_the_probe_passes():
    # The reference BLAS makes the block forward byte-identical to the chain on CPU, so the gate
    # passes on its own and temperature-0 speculative output must equal classic output.
    env = {"SPECDEC_BLAS": "reference"}
    base = last_json(cli("generate", "--block", "1", "--max-tokens", "40", "--ignore-eos", "--json", env=env))
    for block in ("2", "3", "4"):
        res = last_json(cli("generate", "--block", block, "--max-tokens", "40", "--ignore-eos", "--json", env=env))
        assert res["gate"]["outcome"] == "passed", res["gate"]
        assert res["diagnostics"]["mode"] == "speculative"
        assert res["diagnostics"]["accepted"] > 0
        assert res["token_ids"] == base["token_ids"]
        assert res["text_sha256"] == base["text_sha256"]
        assert res["overrides"] == {"SPECDEC_BLAS": "reference"}


@pytest.mark.parametrize("block", [2, 3, 4])
def test_counters_are_consistent(pair, monkeypatch, block):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    d = generate(pair, CODE, block=block, max_tokens=60, ignore_eos=True).diagnostics
    assert d.mode == "speculative" and d.generated_tokens == 60
    assert 0 <= d.accepted <= d.proposed
    assert d.accepted <= d.per_step_tested <= d.proposed
    # every round emits its accepted drafts plus one token from the target
    assert d.generated_tokens == d.accepted + d.rounds
    assert sum(d.accepted_by_position) == d.accepted
    assert sum(d.proposed_by_position) == d.proposed
    drafted_rounds = sum(1 for r in d.rounds_log if r.drafted)
    assert sum(d.first_miss_histogram) == drafted_rounds
    assert d.zero_accept_rounds + d.partial_accept_rounds + d.full_accept_rounds == drafted_rounds
    assert d.full_accept_rounds == d.first_miss_histogram[-1]
    assert d.zero_accept_rounds == d.first_miss_histogram[0]
    assert sum(r.accepted for r in d.rounds_log) == d.accepted
    offsets = [r.offset for r in d.rounds_log]
    assert offsets == sorted(offsets) and offsets[0] == 0
    # acceptance by position cannot rise: position i+1 is only tested when i was accepted
    assert all(a >= b for a, b in zip(d.accepted_by_position, d.accepted_by_position[1:]))
    assert d.emitted_per_verify == pytest.approx(1 + d.accepted / d.rounds)


@pytest.mark.parametrize("block", [1, 3])
def test_phase_times_close_against_decode_total(pair, monkeypatch, block):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    d = generate(pair, CODE, block=block, max_tokens=40, ignore_eos=True).diagnostics.to_dict()
    assert d["decode_ms"] > 0
    assert abs(d["closure_error_ms"]) < 1e-6 * d["decode_ms"] + 1e-6
    expected = {"target_step", "residual"} if block == 1 else \
        {"draft_block", "verify_forward", "accept_hook", "verify_finalize", "residual"}
    assert set(d["phase_ms"]) == expected
    assert all(v >= 0 for v in d["phase_ms"].values())
    assert d["ms_per_token"] == pytest.approx(d["decode_ms"] / 40)


def test_forced_inexact_probe_declines_and_override_engages():
    env = {"SPECDEC_BLAS": "reference", "SPECDEC_FORCE_PROBE": "fail"}
    declined = cli("generate", "--block", "3", "--max-tokens", "12", "--json", env=env)
    res = last_json(declined)
    assert res["gate"]["outcome"] == "declined" and not res["gate"]["engaged"]
    assert res["diagnostics"]["mode"] == "classic" and res["arm"]["requested_mode"] == "speculative"
    assert res["gate"]["differing_bytes"][0] > 0
    assert "position 0 differs from the single-token chain in" in declined.stderr
    assert f"of {res['gate']['logit_bytes']} logit bytes" in res["gate"]["reading"]
    res = last_json(cli("generate", "--block", "3", "--max-tokens", "12", "--json",
                        env={**env, "SPECDEC_ALLOW_INEXACT": "1"}))
    assert res["gate"]["outcome"] == "overridden" and res["gate"]["engaged"]
    assert res["diagnostics"]["mode"] == "speculative"
    assert res["overrides"]["SPECDEC_ALLOW_INEXACT"] == "1"
    assert res["overrides"]["SPECDEC_FORCE_PROBE"] == "fail"


@pytest.mark.parametrize("force, outcome, engaged", [("fail", "declined", False), ("pass", "passed", True)])
def test_the_probe_forced_either_way_takes_that_path_on_every_host(pair, monkeypatch, force, outcome, engaged):
    # Whatever this host's BLAS makes of the block forward, a forced probe decides the path.
    monkeypatch.setenv("SPECDEC_FORCE_PROBE", force)
    monkeypatch.delenv("SPECDEC_ALLOW_INEXACT", raising=False)
    r = generate(pair, CODE, block=3, max_tokens=6, ignore_eos=True)
    assert (r.gate.outcome, r.gate.engaged) == (outcome, engaged)
    assert r.diagnostics.mode == ("speculative" if engaged else "classic")
    assert r.overrides["SPECDEC_FORCE_PROBE"] == force
    if force == "pass":
        assert "forced by SPECDEC_FORCE_PROBE=pass (test-only)" in r.gate.reading
        assert r.gate.differing_bytes == [0, 0, 0]
    else:
        assert r.gate.differing_bytes[0] > 0


def test_gate_reading_on_this_host_is_reported(pair, monkeypatch):
    monkeypatch.delenv("SPECDEC_ALLOW_INEXACT", raising=False)
    r = generate(pair, CODE, block=3, max_tokens=8)
    assert r.gate.outcome in ("passed", "declined")
    assert r.gate.engaged == (r.gate.outcome == "passed")
    assert r.diagnostics.mode == ("speculative" if r.gate.engaged else "classic")
    assert len(r.gate.differing_bytes) == 3 and r.gate.logit_bytes == 1024 * 4


def test_sampling_is_reproducible_for_a_seed(pair, monkeypatch):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    a = generate(pair, CODE, block=3, max_tokens=40, temp=0.9, seed=11, ignore_eos=True)
    b = generate(pair, CODE, block=3, max_tokens=40, temp=0.9, seed=11, ignore_eos=True)
    c = generate(pair, CODE, block=3, max_tokens=40, temp=0.9, seed=12, ignore_eos=True)
    assert a.token_ids == b.token_ids
    assert a.token_ids != c.token_ids
    k1 = generate(pair, CODE, block=1, max_tokens=40, temp=0.9, seed=11, ignore_eos=True)
    k2 = generate(pair, CODE, block=1, max_tokens=40, temp=0.9, seed=11, ignore_eos=True)
    assert k1.token_ids == k2.token_ids


def test_eos_stops_unless_ignored(pair):
    ids = generate(pair, CODE, block=1, max_tokens=30, ignore_eos=True).token_ids
    stop = ids[10]
    first = ids.index(stop)
    pair_eos = type(pair)(**{**pair.__dict__})
    pair_eos.tokenizer = _TokenizerWithEos(pair.tokenizer, stop)
    assert generate(pair_eos, CODE, block=1, max_tokens=30).token_ids == ids[:first]
    assert generate(pair_eos, CODE, block=1, max_tokens=30, ignore_eos=True).token_ids == ids


class _TokenizerWithEos:
    """The embedded tokenizer with one ordinary token declared end-of-sequence."""

    def __init__(self, inner, eos: int):
        self._inner, self.eos_token_ids = inner, {eos}

    def __getattr__(self, name):
        return getattr(self._inner, name)


@pytest.mark.parametrize("block", [1, 3])
def test_injected_work_changes_no_output_byte_and_is_reported(pair, monkeypatch, block):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    monkeypatch.delenv("SPECDEC_INJECT_WORK", raising=False)
    base = generate(pair, CODE, block=block, max_tokens=40, ignore_eos=True)
    monkeypatch.setenv("SPECDEC_INJECT_WORK", "1.0")
    slow = generate(pair, CODE, block=block, max_tokens=40, ignore_eos=True)
    assert slow.diagnostics.mode == ("classic" if block == 1 else "speculative")
    assert slow.token_ids == base.token_ids and slow.text == base.text
    assert slow.diagnostics.rounds == base.diagnostics.rounds  # the fault changes time, never the algorithm
    assert slow.overrides["SPECDEC_INJECT_WORK"] == "1.0"
    assert "SPECDEC_INJECT_WORK" not in base.overrides


def _target_calls(pair, monkeypatch) -> list[tuple[str, tuple]]:
    """Every call of the target model from now on: ("cached" | "extra", input shape)."""
    calls: list[tuple[str, tuple]] = []
    cls = type(pair.target)
    real = cls.__call__

    def counting(self, inputs, cache=None, *args, **kwargs):
        if self is pair.target:
            calls.append(("cached" if cache is not None else "extra", tuple(inputs.shape)))
        return real(self, inputs, cache, *args, **kwargs)

    monkeypatch.setattr(cls, "__call__", counting)
    return calls


@pytest.mark.parametrize("block, work", [(1, "0.5"), (1, "0.15"), (1, "0.1"), (1, "2"), (1, "0"), (3, "0.5")])
def test_injected_work_runs_floor_n_times_f_extra_forwards_on_the_same_tokens(pair, monkeypatch, block, work):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    monkeypatch.setenv("SPECDEC_INJECT_WORK", work)
    pair.injected.clear()  # the credit lives with the loaded pair; this test starts it at zero
    d0 = generate(pair, CODE, block=block, max_tokens=8, ignore_eos=True).diagnostics  # gate probe settled
    n0 = 8 if block == 1 else d0.rounds   # forwards already credited in this process
    calls = _target_calls(pair, monkeypatch)
    d = generate(pair, CODE, block=block, max_tokens=41, ignore_eos=True).diagnostics
    prefill, decode = calls[0], calls[1:]  # one prefill chunk: the prompt is under 512 tokens
    assert prefill == ("cached", (1, d.prompt_tokens - 1)) and d.prompt_tokens - 1 > block
    forwards = [c for c in decode if c[0] == "cached"]
    n = 41 if block == 1 else d.rounds
    assert len(forwards) == n
    f = float(work)

    def owed(k: int) -> int:
        return int(k * f + 1e-9)
    assert sum(c[0] == "extra" for c in decode) == owed(n0 + n) - owed(n0)
    # each extra forward follows its own target forward, on the same tokens, and the schedule is
    # the credit's, continued from the earlier generation: after the process's k-th forward,
    # floor(k*F) - floor((k-1)*F) extra forwards
    i, due = 0, []
    for kind, shape in decode:
        if kind == "cached":
            i += 1
            due.append(0)
            last = shape
        else:
            assert i > 0 and shape == last
            due[-1] += 1
    assert due == [owed(k) - owed(k - 1) for k in range(n0 + 1, n0 + n + 1)]


def test_injected_work_holds_over_short_generations(pair, monkeypatch):
    # 32-token runs at F = 0.03 are each owed 0.96 of a forward: a credit that restarted with
    # every generation would add none at all, and the fault would be silently absent.
    monkeypatch.setenv("SPECDEC_INJECT_WORK", "0.03")
    pair.injected.clear()
    calls = _target_calls(pair, monkeypatch)
    for _ in range(5):
        generate(pair, CODE, block=1, max_tokens=32, ignore_eos=True)
    assert sum(kind == "extra" for kind, _ in calls) == 4   # floor(5 * 32 * 0.03) = floor(4.8)
    # another fraction keeps its own credit
    monkeypatch.setenv("SPECDEC_INJECT_WORK", "0.5")
    calls.clear()
    generate(pair, CODE, block=1, max_tokens=3, ignore_eos=True)
    assert sum(kind == "extra" for kind, _ in calls) == 1


@pytest.mark.host_alone
def test_injected_work_lands_in_the_timed_decode(pair, monkeypatch):
    # A timing claim, so it runs alone after the parallel tests (under 3 workers on 2 cores a
    # block of plain runs once met a contention burst the block of F=2 runs missed: 1.24x).
    # Interleaved, fastest of 5 a side: F=2 measured about 3x here alone.
    def decode_ms(work: str) -> float:
        monkeypatch.setenv("SPECDEC_INJECT_WORK", work)
        return generate(pair, CODE, block=1, max_tokens=64, ignore_eos=True).diagnostics.decode_ms
    decode_ms("0")
    times: dict[str, list[float]] = {"0": [], "2": []}
    for _ in range(5):
        for work in times:
            times[work].append(decode_ms(work))
    assert min(times["2"]) > 1.5 * min(times["0"]), times


def test_memory_is_reported_per_generation_and_grows_with_the_kv_cache(pair):
    def mem(tokens: int) -> tuple[int, int]:
        d = generate(pair, CODE, block=1, max_tokens=tokens, ignore_eos=True).diagnostics
        return d.peak_memory_bytes, d.resident_memory_bytes
    long_peak, resident = mem(256)
    short_peak, resident2 = mem(4)
    # Resident: at least the target's weights (10 MB); the peak adds the KV cache and activations,
    # and the counter is reset per generation, so the short one does not inherit the long one's peak.
    assert resident >= 8 * 2**20 and resident2 >= 8 * 2**20
    assert long_peak > resident and short_peak > resident2
    assert long_peak - resident > short_peak - resident2


def test_the_weights_a_generation_used_count_the_drafter_only_where_speculation_engaged(pair, monkeypatch):
    from specdec.loading import parameter_bytes
    classic = generate(pair, CODE, block=1, max_tokens=4).diagnostics
    assert classic.model_memory_bytes == parameter_bytes(pair.target) > 0
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")     # engages whatever the probe reads
    spec = generate(pair, CODE, block=3, max_tokens=4).diagnostics
    assert spec.mode == "speculative"
    assert spec.model_memory_bytes == parameter_bytes(pair.target) + parameter_bytes(pair.drafter)


@pytest.mark.parametrize("work", ["-1", "inf", "nan"])
def test_injected_work_must_be_a_finite_fraction(pair, monkeypatch, work):
    monkeypatch.setenv("SPECDEC_INJECT_WORK", work)
    with pytest.raises(SpecdecError, match="SPECDEC_INJECT_WORK"):
        generate(pair, CODE, block=1, max_tokens=4)


def test_profile_mode_syncs_and_says_so(pair, monkeypatch):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    monkeypatch.setenv("SPECDEC_PROFILE", "1")
    d = generate(pair, CODE, block=3, max_tokens=30, ignore_eos=True).diagnostics.to_dict()
    assert d["profile"] and d["profile_syncs"] >= d["rounds"]
    assert d["attribution"].startswith("per-stage")
    assert abs(d["closure_error_ms"]) < 1e-3


def test_drafter_quantized_by_default_and_dense_on_request(monkeypatch):
    assert load_pair().drafter_quantization["bits"] == 4
    monkeypatch.setenv("SPECDEC_QUANTIZE_DRAFTER", "0")
    assert load_pair().drafter_quantization["quantized"] is False


def test_uninstrumented_mode_counts_nothing_but_keeps_output(pair, monkeypatch):
    monkeypatch.setenv("SPECDEC_ALLOW_INEXACT", "1")
    a = generate(pair, CODE, block=3, max_tokens=30, ignore_eos=True)
    b = generate(pair, CODE, block=3, max_tokens=30, ignore_eos=True, instrument=False)
    assert a.token_ids == b.token_ids
    assert b.diagnostics.rounds_log == [] and b.diagnostics.decode_ms > 0


def test_tokenizer_mismatch_is_refused(tmp_path):
    bad = tmp_path / "drafter"
    shutil.copytree(EMBEDDED_DRAFTER, bad)
    tok = json.loads((bad / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    a, b = list(vocab)[300:302]
    vocab[a], vocab[b] = vocab[b], vocab[a]
    (bad / "tokenizer.json").write_text(json.dumps(tok))
    with pytest.raises(SpecdecError, match="tokenizer mismatch"):
        load_pair(EMBEDDED_TARGET, bad)
    proc = cli("generate", "--model", str(EMBEDDED_TARGET), "--draft-model", str(bad), "--max-tokens", "4")
    assert proc.returncode == 2 and "tokenizer mismatch" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


@pytest.mark.parametrize("args, message", [
    (["--model", "/nonexistent/model"], "does not exist"),
    (["--model", "docs"], "has no config.json"),
    (["--block", "0"], "--block must be at least 1"),
    (["--max-tokens", "0"], "--max-tokens must be at least 1"),
    (["--prompt", "   "], "prompt is empty"),
    (["--prompt-file", "/nonexistent/prompt.txt"], "does not exist"),
    (["--block", "three"], "invalid int value"),
])
def test_bad_input_is_one_line_and_exit_2(args, message):
    proc = cli("generate", *args, "--max-tokens" if "--max-tokens" not in args else "--seed", "4")
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0] and "Traceback" not in proc.stderr


def test_info_reports_the_embedded_pair():
    proc = cli("info")
    assert proc.returncode == 0, proc.stderr
    info = json.loads(proc.stdout)
    assert info["target"]["parameters"] > 4 * info["drafter"]["parameters"] > 0
    total = info["target"]["directory_bytes"] + info["drafter"]["directory_bytes"]
    assert total <= 20 * 1024 * 1024


def test_prompts_ship_in_every_category():
    for cat in CATEGORIES:
        prompts = load_prompts(cat)
        assert prompts and all(name and text.strip() for name, text in prompts)
    with pytest.raises(SpecdecError):
        load_prompts("poetry")


def test_stock_mlx_lm_runs_on_the_pair():
    proc = subprocess.run([sys.executable, "-m", "mlx_lm", "generate", "--model", str(EMBEDDED_TARGET),
                           "--draft-model", str(EMBEDDED_DRAFTER), "--num-draft-tokens", "2",
                           "--prompt", CODE, "--max-tokens", "16"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "Generation: 16 tokens" in proc.stdout or "Generation:" in proc.stdout


def test_verify_cost_scaling_measures_each_width(pair):
    from specdec.scaling import verify_forward_cost_scaling
    res = verify_forward_cost_scaling(pair.target, context_tokens=64, widths=(1, 2, 4), repeats=3, warmup=1)
    assert [r["T"] for r in res["widths"]] == [1, 2, 4]
    assert all(r["min_ms"] <= r["median_ms"] <= r["max_ms"] for r in res["widths"])
    assert res["widths"][0]["vs_T1"] == 1.0


@pytest.mark.parametrize("force", ["pass", "fail"])
@pytest.mark.parametrize("var, value, says", [
    ("SPECDEC_INJECT_WORK", "abc", "SPECDEC_INJECT_WORK must be a number (got 'abc')"),
    ("SPECDEC_INJECT_WORK", "-0.5", "SPECDEC_INJECT_WORK must be a finite number >= 0 (got -0.5)"),
    ("SPECDEC_ALLOW_INEXACT", "maybe", "SPECDEC_ALLOW_INEXACT must be one of 1, true"),
    ("SPECDEC_PROFILE", "sometimes", "SPECDEC_PROFILE must be one of 1, true"),
    ("SPECDEC_QUANTIZE_DRAFTER", "4bit", "SPECDEC_QUANTIZE_DRAFTER must be one of 1, true"),
    ("SPECDEC_CUDNN_SDPA", "auto", "SPECDEC_CUDNN_SDPA must be one of 1, true"),
    ("SPECDEC_BLAS", "bogus", "SPECDEC_BLAS must be one of reference, openblas or unset (got 'bogus')"),
    ("SPECDEC_ALLOW_INEXCT", "1", "SPECDEC_ALLOW_INEXCT is not a variable specdec reads"),
])
def test_an_override_the_engine_cannot_read_fails_the_run_rather_than_being_guessed(pair, monkeypatch, var, value,
                                                                                   says, force):
    # Once, SPECDEC_INJECT_WORK=abc ran unfaulted (read as 0) under the fault's label, an unknown
    # SPECDEC_BLAS ran OpenBLAS, and SPECDEC_ALLOW_INEXACT=maybe was read only where the probe
    # failed: every override is read whichever way the probe goes (forced both ways here).
    monkeypatch.setenv("SPECDEC_FORCE_PROBE", force)
    monkeypatch.setenv(var, value)
    with pytest.raises(SpecdecError, match=says.replace("(", r"\(").replace(")", r"\)")):
        generate(pair, CODE, block=3, max_tokens=4, ignore_eos=True)


def test_an_unreadable_override_fails_where_the_probe_passes_too():
    # The reference BLAS makes the probe pass on CPU hosts (as OpenBLAS does on some), the path on
    # which SPECDEC_ALLOW_INEXACT=maybe was once never read and the run went on.
    proc = cli("generate", "--block", "3", "--max-tokens", "4", "--json",
               env={"SPECDEC_BLAS": "reference", "SPECDEC_ALLOW_INEXACT": "maybe"})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines() == [
        "specdec: SPECDEC_ALLOW_INEXACT must be one of 1, true, yes, on, 0, false, no, off (got 'maybe')"]


@pytest.mark.parametrize("block", [1, 3])
def test_an_unreadable_probe_force_fails_every_generation(pair, monkeypatch, block):
    monkeypatch.setenv("SPECDEC_FORCE_PROBE", "sometimes")
    with pytest.raises(SpecdecError, match="SPECDEC_FORCE_PROBE must be one of pass, fail or unset"):
        generate(pair, CODE, block=block, max_tokens=4, ignore_eos=True)
