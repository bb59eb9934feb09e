"""specdec's work counters: counted at its own sync points and model calls, over the decode, and
every host sync site in the round loop counted (a readback added without its count fails here)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROUND_LOOP = ("specdec/engine.py", "specdec/drafter.py", "specdec/mtp.py")
SYNCS = ("item", "tolist", "eval")


def _sync_calls(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every mx.eval(...), x.item() and x.tolist() call in one module."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SYNCS:
            if node.func.attr != "eval" or (isinstance(node.func.value, ast.Name) and node.func.value.id == "mx"):
                out.append((node.lineno, node.func.attr))
    return out


@pytest.mark.parametrize("module", ROUND_LOOP)
def test_every_host_sync_in_the_round_loop_is_counted_next_to_it(module):
    lines = (REPO / module).read_text().splitlines()
    calls = _sync_calls(REPO / module)
    assert calls, module
    for lineno, name in calls:
        here = lines[lineno - 1]
        near = "\n".join(lines[lineno - 1:lineno + 3])
        # A readback of arrays the line before evaluated waits for nothing: it says so.
        assert "host_syncs += 1" in near or "no sync" in (here + lines[lineno - 2]).lower(), \
            f"{module}:{lineno}: {name}() without `counts.host_syncs += 1` next to it"


@pytest.mark.real_engine
@pytest.mark.parametrize("block", [1, 3])
def test_counters_count_the_decode_per_round(monkeypatch, block):
    from specdec.engine import generate
    from specdec.loading import load_pair
    monkeypatch.setenv("SPECDEC_FORCE_PROBE", "pass")
    d = generate(load_pair(), "def parse(text):", block=block, max_tokens=24, ignore_eos=True).diagnostics
    c = d.counters
    assert c is not None and set(c) >= {"host_syncs", "target_forwards", "drafter_forwards",
                                        "target_tokens", "drafter_tokens", "host_uploads"}
    if block == 1:
        # Classic: one target step and one readback per token, no drafter.
        assert c["host_syncs"] == c["target_forwards"] == c["target_tokens"] == d.generated_tokens == 24
        assert c["drafter_forwards"] == c["host_uploads"] == 0
    else:
        # One verify forward and one host sync per round; the drafter's steps stay on the device.
        assert d.mode == "speculative" and c["host_syncs"] == c["target_forwards"] == d.rounds
        assert c["target_tokens"] == d.rounds + d.proposed
        assert d.proposed <= c["drafter_forwards"] <= (block - 1) * d.rounds
        assert c["host_uploads"] == d.rounds   # the next round's first token
