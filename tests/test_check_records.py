"""What a paired check's records say of where and with what they were measured:
reports rendered from pr-check's and compare-commits' records said host "local (unknown:
unknown, ? logical cores, unknown)", "unknown on unknown" and "harness (version unknown)", and
the environment line named mlx for an engine with no MLX."""

from __future__ import annotations

import json
import os
from pathlib import Path

from harness_helpers import cli_in_process, command_arm, git, one_commit_repo, tree_command, write_suite

from harness.analyze import envdiff
from harness.ci.twocommits import compare_commits
from harness.collect.provenance import harness_version
from harness.collect.suite import load_suite


def _check(tmp_path: Path):
    repo = one_commit_repo(tmp_path)
    # {python}: the command reads each commit's code from its tree (no build to compare).
    arm = command_arm("a", command=tree_command())
    suite = load_suite(write_suite(tmp_path, [arm], repetitions=2))
    c = compare_commits(repo, "HEAD", "HEAD", suite, tmp_path / "work")
    return c, git(repo, "rev-parse", "HEAD").strip()


def test_check_records_carry_the_host_harness_version_and_commit_their_report_names(
        tmp_path, monkeypatch, capsys):
    c, sha = _check(tmp_path)
    for side in ("base", "head"):
        rec = json.loads(Path(c.records[side]).read_text())
        host = rec["host"]
        assert host["cpu"]["logical_cores"] == os.cpu_count()
        assert host["harness"]["version"] == harness_version() != "unknown"
        assert (host["repo"]["commit"], host["repo"]["branch"], host["repo"]["dirty"]) == (sha, "HEAD", False)
    r = cli_in_process(["report", str(c.records["head"])], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert f"| build and commit | {sha[:8]} on HEAD; clean tree |" in r.stdout
    assert "? logical cores" not in r.stdout and "unknown: unknown" not in r.stdout
    host_row = next(x for x in r.stdout.splitlines() if x.startswith("| host |"))
    # A command engine without MLX: the harness's own MLX is no part of where it ran.
    assert f"{os.cpu_count()} logical cores);" in host_row and "MLX" not in host_row, host_row
    assert "unknown" not in host_row, host_row
    assert "(version unknown)" not in r.stdout and f"harness {harness_version()}" in r.stdout


def test_environment_line_of_a_command_engine_without_mlx_names_no_mlx(tmp_path):
    c, _ = _check(tmp_path)
    words = c.notes.environment_compared
    assert c.notes.environment == []
    assert not any("mlx" in w.lower() for w in words) and "BLAS" not in words
    assert {"CPU", "Python", "harness"} <= set(words)
    line = envdiff.diff_sentence([], words)
    assert line.startswith("Environment: no difference in ") and "mlx" not in line.lower()


def _rec(engines: dict, mlx: str, settings: dict | None = None) -> dict:
    return {"suite": {"engines": engines, "arms": [{"name": "a", "engine": next(iter(engines))}],
                      "settings": settings or {}},
            "host": {"mlx": {"mlx": mlx, "mlx_lm": "0.1", "default_device": "Device(gpu, 0)"},
                     "python": {"version": "3.11.2"}}, "runs": []}


def test_mlx_is_compared_only_where_an_engine_uses_it():
    cli = {"cli": {"name": "cli", "adapter": "command", "numerics": "unknown"}}
    mlx_cli = {"cli": {"name": "cli", "adapter": "command", "numerics": "MLX (Metal)"}}
    # A command engine with no MLX: a changed mlx in the harness's environment is not its difference.
    assert envdiff.env_diff(_rec(cli, "0.30"), _rec(cli, "0.31")) == []
    assert envdiff.compared(_rec(cli, "0.30"), _rec(cli, "0.30")) == ["Python"]
    # One that declares MLX numerics, or a suite that times MLX work (the dispatch measurement), is.
    assert [d.what for d in envdiff.env_diff(_rec(mlx_cli, "0.30"), _rec(mlx_cli, "0.31"))] == ["mlx"]
    probe = {"dispatch_measurement": True}
    assert envdiff.compared(_rec(cli, "0.30", probe), _rec(cli, "0.30", probe))[:3] == ["mlx", "mlx-lm", "MLX device"]
