"""A full (or failing) disk at each write point of a session: one line, exit 2, and what had
landed stays resumable; the printed follow-up, run on a healthy disk, finishes the session with
every run exactly once (and, for a baseline session, its baselines stored).

The disk is made to fail by session_faults.FullDisk (os.open and open patched for the files under
one directory); where this host lets a test mount a tiny tmpfs (root on Linux), a real full disk
too, skipped cleanly elsewhere.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from harness_helpers import command_arm, load, write_suite
from session_faults import FullDisk, cli, follow_up, indices, leftovers, one_line, suite

from harness.collect import record as record_mod

PLANNED = 4   # two arms, two repetitions, no warm-up


@dataclass(frozen=True)
class Point:
    """A write point: the session command, when the disk is full, and what the line must say."""
    id: str
    command: str                          # run | check | baseline
    full: Any                             # (disk, kind, target) -> bool
    kept: int | None                      # runs the line says are kept; None: nothing was run
    what: str = "record"                  # what the line says cannot be written
    err: int = errno.ENOSPC
    rewrite_every_run: bool = False       # the record rewritten after every run, not every 30 s
    env: dict[str, str] = field(default_factory=dict)


def _journal_after(n: int) -> Any:
    return lambda d, kind, target: kind == "journal" and d.appends > n


def _record_temp_after(n: int) -> Any:
    return lambda d, kind, target: kind == "temp" and target == "r.json" and d.appends >= n


POINTS = [
    Point("run: journal append, first run", "run", _journal_after(0), 0),
    Point("run: journal append after 2 runs", "run", _journal_after(2), 2),
    Point("run: journal append after 1 run, EDQUOT", "run", _journal_after(1), 1, err=errno.EDQUOT),
    Point("run: journal append after 1 run, EIO", "run", _journal_after(1), 1, err=errno.EIO),
    Point("run: journal append after 1 run, EROFS", "run", _journal_after(1), 1, err=errno.EROFS),
    Point("run: record rewrite after 1 run", "run", _record_temp_after(1), 1, rewrite_every_run=True),
    Point("run: record rewrite after 3 runs", "run", _record_temp_after(3), 3, rewrite_every_run=True),
    Point("run: finish, every run landed", "run", _record_temp_after(PLANNED), PLANNED),
    Point("run: record lock file, before any run", "run",
          lambda d, kind, target: kind == "lock" and target == "r.json", None),
    Point("check: journal append after 1 run", "check", _journal_after(1), 1),
    Point("check: finish", "check", _record_temp_after(2), 2),
    Point("baseline: journal append after 2 runs", "baseline", _journal_after(2), 2),
    Point("baseline: finish", "baseline", _record_temp_after(PLANNED), PLANNED),
    Point("baseline: baselines write after every run landed", "baseline",
          lambda d, kind, target: kind == "temp" and target == "b.json", PLANNED, what="baselines"),
    Point("baseline: baselines lock file, before any run", "baseline",
          lambda d, kind, target: kind == "lock" and target == "b.json", None, what="baselines file"),
]


def _argv(command: str, s: Path, out: Path) -> list[str]:
    rec, b = out / "r.json", out / "b.json"
    if command == "baseline":
        return ["baseline", "record", s, "--record", rec, "--baselines", b]
    return [command, s, "--record", rec, "--baselines", b]


def _baselines_for(t: Path, s: Path, out: Path, monkeypatch, capsys) -> bytes:
    """A baselines file as the user had it before the session: another arm's entry stored, the
    file's bytes returned (they must be there, unchanged, whatever the disk does)."""
    other = write_suite(t, [command_arm("z", 1)], name="other", repetitions=2)
    r = cli(["baseline", "record", other, "--record", t / "other-rec.json", "--baselines", out / "b.json"],
            t, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr
    if s is not None:   # a check needs its own arms' baselines too
        r = cli(["baseline", "record", s, "--record", t / "pre-rec.json", "--baselines", out / "b.json"],
                t, monkeypatch, capsys)
        assert r.returncode == 0, r.stderr
    return (out / "b.json").read_bytes()


@pytest.mark.parametrize("point", POINTS, ids=[p.id for p in POINTS])
def test_a_full_disk_is_one_line_and_the_follow_up_finishes_the_session(point: Point, tmp_path: Path,
                                                                          monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    s = suite(tmp_path)
    had = _baselines_for(tmp_path, s if point.command == "check" else None, out, monkeypatch, capsys)
    if point.rewrite_every_run:
        # After every run, however long the last rewrite took (a loaded host once skipped one).
        monkeypatch.setattr(record_mod, "REWRITE_MIN_INTERVAL_S", 0.0)
        monkeypatch.setattr(record_mod, "REWRITE_MAX_SHARE", float("inf"))
    disk = FullDisk(monkeypatch, out, lambda kind, target: point.full(disk, kind, target), point.err)
    rec = out / "r.json"

    r = cli(_argv(point.command, s, out), tmp_path, monkeypatch, capsys)
    line = one_line(r)
    assert disk.failed, "the disk never filled: the case tests nothing"
    where = out / "b.json" if point.what.startswith("baselines") else rec
    assert line.startswith(f"harness: {where}: cannot write the {point.what} ({os.strerror(point.err)}); "), line
    if point.kept is None:
        assert "nothing was run" in line and not rec.exists(), line
        disk.healthy()
        assert (out / "b.json").read_bytes() == had
        assert leftovers(out) == []
        return
    assert line.endswith(f"; {point.kept} runs kept, finish with: harness run --resume {rec}"), line
    # What the line says is kept is what a reader of the record finds; complete only where the
    # record's own writes all landed (a baselines write failed after).
    assert indices(rec) == list(range(point.kept)) and load(rec)["complete"] is (point.what != "record")
    assert (out / "b.json").read_bytes() == had, "the baselines the user had changed"
    kept = {x["index"]: x["started"] for x in load(rec)["runs"]}

    disk.healthy()
    r = cli(follow_up(line), tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    data = load(rec)
    assert data["complete"] is True and indices(rec) == list(range(2 if point.command == "check" else PLANNED))
    assert {x["index"]: x["started"] for x in data["runs"] if x["index"] in kept} == kept, "a kept run ran again"
    assert leftovers(out) == []
    if point.command == "baseline":
        entries = json.loads((out / "b.json").read_text())["entries"]
        assert {e["arm"] for e in entries.values()} == {"z", "a", "b"}, "the resume did not store the baselines"
        assert data["baselines_stored"]["path"] == str(out / "b.json")
    if point.command == "check":
        assert "identity against own baselines" in r.stdout


def test_a_resume_on_a_disk_still_full_is_one_line_and_keeps_the_runs(tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    s = suite(tmp_path)
    rec = out / "r.json"
    disk = FullDisk(monkeypatch, out, lambda kind, target: kind == "journal" and disk.appends > 1)
    line = one_line(cli(_argv("run", s, out), tmp_path, monkeypatch, capsys))
    # Still full: the resume's first write (noting the resume) fails; the record is as it was.
    disk.full = lambda kind, target: kind in ("temp", "journal")
    before = rec.read_bytes()
    again = one_line(cli(follow_up(line), tmp_path, monkeypatch, capsys))
    assert again.endswith(f"; 1 runs kept, finish with: harness run --resume {rec}"), again
    assert rec.read_bytes() == before and indices(rec) == [0]
    disk.healthy()
    assert cli(follow_up(again), tmp_path, monkeypatch, capsys).returncode == 0
    assert indices(rec) == list(range(PLANNED)) and len(load(rec)["resumes"]) == 1


def test_a_new_record_on_a_full_disk_is_one_line_and_nothing(tmp_path: Path, monkeypatch, capsys) -> None:
    out = tmp_path / "out"
    out.mkdir()
    FullDisk(monkeypatch, out, lambda kind, target: kind == "temp" and target == "r.json")
    line = one_line(cli(_argv("run", suite(tmp_path), out), tmp_path, monkeypatch, capsys))
    assert "cannot write the record" in line and os.strerror(errno.ENOSPC) in line
    assert not (out / "r.json").exists() and leftovers(out) == []


# --- a real full disk: a tiny tmpfs, where this host lets a test mount one --------------------

def _mount_tmpfs(where: Path, size: str) -> None:
    if sys.platform != "linux" or os.geteuid() != 0 or not shutil.which("mount"):
        pytest.skip("a real full disk needs root on Linux to mount a tmpfs")
    where.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", f"harness-test-{uuid.uuid4().hex[:8]}",
                        str(where)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {r.stderr.strip()}")


@pytest.fixture
def tiny_disk(tmp_path: Path):
    d = tmp_path / "disk"
    _mount_tmpfs(d, "1m")
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", str(d)], capture_output=True)


def _filling_suite(tmp: Path, disk: Path, at: int) -> Path:
    env = {"FAKE_FILL_DIR": str(disk), "FAKE_COUNT_FILE": str(tmp / "runs-started"), "FAKE_FILL_AT": str(at)}
    return write_suite(tmp, [command_arm("a", 1, env), command_arm("b", 2, env)], repetitions=2)


@pytest.mark.parametrize("fills_at", [2, PLANNED], ids=["tmpfs fills at run 2", "tmpfs fills at the last run"])
def test_a_real_disk_that_fills_during_a_run_is_one_line_and_resumes(fills_at: int, tiny_disk: Path, tmp_path: Path,
                                                                     monkeypatch, capsys) -> None:
    s = _filling_suite(tmp_path, tiny_disk, fills_at)
    rec = tiny_disk / "r.json"
    line = one_line(cli(["run", s, "--record", rec, "--baselines", tmp_path / "b.json"], tmp_path, monkeypatch, capsys))
    kept = fills_at - 1
    assert line == (f"harness: {rec}: cannot write the record (No space left on device); {kept} runs kept, "
                    f"finish with: harness run --resume {rec}"), line
    assert indices(rec) == list(range(kept))
    (tiny_disk / "ballast").unlink()
    r = cli(follow_up(line), tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert load(rec)["complete"] is True and indices(rec) == list(range(PLANNED))
    assert leftovers(tiny_disk) == []


def test_real_baselines_on_a_full_disk_are_one_line_before_any_run(tiny_disk: Path, tmp_path: Path,
                                                                   monkeypatch, capsys) -> None:
    (tiny_disk / "ballast").write_bytes(b"")
    with contextlib.suppress(OSError):
        with open(tiny_disk / "ballast", "ab") as f:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
    rec = tmp_path / "r.json"
    line = one_line(cli(["baseline", "record", suite(tmp_path), "--record", rec, "--baselines", tiny_disk / "b.json"],
                        tmp_path, monkeypatch, capsys))
    assert line.startswith(f"harness: {tiny_disk / 'b.json'}: cannot write the baselines file (No space left on "
                           "device); nothing was run"), line
    assert not rec.exists() and not (tiny_disk / "b.json").exists() and leftovers(tiny_disk) == []


def test_real_baselines_write_on_a_disk_filled_by_the_session_resumes(tiny_disk: Path, tmp_path: Path,
                                                                     monkeypatch, capsys) -> None:
    s = _filling_suite(tmp_path, tiny_disk, PLANNED)
    rec, b = tmp_path / "r.json", tiny_disk / "b.json"
    line = one_line(cli(["baseline", "record", s, "--record", rec, "--baselines", b], tmp_path, monkeypatch, capsys))
    assert line == (f"harness: {b}: cannot write the baselines (No space left on device); {PLANNED} runs kept, "
                    f"finish with: harness run --resume {rec}"), line
    assert load(rec)["complete"] is True and not b.exists()
    (tiny_disk / "ballast").unlink()
    r = cli(follow_up(line), tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    assert len(json.loads(b.read_text())["entries"]) == 2 and indices(rec) == list(range(PLANNED))
    assert leftovers(tiny_disk) == []

