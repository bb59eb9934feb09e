"""harness.ci.build: a commit's tree built once and reused, a failed build as one line, and the
refusal to compare one executable outside both trees with itself. The builds here are small
Python programs standing in for a compiler (the Rust engine end to end is tests/test_rust_e2e.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from asv_scratch import commit_all, git

from harness.ci import build
from harness.ci.build import export_commit
from harness.collect.suite import load_suite
from harness.core.errors import UserError

# A "compiler": writes bin/engine into the tree and counts its runs in a file outside it.
COMPILE = ("import os, pathlib, sys; c = pathlib.Path(sys.argv[1]); "
           "c.write_text(str(int(c.read_text() or 0) + 1) if c.exists() else '1'); "
           "pathlib.Path('bin').mkdir(); pathlib.Path('bin/engine').write_text(open('VERSION').read()); "
           "print('compiled', open('VERSION').read().strip()); "
           "print('CARGO_TARGET_DIR=' + os.environ.get('CARGO_TARGET_DIR', ''))")


@pytest.fixture
def repo(tmp_path) -> tuple[Path, dict[str, str]]:
    r = tmp_path / "engine"
    r.mkdir()
    (r / "VERSION").write_text("1\n")
    git(r, "init", "-q", "-b", "main")
    shas = {"base": commit_all(r, "one")}
    (r / "VERSION").write_text("2\n")
    shas["head"] = commit_all(r, "two")
    return r, shas


def suite_with(tmp_path: Path, command: list[str], engine_extra: str = "") -> object:
    p = tmp_path / "suite.toml"
    p.write_text(f"""
name = "b"
max_tokens = 4
[engines.eng]
{engine_extra}
[[pairings]]
name = "none"
target = "."
[[arms]]
name = "a"
engine = "eng"
command = {json.dumps(command)}
[[prompts]]
name = "p"
text = "hi"
""")
    return load_suite(p)


def test_a_commit_is_built_once_then_its_marked_tree_is_reused(repo, tmp_path, monkeypatch):
    r, shas = repo
    count = tmp_path / "count"
    argv = [[sys.executable, "-c", COMPILE, str(count)]]
    monkeypatch.setenv("CARGO_TARGET_DIR", str(tmp_path / "shared-target"))
    first = build.built_tree(r, shas["base"], argv, export_commit)
    assert not first.cached and count.read_text() == "1"
    assert Path(first.tree, "bin", "engine").read_text() == "1\n"
    assert first.tree == str(r / ".harness" / "builds" / Path(first.tree).name)
    assert first.tail[0] == "compiled 1"
    assert "CARGO_TARGET_DIR=" in first.tail   # a shared target directory is not passed on
    again = build.built_tree(r, shas["base"], argv, export_commit)
    assert again.cached and again.tree == first.tree and count.read_text() == "1"
    assert again.wall_s == first.wall_s
    assert again.line("base").endswith(f"reused its build ({first.wall_s:.1f} s when built)")
    # Another build command is another tree.
    other = build.built_tree(r, shas["base"], [*argv, [sys.executable, "-c", "pass"]], export_commit)
    assert other.tree != first.tree and not other.cached and count.read_text() == "2"


def test_a_failed_build_is_one_line_naming_the_commit_and_is_built_again_next_time(repo):
    r, shas = repo
    fail = [[sys.executable, "-c", "import sys; print('compiling'); print('error[E0308]: mismatched types'); "
             "sys.exit(101)"]]
    with pytest.raises(UserError) as e:
        build.built_tree(r, shas["head"], fail, export_commit)
    msg = str(e.value)
    assert "\n" not in msg and shas["head"][:12] in msg and ": 101)" in msg
    assert "compiling | error[E0308]: mismatched types" in msg and build.LOG in msg
    tree = build.cache_dir(r, shas["head"], fail)
    assert not (tree / build.MARK).exists()   # unmarked: the next check builds it anew
    with pytest.raises(UserError):
        build.built_tree(r, shas["head"], fail, export_commit)
    assert (tree / build.LOG).read_text().count("$ ") == 1   # the failed tree was replaced, not reused


def test_a_build_program_that_does_not_exist_is_one_line(repo):
    r, shas = repo
    with pytest.raises(UserError, match=r"failed \(no-such-build-tool-xyz: not found\)"):
        build.built_tree(r, shas["base"], [["no-such-build-tool-xyz"]], export_commit)


def test_side_trees_build_both_commits_and_say_each_in_one_line(repo, tmp_path):
    r, shas = repo
    s = suite_with(tmp_path, ["{tree}/bin/engine"], f"build = {json.dumps([sys.executable, '-c', COMPILE, str(tmp_path / 'n')])}")
    said: list[str] = []
    trees = build.side_trees(r, s, tmp_path / "work", shas, export_commit, said.append)
    assert [Path(t, "bin", "engine").read_text() for t, _ in trees.values()] == ["1\n", "2\n"]
    assert [line.split(":")[0] for line in said] == [f"base {shas['base'][:12]}"] * 2 + [f"head {shas['head'][:12]}"] * 2
    assert "building" in said[0] and "built in" in said[1]
    said.clear()
    build.side_trees(r, s, tmp_path / "work", shas, export_commit, said.append)
    assert len(said) == 2 and all("reused" in line for line in said)


def test_no_build_exports_each_commit_under_the_work_directory(repo, tmp_path):
    r, shas = repo
    s = suite_with(tmp_path, ["{python}", "-m", "eng"])
    trees = build.side_trees(r, s, tmp_path / "work", shas, export_commit)
    assert {side: info for side, (_, info) in trees.items()} == {"base": None, "head": None}
    assert trees["head"][0] == tmp_path / "work" / "trees" / f"head-{shas['head'][:12]}"


def test_one_executable_outside_both_trees_is_refused(repo, tmp_path):
    r, shas = repo
    prebuilt = tmp_path / "prebuilt-engine"
    prebuilt.write_text("#!/bin/sh\n")
    prebuilt.chmod(0o755)
    s = suite_with(tmp_path, [str(prebuilt), "--prompt-file", "{prompt_file}"])
    trees = {side: export_commit(r, sha, tmp_path / side) for side, sha in shas.items()}
    with pytest.raises(UserError) as e:
        build.refuse_shared_executable(s, trees)
    assert str(e.value).startswith(f"arm 'a' runs {prebuilt.resolve()} for both commits, outside their trees")
    assert "[engines.eng]" in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("same", [True, False], ids=["a commit against itself", "two commits"])
def test_one_executable_is_refused_only_between_two_commits(repo, tmp_path, same):
    # An A/A check (a commit against itself) measures one program twice on purpose.
    r, shas = repo
    prebuilt = tmp_path / "prebuilt-engine"
    prebuilt.write_text("#!/bin/sh\n")
    prebuilt.chmod(0o755)
    s = suite_with(tmp_path, [str(prebuilt), "--prompt-file", "{prompt_file}"])
    pair = {"base": shas["base"], "head": shas["base"] if same else shas["head"]}
    if same:
        assert set(build.side_trees(r, s, tmp_path / "w", pair, export_commit)) == {"base", "head"}
    else:
        with pytest.raises(UserError, match="for both commits, outside their trees"):
            build.side_trees(r, s, tmp_path / "w", pair, export_commit)


def test_a_program_found_on_path_is_refused_too(repo, tmp_path, monkeypatch):
    r, shas = repo
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "my-engine").write_text("#!/bin/sh\n")
    (bindir / "my-engine").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:/usr/bin:/bin")
    s = suite_with(tmp_path, ["my-engine"])
    trees = {side: export_commit(r, sha, tmp_path / side) for side, sha in shas.items()}
    with pytest.raises(UserError, match="runs .*my-engine for both commits"):
        build.refuse_shared_executable(s, trees)


@pytest.mark.parametrize("command, extra", [
    (["{tree}/bin/engine"], ""),                       # the commit's own build
    (["bin/engine"], ""),                              # relative: the worker runs in the tree
    (["{python}", "-m", "eng"], ""),                   # Python reading the tree on PYTHONPATH
    (["/bin/sh", "run.sh"], "interpreted = true"),     # said by the suite
], ids=["tree-placeholder", "relative-to-tree", "python-module", "declared-interpreted"])
def test_commands_that_run_each_commits_own_code_are_not_refused(repo, tmp_path, command, extra):
    r, shas = repo
    s = suite_with(tmp_path, command, extra)
    trees = {side: export_commit(r, sha, tmp_path / side) for side, sha in shas.items()}
    for t in trees.values():
        (t / "bin").mkdir()
        (t / "bin" / "engine").write_text("#!/bin/sh\n")
    build.refuse_shared_executable(s, trees)   # no UserError


def test_the_suite_refuses_an_empty_build_and_takes_tree_in_a_command(tmp_path):
    with pytest.raises(UserError, match=r"engines\.eng\.build.*empty argv list"):
        suite_with(tmp_path, ["x"], "build = []")
    with pytest.raises(UserError, match=r"engines\.eng\.interpreted"):
        suite_with(tmp_path, ["x"], 'interpreted = "yes"')
    s = suite_with(tmp_path, ["{tree}/target/release/x"], 'build = ["cargo", "build", "--release"]')
    decl = s.engines["eng"]
    assert decl.build == ("cargo", "build", "--release")
    assert decl.to_dict()["build"] == ["cargo", "build", "--release"]
    assert type(decl).from_dict(decl.to_dict()).build == decl.build


# --- harness init --build: asv builds the same way -----------------------------------------

def test_init_build_writes_an_asv_config_that_builds_each_commit_where_tree_finds_it(tmp_path, monkeypatch,
                                                                                     capsys):
    from asv import util as asv_util
    from asv.config import Config
    from harness_helpers import cli_in_process

    from harness.collect import tree

    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    r = cli_in_process(["init", "--harness-spec", "harness==1", "--hosts", "linux-cpu",
                        "--build", "cargo build --release --features 'a {b}'",
                        "--command", "{tree}/target/release/engine --prompt-file {prompt_file}"],
                       repo, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    conf = Config.load(str(repo / "asv.conf.json"))
    assert conf.install_command[-1].endswith("harness==1")
    # The starter suite declares the engine with the same build, and its arm runs it.
    s = load_suite(repo / "benchmarks" / "suite.toml")
    assert s.engines["engine"].build == ("cargo", "build", "--release", "--features", "a {b}")
    assert [(a.engine, a.command[0]) for a in s.arms] == [("engine", "{tree}/target/release/engine")]
    # asv's interpolation and commands, played here: the checkout built, kept, copied into the env.
    checkout, cache, env = tmp_path / "asv" / "project", tmp_path / "asv" / "cache", tmp_path / "asv" / "env"
    (checkout / ".git").mkdir(parents=True)
    cache.mkdir()
    (env / "bin").mkdir(parents=True)
    (env / "bin" / "python").symlink_to(sys.executable)
    # A `cargo` on the user's PATH, outside asv's environment, as a real one is.
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "cargo").write_text('#!/bin/sh\nmkdir -p target/release && echo "built $*" > target/release/engine\n')
    (tools / "cargo").chmod(0o755)
    variables = {"build_dir": str(checkout), "build_cache_dir": str(cache), "env_dir": str(env)}
    argv, _, _, cwd = asv_util.interpolate_command(conf.build_command[0], variables)
    # asv runs a command's program from its environment's bin/ only (Environment.find_executable).
    exe = asv_util.which(argv[0], [str(env / "bin")])
    subprocess.run([exe, *argv[1:]], check=True, cwd=cwd or checkout, timeout=60,
                   env={**os.environ, "PATH": f"{env / 'bin'}{os.pathsep}{tools}{os.pathsep}{os.environ['PATH']}"})
    assert (checkout / "target" / "release" / "engine").read_text() == "built build --release --features a {b}\n"
    for cmd in [conf.build_command[1], conf.install_command[0]]:
        argv, _, _, cwd = asv_util.interpolate_command(cmd, variables)
        assert argv[0] == "python" and cwd is None
        subprocess.run([sys.executable, *argv[1:]], check=True, cwd=tmp_path, timeout=60)
    assert (env / tree.ASV_TREE / "target" / "release" / "engine").read_text().startswith("built build")
    assert not (env / tree.ASV_TREE / ".git").exists()
    monkeypatch.delenv(tree.TREE_ENV, raising=False)
    monkeypatch.setenv("ASV_ENV_DIR", str(env))
    assert tree.engine_tree() == str((env / tree.ASV_TREE).resolve())


def test_init_build_warns_when_the_command_does_not_name_the_tree(tmp_path):
    from harness.ci.init import init

    repo = tmp_path / "engine"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    res = init(repo, harness_spec="harness==1", hosts=["linux-cpu"], build=["make"], command=["my-engine"])
    assert any("does not name {tree}" in w for w in res.warnings)


def test_nightly_refuses_an_asv_config_that_does_not_build_the_suites_engine(tmp_path, monkeypatch):
    from harness.ci.nightly import nightly

    proj = tmp_path / "proj"
    (proj / "benchmarks").mkdir(parents=True)
    git(proj, "init", "-q")
    suite_with(proj / "benchmarks", ["{tree}/target/release/x"], 'build = ["cargo", "build", "--release"]')
    conf = {"version": 1, "repo": ".", "benchmark_dir": "benchmarks", "harness_suite": "benchmarks/suite.toml",
            "build_command": [], "install_command": ["in-dir={env_dir} python -m pip install harness"]}
    (proj / "asv.conf.json").write_text(json.dumps(conf))
    # Refused before the results repository is opened (it does not exist).
    with pytest.raises(UserError, match=r"arm 'a' runs its engine's build from \{tree\}, but asv.conf.json "
                                        r"puts no built tree.*harness init --build 'cargo build --release' --force"):
        nightly(str(tmp_path / "none.git"), config=str(proj / "asv.conf.json"), checkout=str(tmp_path / "co"))
    from harness.ci.init import asv_build

    conf["build_command"], conf["install_command"] = asv_build(["cargo", "build", "--release"])
    (proj / "asv.conf.json").write_text(json.dumps(conf))
    with pytest.raises(UserError) as e:   # now it gets as far as the results repository
        nightly(str(tmp_path / "none.git"), config=str(proj / "asv.conf.json"), checkout=str(tmp_path / "co"))
    assert "puts no built tree" not in str(e.value)


def test_two_checks_of_one_commit_at_once_build_it_once(repo, tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    r, shas = repo
    count = tmp_path / "count"
    slow = [[sys.executable, "-c", "import time; time.sleep(0.5)"], [sys.executable, "-c", COMPILE, str(count)]]
    with ThreadPoolExecutor(2) as pool:
        infos = list(pool.map(lambda _: build.built_tree(r, shas["base"], slow, export_commit), range(2)))
    assert count.read_text() == "1" and sorted(i.cached for i in infos) == [False, True]
