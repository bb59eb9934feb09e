"""`harness init` into a fresh git repository, hosts/ of the repository under test, the asv
suite's names. (The harness installed alone, no MLX: test_foreign_e2e.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.ci import asvtool
from harness.ci.init import FILES, init
from harness.collect.host import specs as hosts
from harness.core.errors import UserError

REPO = Path(__file__).resolve().parent.parent
COMMAND = ["{python}", "-c", "print('decode: 100.0 tok/s')"]


def _git(cwd, *args):
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


def _fresh(tmp_path: Path) -> Path:
    repo = tmp_path / "engine"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    return repo


def _init(repo: Path, **kw):
    kw.setdefault("harness_spec", "specdec-bench @ git+https://example.org/harness@v1")
    kw.setdefault("command", COMMAND)
    kw.setdefault("hosts", ["linux-cpu"])
    return init(repo, **kw)


def _discover(bench_dir: Path, tmp_path: Path) -> list[str]:
    """Benchmark names as asv discovers them (asv's own runner script, this Python)."""
    import asv
    script = Path(asv.__file__).resolve().parent / "benchmark.py"
    out = tmp_path / "discovered.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASV_")}
    subprocess.run([sys.executable, str(script), "discover", str(bench_dir), str(out)], check=True,
                   cwd=tmp_path, env=env, capture_output=True, timeout=120)
    return sorted(b["name"] for b in json.loads(out.read_text()))


def test_init_writes_every_file_and_a_config_asv_accepts(tmp_path):
    repo = _fresh(tmp_path)
    res = _init(repo)
    assert sorted(res.written) == sorted(FILES) and all((repo / p).is_file() for p in FILES)
    from asv.config import Config
    conf = Config.load(str(repo / "asv.conf.json"))
    assert conf.repo == "." and conf.branches == ["main"] and conf.benchmark_dir == "benchmarks"
    # No pyproject here: nothing to build; the harness is what gets installed.
    assert conf.build_command == []
    assert conf.install_command == ["in-dir={env_dir} python -m pip install --no-compile "
                                    "'specdec-bench @ git+https://example.org/harness@v1'"]
    ours = asvtool.load_config(repo / "asv.conf.json")
    assert asvtool.configured_suite(ours) == repo / "benchmarks" / "suite.toml"
    # The starter suite loads, with its command arm.
    from harness.collect.suite import load_suite
    suite = load_suite(str(repo / "benchmarks" / "suite.toml"))
    assert [(a.name, a.adapter, list(a.command or ())) for a in suite.arms] == [("classic", "command", COMMAND)]
    assert "from harness.asvbench import *" in (repo / "benchmarks" / "bench_engine.py").read_text()
    wf = (repo / ".github" / "workflows" / "pr-benchmark.yml").read_text()
    assert "harness pr-check" in wf and "host: [linux-cpu]" in wf and "@@" not in wf
    # compare-commits and bisect write under .harness/: a check leaves the tree clean.
    assert {".asv/", "/.harness/"} <= set((repo / ".gitignore").read_text().splitlines())


def test_a_python_engine_is_built_and_installed_with_the_harness(tmp_path):
    repo = _fresh(tmp_path)
    (repo / "pyproject.toml").write_text('[project]\nname = "tiny-engine"\nversion = "0.1"\n')
    _init(repo)
    from asv.config import Config
    conf = Config.load(str(repo / "asv.conf.json"))
    assert conf.project == "tiny-engine"
    assert conf.build_command == ["python -m pip wheel --no-deps -w {build_cache_dir} {build_dir}"]
    assert conf.install_command[0] == "in-dir={env_dir} python -m pip install --no-compile {wheel_file}"
    assert "pip install -q -e ." in (repo / ".github" / "workflows" / "nightly.yml").read_text()


def test_init_refuses_to_overwrite_and_force_overwrites(tmp_path):
    repo = _fresh(tmp_path)
    (repo / "asv.conf.json").write_text("{mine}\n")
    (repo / ".gitignore").write_text("build/\n.asv/")
    r = subprocess.run([sys.executable, "-m", "harness", "init", "--dir", str(repo),
                        "--harness-spec", "specdec-bench==0.1.0", "--hosts", "linux-cpu"],
                       capture_output=True, text=True, cwd=repo, timeout=120)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("harness: ") and r.stderr.strip().count("\n") == 0
    assert "asv.conf.json" in r.stderr and "--force" in r.stderr
    # Nothing was written: not the refused file, not the others.
    assert (repo / "asv.conf.json").read_text() == "{mine}\n"
    assert not (repo / "benchmarks").exists() and (repo / ".gitignore").read_text() == "build/\n.asv/"
    res = _init(repo, force=True)
    assert "asv.conf.json" in res.written and json.loads(
        "\n".join(ln for ln in (repo / "asv.conf.json").read_text().splitlines()
                  if not ln.strip().startswith("//")))["harness_suite"] == "benchmarks/suite.toml"
    # The user's .gitignore lines stay; only the missing outputs are appended.
    lines = (repo / ".gitignore").read_text().splitlines()
    assert lines[:2] == ["build/", ".asv/"] and lines.count(".asv/") == 1 and "/results/" in lines


def test_init_outside_a_git_repository_is_one_line(tmp_path):
    with pytest.raises(UserError, match="not in a git repository.*git init"):
        _init(tmp_path)


def test_asv_discovers_the_same_names_here_and_in_an_initialised_repository(tmp_path):
    # The committed results and the dashboard name this repository's benchmarks so.
    names = _discover(REPO / "benchmarks", tmp_path)
    assert "bench_specdec.Decode.track_ms_per_token" in names
    assert "bench_specdec.Phases.track_phase_ms_per_round" in names
    repo = _fresh(tmp_path)
    _init(repo)
    # One classic command arm: the figures of every arm, no rounds (asv rejects empty params); the
    # standard work counters are charted for every engine (n/a where one reports none).
    assert _discover(repo / "benchmarks", tmp_path) == ["bench_engine.Counters.track_counter_per_round",
                                                        "bench_engine.Decode.track_identity_mismatches",
                                                        "bench_engine.Decode.track_memory_mib",
                                                        "bench_engine.Decode.track_ms_per_token"]


def test_pr_check_takes_the_suite_from_the_config(tmp_path):
    repo = _fresh(tmp_path)
    _init(repo)
    (repo / "benchmarks" / "suite.toml").rename(repo / "benchmarks" / "lab.toml")
    conf_path = repo / "asv.conf.json"
    conf_path.write_text(conf_path.read_text().replace('"benchmarks/suite.toml"', '"benchmarks/lab.toml"'))
    from harness.ci.pullrequest import suite_file
    assert suite_file(asvtool.load_config(conf_path), None) == repo / "benchmarks" / "lab.toml"
    conf_path.write_text(conf_path.read_text().replace('"benchmarks/lab.toml"', '"benchmarks/gone.toml"'))
    with pytest.raises(UserError, match="harness_suite.*gone.toml.*not found"):
        suite_file(asvtool.load_config(conf_path), None)


# --- hosts/ of the repository under test ------------------------------------------------------

def test_the_repositorys_own_host_specs_are_read_first(tmp_path, monkeypatch):
    repo = _fresh(tmp_path)
    (repo / "hosts").mkdir()
    shipped = json.loads((hosts.SPECS_DIR / "h200.json").read_text())
    gb10 = json.loads((hosts.SPECS_DIR / "gb10.json").read_text())
    (repo / "hosts" / "gb10.json").write_text(json.dumps({**gb10, "peak_bandwidth_gbs": 1234}))
    # Matches what the shipped h200 matches, and sorts after it: it wins by being read first.
    (repo / "hosts" / "zz-lab-h200.json").write_text(json.dumps({**shipped, "name": "zz-lab-h200",
                                                                  "asv_machine": "zz-lab-h200"}))
    monkeypatch.delenv("ASV_CONF_DIR", raising=False)
    monkeypatch.chdir(repo / "hosts")
    specs = hosts.load_specs()
    assert specs["gb10"].peak_bandwidth_gbs == 1234 and "h200" in specs
    h200 = {"os": {"system": "Linux"}, "cpu": {"model": "x", "apple_chip": "unknown"},
            "gpu": {"name": "NVIDIA H200", "nvidia": "unknown"}}
    assert hosts.match_spec(h200, specs).name == "zz-lab-h200"
    # Outside that repository: the shipped spec.
    monkeypatch.chdir(tmp_path)
    assert hosts.load_specs()["gb10"].peak_bandwidth_gbs == gb10["peak_bandwidth_gbs"]
    assert hosts.match_spec(h200).name == "h200"
