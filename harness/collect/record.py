"""One JSON record per session: append-only; every run is kept the moment it finishes.

The record file is written atomically (a temp file in the same directory plus os.replace), so
a reader, a crash, Ctrl-C or kill -9 only ever sees the previous complete file or the next one.
Rewriting it after every run would cost time that grows with the session (0.2 s for 420 runs
here), so each finished run is appended to a journal beside it (`NAME.journal`, one JSON line
per run) and the record is rewritten only now and then (at most 5% of the session) and at the
end, which removes the journal. Record.load() reads the record plus any journal a killed
session left. The record says complete: false until the last planned run lands; `--resume`
finishes it.

The record also keeps the session's wall time: one monotonic-clock segment per process that
creates, or loads and writes, it (a resume is a new segment), summed into session_wall_s on
every write. finish() writes the duty cycle: how much of that wall time was measured runs.
"""

from __future__ import annotations

import datetime as _dt
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from harness.collect import recordcheck
from harness.collect.files import (
    append_line,
    check_harness_name,
    check_writable,
    read_journal,
    read_json,
    write_json_atomic,
)
from harness.collect.models import model_files
from harness.core import schema
from harness.core.errors import UserError
from harness.core.hostinfo import HostInfo
from harness.core.recordsections import BaselinesStored, Build, Duty, ModelFiles, PairedWith, Resume
from harness.core.redact import redact

SCHEMA_VERSION = schema.SCHEMA_VERSION
KIND = schema.RECORD_KIND
# A full rewrite between runs happens at most this often, and never takes more than 1/20 of
# the time since the last one: the journal keeps each run meanwhile.
REWRITE_MIN_INTERVAL_S = 30.0
REWRITE_MAX_SHARE = 0.05


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def check_new_record(path: Path) -> None:
    """A new record may go to `path`: a regular file's name, nothing there yet, not named like a
    file the harness keeps beside another (a journal, a lock), and the place writable (one line if not)."""
    if path.exists() and not path.is_dir() and not path.is_file():
        raise UserError(f"{path}: the record path is not a regular file (a device, pipe or socket); "
                        "pass a file path to --record")
    if path.is_file():
        raise UserError(f"{path}: record already exists; finish it with --resume {path} "
                        "or pass another --record")
    check_harness_name(path, "record")
    check_writable(path, "record")


def duty_cycle(runs: Sequence[schema.Run], session_wall_s: float) -> Duty:
    """How the session's wall time was spent; pure.

    run_s: every run's wall_s (warm-ups and failures too); measured_run_s: measured runs only;
    waiting_s: cooldowns, quiet waits and thermal waits; duty_cycle: measured_run_s over
    session_wall_s (None when there is no wall time). Runs from before these keys read 0.
    """
    def thermal_waited(r: schema.Run) -> float:
        return r.load.thermal_wait.waited_s if r.load.thermal_wait is not None else 0.0
    run_s = sum(r.wall_s or 0.0 for r in runs)
    measured = sum(r.wall_s or 0.0 for r in runs if not r.warmup)
    waiting = sum((r.cooldown_s or 0.0) + (r.quiet_wait_s or 0.0) + thermal_waited(r) for r in runs)
    wall = float(session_wall_s)
    return Duty(session_wall_s=round(wall, 3), run_s=round(run_s, 3), measured_run_s=round(measured, 3),
                duty_cycle=round(measured / wall, 4) if wall > 0 else None,
                waiting_s=round(waiting, 3), runs=len(runs))


class _WallTime(msgspec.Struct, kw_only=True):
    """The parts of a loaded record its duty is read or computed from: the duty as written (its
    dict, given back as it is), the session wall time (None: a record from before it), the runs."""
    duty: dict[str, Any] | None = None
    session_wall_s: float | None = None
    session_wall_from_run: int | None = None
    runs: list[schema.Run] = []


def record_duty(data: Mapping[str, Any] | schema.Record) -> dict[str, Any] | None:
    """A record's duty: the one finish() wrote, else computed from its session wall time
    (over the runs made while it was kept); None for a record from before session wall time."""
    if isinstance(data, schema.Record):
        wall = _WallTime(duty=None if data.duty is None else msgspec.to_builtins(data.duty),
                         session_wall_s=data.session_wall_s, session_wall_from_run=data.session_wall_from_run,
                         runs=data.runs)
    else:
        wall = msgspec.convert(data, _WallTime)
    if wall.duty is not None:
        return wall.duty
    if wall.session_wall_s is None:
        return None
    runs = wall.runs[int(wall.session_wall_from_run or 0):]
    return msgspec.to_builtins(duty_cycle(runs, wall.session_wall_s))  # type: ignore[no-any-return]


@dataclass
class Record:
    """A session's record on disk and in memory: the typed record, its journal, its wall time."""
    path: Path
    data: schema.Record
    # This process's segment of the session's wall time, and the segments before it.
    _segment_start: float = field(default=0.0, init=False, repr=False, compare=False)
    _earlier_segments: list[float] = field(default_factory=list, init=False, repr=False, compare=False)
    # When the record file was last rewritten, and how long that took (monotonic seconds).
    _last_write: float = field(default=0.0, init=False, repr=False, compare=False)
    _last_write_cost: float = field(default=0.0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._segment_start = time.monotonic()
        self._earlier_segments = list(self.data.session_segments_s or [])
        # Runs already in a record from before session wall time are left out of its duty.
        self._from_run = None if self.data.session_segments_s is not None else len(self.data.runs)
        self._last_write = time.monotonic()

    @property
    def journal_path(self) -> Path:
        return journal_path(self.path)

    @classmethod
    def create(cls, path: str | Path, suite: dict[str, Any], host: dict[str, Any], command: list[str],
               planned_runs: int, *, purpose: str | None = None, quick: bool | None = None,
               update: bool | None = None, baselines: str | None = None,
               side: str | None = None,
               commit: str | None = None, paired_with: PairedWith | None = None,
               build: Build | None = None) -> Record:
        """Start a new record; refuses to replace an existing file. The keyword arguments are the
        session's own top-level fields (schema.Record says what each is)."""
        p = Path(path)
        check_new_record(p)
        data = schema.Record(
            schema_version=5, kind="harness.record", session_id=uuid.uuid4().hex, created=now_iso(),
            finished=None, complete=False, command=list(command), planned_runs=planned_runs, resumes=[],
            purpose=purpose, quick=quick, update=update, baselines=baselines, side=side,
            commit=commit, paired_with=paired_with, build=build,
            suite=msgspec.convert(suite, schema.SuiteSection),
            host=msgspec.convert(host, HostInfo), models=msgspec.convert(model_files(suite), dict[str, dict[str, ModelFiles]]),
            runs=[])
        rec = cls(p, _redacted(data, schema.Record))
        # A journal without its record is left from a deleted one: it belongs to nothing.
        rec.journal_path.unlink(missing_ok=True)
        # Exclusive: two sessions started at once cannot both take the same path.
        try:
            rec.write(exclusive=True)
        except FileExistsError:
            raise UserError(f"{p}: record already exists") from None
        except OSError as e:
            raise UserError(f"{p}: cannot write the record there ({e.strerror or e}); pass another path") from None
        return rec

    @classmethod
    def load(cls, path: str | Path) -> Record:
        p = Path(path)
        return cls(p, msgspec.convert(read_record(p), schema.Record))

    @property
    def runs(self) -> list[schema.Run]:
        return self.data.runs

    def done_indices(self) -> set[int]:
        return {r.index for r in self.runs}

    def add_run(self, run: schema.Run) -> schema.Run:
        """Append one finished run and persist it at once (runs are never edited afterwards):
        a line in the journal, and now and then the whole record. Returns the run as kept
        (secrets out: an engine may print its environment when it fails)."""
        if run.index in self.done_indices():
            raise ValueError(f"run {run.index} is already in the record")
        plain = msgspec.to_builtins(run)
        line = redact(plain)
        kept = run if line is plain or line == plain else msgspec.convert(line, schema.Run)
        self.runs.append(kept)
        # Written, not fsynced: a killed process's writes survive in the page cache, and a
        # power cut loses at most the runs since the last full rewrite (which is fsynced).
        try:
            append_line(self.journal_path, json.dumps(line, separators=(",", ":"), allow_nan=False))
        except OSError:
            self.runs.pop()   # not kept (a full disk): the record in memory says what the disk has
            raise
        since = time.monotonic() - self._last_write
        if since >= max(REWRITE_MIN_INTERVAL_S, self._last_write_cost / REWRITE_MAX_SHARE):
            self.write(compact=True)
        return kept

    def note_resume(self, command: list[str], host: dict[str, Any]) -> None:
        resume = _redacted(Resume(at=now_iso(), command=list(command), host=host), Resume)
        self.data.resumes = [*(self.data.resumes or []), resume]
        self.write()

    def note_baselines_stored(self, baselines: Path) -> None:
        self.data.baselines_stored = BaselinesStored(path=str(baselines), at=now_iso())

    def finish(self, planned: int, interrupted: bool = False) -> None:
        """Write the record with its duty; complete when every planned run landed and the
        session was not interrupted (a check stopped between two rounds had more to run)."""
        self.data.complete = not interrupted and len(self.done_indices()) >= planned
        self.data.finished = now_iso() if self.data.complete else None
        wall = self._update_wall()
        self.data.duty = duty_cycle(self.runs[self.data.session_wall_from_run or 0:], wall)
        self.write()

    def session_wall_s(self) -> float:
        """The session's wall time so far: earlier segments plus this one."""
        return sum(self._earlier_segments) + (time.monotonic() - self._segment_start)

    def _update_wall(self) -> float:
        if self._from_run is not None:
            self.data.session_wall_from_run = self._from_run
            self._from_run = None
        this = time.monotonic() - self._segment_start
        self.data.session_segments_s = [round(x, 3) for x in self._earlier_segments + [this]]
        wall = round(self.session_wall_s(), 3)
        self.data.session_wall_s = wall
        return wall

    def write(self, compact: bool = False, exclusive: bool = False) -> None:
        """Atomically; compact while runs are being added, indented (readable) at finish. The
        record then holds every run, so the journal goes (after the rename, never before)."""
        t0 = time.monotonic()
        self._update_wall()
        write_json_atomic(self.path, msgspec.to_builtins(self.data), compact=compact, exclusive=exclusive)
        self.journal_path.unlink(missing_ok=True)
        self._last_write = time.monotonic()
        self._last_write_cost = self._last_write - t0


def _redacted(obj: Any, typ: type[Any]) -> Any:
    """obj with every secret replaced (harness.core.redact): itself when it holds none."""
    plain = msgspec.to_builtins(obj)
    clean = redact(plain)
    return obj if clean is plain or clean == plain else msgspec.convert(clean, typ)


class _RawRuns(msgspec.Struct):
    """A record file's runs as found, before its shape is checked (schema.load_record)."""
    runs: Any = None


class _RawRun(msgspec.Struct):
    """A run's index as found in a record file or its journal (None: it has none)."""
    index: Any = None


def _index(run: dict[str, Any]) -> Any:
    return msgspec.convert(run, _RawRun).index


def read_record(path: Path) -> dict[str, Any]:
    """A record file and any journal a killed session left, migrated to the current version and
    checked (recordcheck): the record as its dict, for the readers that still take one."""
    data = read_json(path, KIND, schema_version=None)
    schema.check_version(data, str(path))
    for key in ("suite", "runs", "session_id"):
        if key not in data:
            raise UserError(f"{path}: record has no {key!r} field")
    runs = msgspec.convert(data, _RawRuns).runs
    if not isinstance(runs, list):
        raise UserError(f"{path}: record's runs is a {type(runs).__name__}, not a list; "
                        "was it edited by hand or written by another tool?")
    done = {_index(r) for r in runs if isinstance(r, dict)}
    journal = [r for r in read_journal(journal_path(path)) if _index(r) not in done]
    data.update(runs=[*runs, *journal])
    return recordcheck.checked(schema.load_record(data, str(path)), str(path))


def journal_path(record_path: Path) -> Path:
    return record_path.with_name(record_path.name + ".journal")


