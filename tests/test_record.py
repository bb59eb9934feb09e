"""Records: atomic, append-only, refuse to overwrite, one-line errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.errors import UserError
from harness.record import SCHEMA_VERSION, Record, write_json_atomic


def _new(path: Path) -> Record:
    return Record.create(path, {"name": "s", "settings": {}, "arms": [], "pairings": [], "prompts": []},
                         {"cpu": {}}, ["harness", "run"], planned_runs=2)


def test_create_add_finish(tmp_path: Path) -> None:
    p = tmp_path / "records" / "r.json"
    rec = _new(p)
    d = json.loads(p.read_text())
    assert d["schema_version"] == SCHEMA_VERSION and d["complete"] is False and d["runs"] == []
    rec.add_run({"index": 0, "status": "ok"})
    assert json.loads(p.read_text())["runs"] == [{"index": 0, "status": "ok"}]
    rec.finish(planned=2)
    assert json.loads(p.read_text())["complete"] is False
    rec.add_run({"index": 1, "status": "failed"})
    rec.finish(planned=2)
    d = json.loads(p.read_text())
    assert d["complete"] is True and d["finished"]
    assert list(p.parent.iterdir()) == [p]          # no temp files left behind
    with pytest.raises(ValueError):
        rec.add_run({"index": 1, "status": "ok"})   # runs are never replaced


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text("{}")
    with pytest.raises(UserError, match="already exists"):
        _new(p)
    assert p.read_text() == "{}"


def test_load_truncated(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    _new(p)
    p.write_text(p.read_text()[:40])
    with pytest.raises(UserError) as ei:
        Record.load(p)
    assert "not valid JSON" in str(ei.value) and "\n" not in str(ei.value)


def test_load_other_schema(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    _new(p)
    d = json.loads(p.read_text())
    d["schema_version"] = 2
    p.write_text(json.dumps(d))
    with pytest.raises(UserError, match="schema_version 2"):
        Record.load(p)


def test_load_wrong_kind_and_missing(tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"kind": "something.else", "schema_version": 1}')
    with pytest.raises(UserError, match="not a harness.record"):
        Record.load(p)
    with pytest.raises(UserError, match="no such file"):
        Record.load(tmp_path / "absent.json")


def test_atomic_write_keeps_old_file_on_failure(tmp_path: Path) -> None:
    p = tmp_path / "f.json"
    write_json_atomic(p, {"a": 1})
    with pytest.raises(TypeError):
        write_json_atomic(p, {"a": object()})       # fails mid-serialisation
    assert json.loads(p.read_text()) == {"a": 1}
    assert list(tmp_path.iterdir()) == [p]
