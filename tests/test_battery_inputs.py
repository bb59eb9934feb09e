"""Inputs every run would fail on are refused before the session: one line, exit 2, no run made
and nothing written. A truncated copy of the weights (an interrupted rsync) and a prompt holding a
NUL once failed every run instead, and the session ended with exit 1 and a record of failures."""

from __future__ import annotations

import json
import shutil
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from harness_helpers import REPO, cli_in_process, write_suite

EMBEDDED = REPO / "specdec" / "models"


def _truncate(f: Path) -> None:
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])


def _header_not_json(f: Path) -> None:
    data = f.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    f.write_bytes(data[:8] + b"\xff" * n + data[8 + n:])


def _header_too_long(f: Path) -> None:
    data = f.read_bytes()
    f.write_bytes(struct.pack("<Q", len(data) * 2) + data[8:])


def _eight_bytes_short(f: Path) -> None:
    f.write_bytes(f.read_bytes()[:-8])


def _empty(f: Path) -> None:
    f.write_bytes(b"")


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "cut in half": (_truncate, "outside the"),
    "last 8 bytes missing": (_eight_bytes_short, "outside the"),
    "header bytes not JSON": (_header_not_json, "header is not JSON"),
    "header length past the file": (_header_too_long, "not a safetensors file"),
    "empty file": (_empty, "not a safetensors file"),
}


def _pair(tmp: Path, role: str, damage: Callable[[Path], None]) -> dict[str, str]:
    dirs = {}
    for r in ("target", "drafter"):
        d = tmp / "models" / r
        shutil.copytree(EMBEDDED / r, d)
        dirs[r] = str(d)
    weights = sorted((tmp / "models" / role).glob("*.safetensors"))
    damage(weights[0])
    return dirs


@pytest.mark.parametrize("engine", ["specdec", "mlx-lm"])
@pytest.mark.parametrize("role", ["target", "drafter"])
@pytest.mark.parametrize("how", sorted(DAMAGE))
def test_damaged_weights_are_one_line_before_the_session(tmp_path: Path, monkeypatch, capsys, engine: str,
                                                         role: str, how: str) -> None:
    damage, says = DAMAGE[how]
    dirs = _pair(tmp_path, role, damage)
    suite = write_suite(tmp_path, [{"name": "b3", "pairing": "fx", "engine": engine, "block": 3}],
                        pairings=[{"name": "fx", **dirs}])
    rec = tmp_path / "r.json"
    r = cli_in_process(["run", str(suite), "--record", str(rec)], tmp_path, monkeypatch, capsys)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert lines[0].startswith("harness: ") and f"{role} weights cannot be loaded" in lines[0], lines[0]
    assert says in lines[0] and "copy the model again" in lines[0], lines[0]
    assert not rec.exists(), "a record was started for a session that could not load its weights"


def test_whole_weights_pass_the_check(tmp_path: Path) -> None:
    from harness.collect.models import weights_problem
    dirs = _pair(tmp_path, "target", lambda f: None)
    assert weights_problem({k: Path(v) for k, v in dirs.items()}) is None
    json.loads((Path(dirs["target"]) / "config.json").read_text())   # the copy is a model directory


@pytest.mark.parametrize("where", ["text", "file"])
def test_a_prompt_with_a_nul_character_is_one_line_before_the_session(tmp_path: Path, monkeypatch, capsys,
                                                                      where: str) -> None:
    from harness_helpers import command_arm
    prompt = {"name": "p1", "text": "def f(x):\x00 return x"}
    if where == "file":
        (tmp_path / "p.txt").write_text(prompt.pop("text"))
        prompt["file"] = str(tmp_path / "p.txt")
    suite = write_suite(tmp_path, [command_arm("classic")], prompts=[prompt])
    r = cli_in_process(["run", str(suite), "--record", str(tmp_path / "r.json")], tmp_path, monkeypatch, capsys)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert f"prompts[0].{where}: the prompt holds a NUL character (at character 9); remove it" in lines[0]
    assert not (tmp_path / "r.json").exists()


def test_every_test_the_reliability_table_names_exists() -> None:
    # docs/reliability.md is the battery's index: a renamed or deleted test must not leave it stale.
    import ast
    import re
    text = (REPO / "docs" / "reliability.md").read_text()
    named = re.findall(r"`(tests/[\w/]+\.py)(?:::(\w+))?`", text)
    assert len(named) >= 15, named
    for path, func in named:
        tree = ast.parse((REPO / path).read_text())
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert not func or func in defined, f"{path}::{func} named in docs/reliability.md does not exist"
