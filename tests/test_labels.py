"""Shipping labels: overrides (arm env and inherited prefixed env) and the gate's own decision."""

from __future__ import annotations

from pathlib import Path

from harness_helpers import command_arm, last_json, load, run_cli, write_suite

from harness.analyze.labels import NOT_SHIPPING, SHIPPING, label_run
from harness.collect.engines import overrides_in_force
from harness.core.schema import Gate

READING = "verify block position 0 differs from the single-token chain in 12 of 4096 logit bytes"


def test_shipping_when_gate_engaged_on_its_own() -> None:
    assert label_run({}, Gate(outcome="passed")).shipping
    assert label_run({}, Gate(outcome="not_applicable")).text == SHIPPING
    ungated = label_run({}, Gate(outcome="not_applicable", engaged=True))
    assert ungated.shipping and ungated.text.startswith(SHIPPING) and "no exactness gate" in ungated.text


def test_override_named_and_reading_quoted() -> None:
    lab = label_run({"SPECDEC_ALLOW_INEXACT": "1"}, Gate(outcome="overridden", reading=READING))
    assert not lab.shipping and lab.text.startswith(NOT_SHIPPING)
    assert "SPECDEC_ALLOW_INEXACT=1" in lab.text and f'"{READING}"' in lab.text


def test_declined_gate_is_not_shipping_even_without_override() -> None:
    lab = label_run({}, Gate(outcome="declined", reading=READING))
    assert not lab.shipping and "declined" in lab.text and READING in lab.text


def test_a_run_that_failed_before_its_gate_reported_says_so() -> None:
    lab = label_run({}, Gate(), failed=True)
    assert not lab.shipping and "the run failed before the gate reported" in lab.text
    assert "failed before" not in label_run({}, Gate(outcome="declined"), failed=True).text


def test_inherited_prefixed_env_counts_and_ignore_list() -> None:
    env = {"SPECDEC_PROFILE": "1", "MLX_X": "y", "HOME": "/root", "SPECDEC_QUIET": "1"}
    got = overrides_in_force({"A": "b"}, env, ("SPECDEC_", "MLX_"), ignore=("SPECDEC_QUIET",))
    assert got == {"A": "b", "MLX_X": "y", "SPECDEC_PROFILE": "1"}


def test_cli_labels_inherited_override_in_record_and_table(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, [command_arm("classic"), command_arm("b3", 3)], repetitions=1)
    r = run_cli("run", str(suite), "--record", str(tmp_path / "r.json"), "--baselines", str(tmp_path / "b.json"),
                cwd=tmp_path, SPECDEC_PROFILE="1")
    assert r.returncode == 0, r.stderr
    for run in load(tmp_path / "r.json")["runs"]:
        assert run["overrides"] == {"SPECDEC_PROFILE": "1"}
        assert run["shipping"] is False and "SPECDEC_PROFILE=1" in run["label"]
    assert "not shipping: SPECDEC_PROFILE=1" in r.stdout   # the summary's label footnote
    r = run_cli("run", "--resume", str(tmp_path / "r.json"), "--json", cwd=tmp_path)
    assert all(not a["shipping"] for a in last_json(r.stdout)["arms"])

    r = run_cli("run", str(suite), "--record", str(tmp_path / "r2.json"), "--baselines", str(tmp_path / "b.json"),
                cwd=tmp_path)
    assert [run["shipping"] for run in load(tmp_path / "r2.json")["runs"]] == [True, True]
