"""compare-commits and bisect say which suite they measure as the code picks it:
their help once said the packaged default suite while they measured the repository's own."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from harness_helpers import asv_project, cli_in_process, git

from harness.cli.compare_commits import check_setup
from harness.collect.suite import DEFAULT_SUITE


def _help(cmd: str, tmp_path, monkeypatch, capsys) -> str:
    r = cli_in_process([cmd, "--help"], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0
    return re.sub(r"\s+", " ", r.stdout)


def _args(repo, **kw) -> argparse.Namespace:
    return argparse.Namespace(suite=None, repo=str(repo), budget_s=None, threshold=None, alpha=None,
                              baselines=None, work=None, base="HEAD~1", head="HEAD", **kw)


@pytest.mark.parametrize("cmd", ["compare-commits", "bisect"])
def test_help_names_the_repositorys_asv_suite_and_the_packaged_one_only_without_asv_conf(
        cmd, tmp_path, monkeypatch, capsys):
    text = _help(cmd, tmp_path, monkeypatch, capsys)
    assert "asv.conf.json names in \"harness_suite\"" in text
    assert "in a repository without asv.conf.json: the packaged default suite" in text
    # What the code does: a repository with its own asv suite measures that suite ...
    monkeypatch.delenv("HARNESS_ASV_SUITE", raising=False)
    proj = asv_project(tmp_path)
    _, suite, _ = check_setup(_args(proj), "compare")
    assert Path(suite.path).resolve() == (proj / "benchmarks" / "suite.toml").resolve()
    # ... and one without asv.conf.json the packaged default suite.
    (proj / "asv.conf.json").unlink()
    git(proj, "commit", "-qam", "no asv")
    _, suite, _ = check_setup(_args(proj), "compare")
    assert Path(suite.path).resolve() == DEFAULT_SUITE.resolve()
