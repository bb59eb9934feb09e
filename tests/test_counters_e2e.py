"""End-to-end: a commit that adds one host readback per drafted token to specdec's speculative
round (the drafted id read back to the host instead of staying on the device; no other change)
fails `harness pr-check` on the work counter, at the first look, whatever the timings say.

A scratch copy of this project (tests/asv_scratch.py) with two commits, a suite of two arms
and two repetitions, no budget, asv left out: the counter decides, not the statistics.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from asv_scratch import ARTIFACTS, MACHINE, commit_all, copy_tracked, git, harness_argv, run_env, run_quiet

pytestmark = pytest.mark.e2e

DRAFTER = Path("specdec/drafter.py")
ON_DEVICE = "            mx.async_eval(tok)  # dispatch now, no host sync: the verify readout syncs\n"
READBACK = ("            tok.item()  # the drafted id read back to the host\n"
            "            self.counts.host_syncs += 1\n")

SUITE = """name = "counters-e2e"
max_tokens = 24
temp = 0.0
seed = 0
repetitions = 2
warmups = 1
cooldown_s = 0.0
override_prefixes = ["SPECDEC_", "MLX_"]

[quiet]
enabled = false

[watch]
contended_share = 1.0

[[pairings]]
name = "embedded"
target = "embedded"
drafter = "embedded"

[[arms]]
name = "classic"
block = 1

[[arms]]
name = "block3-inexact"
block = 3
env = { SPECDEC_ALLOW_INEXACT = "1" }

[[prompts]]
category = "code"
limit = 1
"""


def test_pr_check_fails_a_readback_added_per_drafted_token_on_the_counter(tmp_path):
    proj = tmp_path / "project"
    proj.mkdir()
    copy_tracked(proj)
    git(proj, "init", "-q", "-b", "main")
    base = commit_all(proj, "base: the project as it is")
    text = (proj / DRAFTER).read_text()
    assert text.count(ON_DEVICE) == 1, f"{DRAFTER} changed; update tests/test_counters_e2e.py"
    (proj / DRAFTER).write_text(text.replace(ON_DEVICE, READBACK))
    head = commit_all(proj, "drafter: read each drafted id back to the host")
    suite = tmp_path / "suite.toml"
    suite.write_text(SUITE)
    env = run_env({"HARNESS_ASV_SUITE": str(suite)})
    machine_file = tmp_path / "asv-machine.json"
    r = run_quiet(harness_argv("host", "register", "--machine", MACHINE, "--machine-file", str(machine_file)),
                  proj, env, 120)
    assert r.returncode == 0, r.stderr
    out, js = tmp_path / "pr.md", tmp_path / "pr.json"
    r = run_quiet(harness_argv("pr-check", base, head, "--no-asv", "--machine", MACHINE, "--machine-file",
                               str(machine_file), "--output", str(out), "--json", str(js)), proj, env, 900)
    md = out.read_text() if out.exists() else r.stdout
    if out.exists():
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shutil.copy(out, ARTIFACTS / "pr-check-counters.md")
    assert r.returncode == 1, md + r.stderr[-3000:]
    lines = md.splitlines()
    # The headline names the counter; its row shows one sync per round at base, three at head
    # (block 3: two drafted tokens per round, each now read back).
    assert "worse on block3-inexact host syncs/round (exact)" in lines[3], md
    row = next(x for x in lines if x.startswith("| block3-inexact host syncs/round (exact) |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert float(cells[1]) == 1.0 and 1.0 < float(cells[2]) <= 3.0 and cells[4] == "**worse**", row
    # Nothing else about the work changed: the classic arm's counters and the forwards held.
    assert "classic host syncs/token" not in md.split("<details>")[0], md
    data = json.loads(js.read_text())
    figs = {(f["arm"], f["figure"]): f for f in data["figures"]}
    assert figs[("block3-inexact", "host syncs/round (exact)")]["verdict"] == "worse"
    assert figs[("block3-inexact", "target forwards/round (exact)")]["verdict"] == "unchanged"
    assert figs[("classic", "host syncs/token (exact)")]["verdict"] == "unchanged"
    # Decided at the first look: the record of the check says so.
    seq = json.loads(Path(data["records"]["head"]).read_text())["comparison"]["sequential"]
    assert len(seq["looks"]) == 1, seq
