"""Records: atomic, append-only, refuse to overwrite, one-line errors for bad files."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import msgspec
import pytest
from harness_helpers import command_arm, write_suite

from harness.collect.files import write_json_atomic
from harness.collect.record import SCHEMA_VERSION, Record
from harness.collect.suite import load_suite
from harness.core.errors import UserError
from harness.core.schema import Run


def _new(path: Path) -> Record:
    suite = load_suite(write_suite(Path(tempfile.mkdtemp(prefix="suite-")), [command_arm("a")])).to_dict()
    return Record.create(path, suite, {"cpu": {}}, ["harness", "run"], planned_runs=2)


def _run(**fields: object) -> Run:
    return msgspec.convert(fields, Run)


def _ids(runs: list[Run]) -> list[tuple[int, str | None, str]]:
    return [(r.index, r.arm, r.status) for r in runs]


def test_create_add_finish(tmp_path: Path) -> None:
    p = tmp_path / "records" / "r.json"
    rec = _new(p)
    d = json.loads(p.read_text())
    assert d["schema_version"] == SCHEMA_VERSION and d["complete"] is False and d["runs"] == []
    rec.add_run(_run(index=0, arm="a", status="ok"))
    assert Record.load(p).runs == [_run(index=0, arm="a", status="ok")]
    rec.finish(planned=2)
    assert json.loads(p.read_text())["complete"] is False
    rec.add_run(_run(index=1, arm="a", status="failed"))
    rec.finish(planned=2)
    d = json.loads(p.read_text())
    assert d["complete"] is True and d["finished"]
    assert list(p.parent.iterdir()) == [p]          # no temp files left behind
    with pytest.raises(ValueError):
        rec.add_run(_run(index=1, arm="a", status="ok"))   # runs are never replaced


def test_a_killed_session_keeps_every_finished_run(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    rec = _new(p)
    for i in range(3):
        rec.add_run(_run(index=i, arm="a", status="ok", wall_s=0.1))
    # No full rewrite yet (the first comes after 30 s): the runs are in the journal only.
    assert json.loads(p.read_text())["runs"] == []
    # A kill in the middle of the fourth line leaves it cut short; it is skipped, not fatal.
    with open(rec.journal_path, "a") as f:
        f.write('{"index": 3, "sta')
    again = Record.load(p)
    assert [r.index for r in again.runs] == [0, 1, 2]
    again.add_run(_run(index=3, arm="a", status="ok"))
    again.finish(planned=4)
    assert not again.journal_path.exists()
    d = json.loads(p.read_text())
    assert [r["index"] for r in d["runs"]] == [0, 1, 2, 3] and d["complete"] is True


def test_record_is_rewritten_when_due_and_the_journal_goes(tmp_path: Path, monkeypatch) -> None:
    import harness.collect.record as record
    monkeypatch.setattr(record, "REWRITE_MIN_INTERVAL_S", 0.0)
    monkeypatch.setattr(record, "REWRITE_MAX_SHARE", float("inf"))
    p = tmp_path / "r.json"
    rec = _new(p)
    rec.add_run(_run(index=0, arm="a", status="ok"))
    assert _ids(msgspec.convert(json.loads(p.read_text())["runs"], list[Run])) == [(0, "a", "ok")]
    assert not rec.journal_path.exists()
    # A journal whose runs are already in the record (killed between rename and unlink) adds nothing.
    rec.journal_path.write_text('{"index": 0, "arm": "a", "status": "ok"}\n')
    assert [r.index for r in Record.load(p).runs] == [0]


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text("{}")
    with pytest.raises(UserError, match="already exists"):
        _new(p)
    assert p.read_text() == "{}"


def test_a_new_record_never_appears_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A reader polling for the record (a test, a dashboard) once met an empty file: the path was
    # taken with O_EXCL before the content was written. Now nothing is at the path until the
    # content is complete on disk.
    p = tmp_path / "r.json"
    seen = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (seen.append(p.exists()), real_fsync(fd))[1])
    _new(p)
    assert seen == [False]
    assert json.loads(p.read_text())["runs"] == []
    assert [x.name for x in tmp_path.iterdir()] == ["r.json"]   # no temp file left


def test_a_new_record_where_hard_links_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def no_links(src, dst):
        raise PermissionError(1, "Operation not permitted")
    monkeypatch.setattr(os, "link", no_links)
    p = tmp_path / "r.json"
    _new(p)
    assert json.loads(p.read_text())["complete"] is False
    assert [x.name for x in tmp_path.iterdir()] == ["r.json"]
    with pytest.raises(UserError, match="already exists"):
        _new(p)


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
    d["schema_version"] = 99
    p.write_text(json.dumps(d))
    with pytest.raises(UserError, match="schema_version 99"):
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


def test_duty_cycle_from_known_wall_times() -> None:
    from harness.collect.record import duty_cycle
    runs = [{"wall_s": 4.0, "warmup": True, "cooldown_s": 0.0, "quiet_wait_s": 0.5},
            {"wall_s": 2.0, "warmup": False, "cooldown_s": 3.0, "quiet_wait_s": 0.0,
             "load": {"thermal_wait": {"checked": True, "nominal": True, "reason": "nominal", "waited_s": 1.5}}},
            {"wall_s": 3.0, "warmup": False, "cooldown_s": 2.0, "quiet_wait_s": 1.0},
            {"wall_s": 1.0, "warmup": False}]                  # a run from before these keys
    d = duty_cycle([_run(index=i, status="ok", **r) for i, r in enumerate(runs)], 20.0)
    assert msgspec.to_builtins(d) == {"session_wall_s": 20.0, "run_s": 10.0, "measured_run_s": 6.0,
                                      "duty_cycle": 0.3, "waiting_s": 8.0, "runs": 4}
    assert duty_cycle([], 0.0).duty_cycle is None


class _Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_session_wall_sums_segments_and_finish_writes_duty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.collect import record as record_mod
    clock = _Clock()
    monkeypatch.setattr(record_mod.time, "monotonic", clock)
    p = tmp_path / "r.json"
    rec = _new(p)                                  # segment 1 starts at 100
    clock.t = 110.0
    rec.add_run(_run(index=0, arm="a", status="ok", wall_s=4.0, warmup=False, cooldown_s=2.0, quiet_wait_s=0.0))
    rec.finish(planned=2)                          # interrupted: 10 s so far
    d = json.loads(p.read_text())
    assert d["session_wall_s"] == 10.0 and d["session_segments_s"] == [10.0]
    assert d["duty"]["duty_cycle"] == 0.4 and d["duty"]["waiting_s"] == 2.0

    clock.t = 500.0                                # a resume much later: the gap is not counted
    again = Record.load(p)
    clock.t = 506.0
    again.add_run(_run(index=1, arm="a", status="ok", wall_s=2.0, warmup=False, cooldown_s=1.0, quiet_wait_s=0.5))
    again.finish(planned=2)
    d = json.loads(p.read_text())
    assert d["session_segments_s"] == [10.0, 6.0] and d["session_wall_s"] == 16.0
    assert d["duty"] == {"session_wall_s": 16.0, "run_s": 6.0, "measured_run_s": 6.0,
                         "duty_cycle": 0.375, "waiting_s": 3.5, "runs": 2}


def test_old_record_keeps_its_earlier_runs_out_of_the_duty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.collect import record as record_mod
    clock = _Clock()
    monkeypatch.setattr(record_mod.time, "monotonic", clock)
    p = tmp_path / "r.json"
    _new(p).add_run(_run(index=0, arm="a", status="ok", wall_s=50.0, warmup=False))
    d = json.loads(p.read_text())
    for k in ("session_wall_s", "session_segments_s", "session_wall_from_run"):
        del d[k]                                   # as written before session wall time
    p.write_text(json.dumps(d))
    rec = Record.load(p)
    assert record_mod.record_duty(d) is None and rec.data.duty is None
    clock.t = 104.0
    rec.add_run(_run(index=1, arm="a", status="ok", wall_s=2.0, warmup=False))
    rec.finish(planned=2)
    d = json.loads(p.read_text())
    assert d["session_wall_from_run"] == 1
    assert d["duty"]["measured_run_s"] == 2.0 and d["duty"]["duty_cycle"] == 0.5
