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

import contextlib
import datetime as _dt
import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.collect.models import model_files
from harness.core import schema
from harness.core.errors import UserError
from harness.core.redact import redact

SCHEMA_VERSION = schema.SCHEMA_VERSION
KIND = schema.RECORD_KIND
# A full rewrite between runs happens at most this often, and never takes more than 1/20 of
# the time since the last one: the journal keeps each run meanwhile.
REWRITE_MIN_INTERVAL_S = 30.0
REWRITE_MAX_SHARE = 0.05


def check_writable(path: str | Path, what: str) -> None:
    """One line (UserError) when `path` cannot be written, said before any run starts: its
    directory is made (as writing it would) and a probe file created there and removed."""
    p = Path(path)
    if p.is_dir():
        raise UserError(f"{p}: the {what} path is a directory; pass a file path")
    above = next((a for a in p.parents if a.exists()), None)
    if above is not None and not above.is_dir():
        raise UserError(f"{p}: cannot write the {what} there: {above} is a file, not a directory; "
                        "pass another path")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=p.parent, prefix=".harness-write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise UserError(f"{p}: cannot write the {what} there ({e.strerror or e}); pass another path") from None


HARNESS_KIND_PREFIX = "harness."


def held_kind(path: Path) -> str | None:
    """What harness file `path` holds: its JSON "kind" when that is a harness kind ("harness.record",
    "harness.baselines", ...), "a record's run journal" for NAME.journal beside a record; else None
    (no such file, unreadable, not JSON, or JSON of no harness kind)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if path.name.endswith(".journal") and read_journal(path):
        return "record's run journal"
    try:
        data = json.loads(text)
    except ValueError:
        return None
    kind = data.get("kind") if isinstance(data, dict) else None
    return kind if isinstance(kind, str) and kind.startswith(HARNESS_KIND_PREFIX) else None


def check_output(path: str | Path, what: str, own_kind: str | None = None) -> None:
    """One line (UserError) when writing the `what` to `path` would fail or would replace
    something the user has: check_writable's checks, then an existing path that is not a regular
    file (a device, a pipe), or a file holding a harness kind other than `own_kind` (a record,
    baselines, another command's JSON). Said before any work starts; an earlier output of the same
    kind (own_kind, or a text file for a text output) may be replaced."""
    p = Path(path)
    if p.exists() and not p.is_dir() and not p.is_file():
        raise UserError(f"{p}: the {what} path is not a regular file (a device, pipe or socket); "
                        "pass a file path")
    check_writable(p, what)
    kind = held_kind(p) if p.is_file() else None
    if kind is not None and kind != own_kind:
        raise UserError(f"{p}: holds a {kind}; writing the {what} there would replace it; pass another path")


def check_directory(path: str | Path, what: str) -> None:
    """One line (UserError) when `path` cannot be (or become) a directory to write into: it is a
    file, something above it is a file, or the nearest existing directory is not writable. Nothing
    is created."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise UserError(f"{p}: the {what} is a file, not a directory; pass a directory")
    above = next((a for a in (p, *p.parents) if a.exists()), None)
    if above is None:
        return
    if not above.is_dir():
        raise UserError(f"{p}: cannot make the {what} there: {above} is a file, not a directory; "
                        "pass another directory")
    if not os.access(above, os.W_OK | os.X_OK):
        raise UserError(f"{p}: cannot write the {what} there ({above} is not writable); pass another directory")


def check_new_record(path: Path) -> None:
    """A new record may go to `path`: nothing there yet, and the place writable (one line if not)."""
    if path.exists() and not path.is_dir():
        raise UserError(f"{path}: record already exists; finish it with --resume {path} "
                        "or pass another --record")
    check_writable(path, "record")


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any, compact: bool = False, exclusive: bool = False) -> None:
    """Write JSON so that `path` is always either the old complete file or the new one.
    exclusive: `path` must not exist yet (FileExistsError if it does); it appears complete, by a
    hard link of the finished temp file, so no reader ever sees it empty."""
    with _temp_beside(path) as (fd, tmp):
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            # Compact uses json's C encoder, about 4x faster than indent=1's Python one: the
            # record is rewritten after every run and grows with each, so this is per-run cost.
            if compact:
                json.dump(data, f, separators=(",", ":"))
            else:
                json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        if not exclusive:
            os.replace(tmp, path)
            return
        try:
            os.link(tmp, path)   # atomic, and fails if path exists
        except FileExistsError:
            raise
        except OSError:          # no hard links here: an O_EXCL placeholder, then the rename
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            os.replace(tmp, path)
            return
        os.unlink(tmp)


@contextlib.contextmanager
def _temp_beside(path: Path) -> Iterator[tuple[int, str]]:
    """(fd, name) of a new temp file in `path`'s directory (made if missing), for an atomic
    replace or link onto `path`; the temp file is removed if the block fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        yield fd, tmp
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _new_file_mode(path: Path) -> int:
    """The mode a plain open() would give `path`: an existing file's own, else 0o666 less the umask
    (mkstemp's temp files are 0o600, which would hide a report from the other users of a host)."""
    try:
        return path.stat().st_mode & 0o7777
    except OSError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask


def write_text_atomic(path: Path, text: str) -> None:
    """Write text so that `path` is always either the old complete file or the new one: a temp file
    in the same directory, then os.replace (a full disk or a kill never leaves it empty)."""
    path = Path(path)
    mode = _new_file_mode(path)
    with _temp_beside(path) as (fd, tmp):
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)


def write_output(path: Path, text: str, what: str) -> None:
    """write_text_atomic, a failure (disk full, the place gone) one line naming the path."""
    try:
        write_text_atomic(path, text)
    except OSError as e:
        raise UserError(f"{path}: cannot write the {what} ({e.strerror or e}); "
                        "the file there, if any, is unchanged; pass another path") from None


def read_json(path: Path, kind: str, schema_version: int | None = SCHEMA_VERSION) -> dict[str, Any]:
    """Read a harness JSON file, with one-line errors for the ways it can be wrong; None for
    schema_version leaves the version to the caller (a record migrates older ones)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read: {e}") from None
    try:
        data = json.loads(text)
    except ValueError as e:
        raise UserError(f"{path}: not valid JSON (truncated or corrupt?): {e}") from None
    if not isinstance(data, dict):
        raise UserError(f"{path}: not a {kind} file: it holds a JSON {_json_type(data)}, not a JSON object; "
                        "pass a file the harness wrote")
    if "kind" not in data:
        raise UserError(f"{path}: not a {kind} file: it has no \"kind\" field; pass a file the harness wrote")
    if data.get("kind") != kind:
        raise UserError(f"{path}: not a {kind} file (kind is {data.get('kind')!r})")
    v = data.get("schema_version")
    if "schema_version" not in data:
        raise UserError(f"{path}: {kind} file without a schema_version field; "
                        "was it edited by hand or written by another tool?")
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise UserError(f"{path}: invalid schema_version {v!r} (a whole number from 1 is expected); "
                        "was it edited by hand or written by another tool?")
    if schema_version is not None and v != schema_version:
        raise UserError(f"{path}: schema_version {data.get('schema_version')!r}; "
                        f"this harness reads schema_version {schema_version}")
    return data


def _json_type(data: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(data), "null" if data is None else type(data).__name__)


def duty_cycle(runs: list[dict[str, Any]], session_wall_s: float) -> dict[str, Any]:
    """How the session's wall time was spent; pure.

    run_s: every run's wall_s (warm-ups and failures too); measured_run_s: measured runs only;
    waiting_s: cooldowns, quiet-gate waits and thermal waits; duty_cycle: measured_run_s over
    session_wall_s (None when there is no wall time). Runs from before these keys read 0.
    """
    def num(x: Any) -> float:
        return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else 0.0
    run_s = sum(num(r.get("wall_s")) for r in runs)
    measured = sum(num(r.get("wall_s")) for r in runs if not r.get("warmup"))
    waiting = sum(num(r.get("cooldown_s")) + num(r.get("quiet_wait_s"))
                  + num(((r.get("load") or {}).get("thermal_wait") or {}).get("waited_s"))
                  for r in runs)
    wall = num(session_wall_s)
    return {"session_wall_s": round(wall, 3), "run_s": round(run_s, 3),
            "measured_run_s": round(measured, 3),
            "duty_cycle": round(measured / wall, 4) if wall > 0 else None,
            "waiting_s": round(waiting, 3), "runs": len(runs)}


def record_duty(data: dict[str, Any]) -> dict[str, Any] | None:
    """A record's duty: the one finish() wrote, else computed from its session wall time
    (over the runs made while it was kept); None for a record from before session wall time."""
    if isinstance(data.get("duty"), dict):
        return data["duty"]
    if "session_wall_s" not in data:
        return None
    runs = data.get("runs") or []
    return duty_cycle(runs[int(data.get("session_wall_from_run") or 0):], data["session_wall_s"])


@dataclass
class Record:
    path: Path
    data: dict[str, Any]
    # This process's segment of the session's wall time, and the segments before it.
    _segment_start: float = field(default=0.0, init=False, repr=False, compare=False)
    _earlier_segments: list[float] = field(default_factory=list, init=False, repr=False, compare=False)
    # When the record file was last rewritten, and how long that took (monotonic seconds).
    _last_write: float = field(default=0.0, init=False, repr=False, compare=False)
    _last_write_cost: float = field(default=0.0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._segment_start = time.monotonic()
        segs = self.data.get("session_segments_s")
        self._earlier_segments = [float(x) for x in segs] if isinstance(segs, list) else []
        # Runs already in a record from before session wall time are left out of its duty.
        self._from_run = None if "session_segments_s" in self.data else len(self.data.get("runs") or [])
        self._last_write = time.monotonic()

    @property
    def journal_path(self) -> Path:
        return journal_path(self.path)

    @classmethod
    def create(cls, path: str | Path, suite: dict[str, Any], host: dict[str, Any],
               command: list[str], planned_runs: int, extra: dict[str, Any] | None = None) -> Record:
        """Start a new record; refuses to replace an existing file."""
        p = Path(path)
        check_new_record(p)
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION, "kind": KIND, "session_id": uuid.uuid4().hex,
            "created": now_iso(), "finished": None, "complete": False, "command": list(command),
            "planned_runs": planned_runs, "resumes": [],
            **(extra or {}),
            "suite": suite, "host": host, "models": model_files(suite), "runs": [],
        }
        rec = cls(p, redact(data))
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
        data = read_json(p, KIND, schema_version=None)
        schema.check_version(data, str(p))
        for key in ("suite", "runs", "session_id"):
            if key not in data:
                raise UserError(f"{p}: record has no {key!r} field")
        if not isinstance(data["runs"], list):
            raise UserError(f"{p}: record's runs is a {type(data['runs']).__name__}, not a list; "
                            "was it edited by hand or written by another tool?")
        done = {r.get("index") for r in data["runs"] if isinstance(r, dict)}
        data["runs"].extend(r for r in read_journal(journal_path(p)) if r["index"] not in done)
        return cls(p, schema.load_record(data, str(p)))

    @property
    def runs(self) -> list[dict[str, Any]]:
        return self.data["runs"]

    def done_indices(self) -> set[int]:
        return {r["index"] for r in self.runs}

    def add_run(self, run: dict[str, Any]) -> None:
        """Append one finished run and persist it at once (runs are never edited afterwards):
        a line in the journal, and now and then the whole record."""
        if run["index"] in self.done_indices():
            raise ValueError(f"run {run['index']} is already in the record")
        # Secrets out before anything is kept (an engine may print its environment when it fails).
        clean = redact(run)
        if clean is not run:
            run.clear()
            run.update(clean)
        self.runs.append(run)
        # Flushed, not fsynced: a killed process's writes survive in the page cache, and a
        # power cut loses at most the runs since the last full rewrite (which is fsynced).
        with open(self.journal_path, "a", encoding="utf-8") as f:
            f.write(json.dumps(run, separators=(",", ":")) + "\n")
        since = time.monotonic() - self._last_write
        if since >= max(REWRITE_MIN_INTERVAL_S, self._last_write_cost / REWRITE_MAX_SHARE):
            self.write(compact=True)

    def note_resume(self, command: list[str], host: dict[str, Any]) -> None:
        self.data.setdefault("resumes", []).append(redact({"at": now_iso(), "command": list(command),
                                                           "host": host}))
        self.write()

    def finish(self, planned: int, interrupted: bool = False) -> None:
        """Write the record with its duty; complete when every planned run landed and the
        session was not interrupted (a check stopped between two rounds had more to run)."""
        self.data["complete"] = not interrupted and len(self.done_indices()) >= planned
        self.data["finished"] = now_iso() if self.data["complete"] else None
        self._update_wall()
        tracked = self.runs[int(self.data.get("session_wall_from_run") or 0):]
        self.data["duty"] = duty_cycle(tracked, self.data["session_wall_s"])
        self.write()

    def session_wall_s(self) -> float:
        """The session's wall time so far: earlier segments plus this one."""
        return sum(self._earlier_segments) + (time.monotonic() - self._segment_start)

    def _update_wall(self) -> None:
        if self._from_run is not None:
            self.data["session_wall_from_run"] = self._from_run
            self._from_run = None
        this = time.monotonic() - self._segment_start
        self.data["session_segments_s"] = [round(x, 3) for x in self._earlier_segments + [this]]
        self.data["session_wall_s"] = round(self.session_wall_s(), 3)

    def write(self, compact: bool = False, exclusive: bool = False) -> None:
        """Atomically; compact while runs are being added, indented (readable) at finish. The
        record then holds every run, so the journal goes (after the rename, never before)."""
        t0 = time.monotonic()
        self._update_wall()
        write_json_atomic(self.path, self.data, compact=compact, exclusive=exclusive)
        self.journal_path.unlink(missing_ok=True)
        self._last_write = time.monotonic()
        self._last_write_cost = self._last_write - t0


def journal_path(record_path: Path) -> Path:
    return record_path.with_name(record_path.name + ".journal")


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The runs a journal holds; a line cut short by a kill (the last one) is skipped."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read the record's run journal: {e}") from None
    runs = []
    for line in lines:
        try:
            run = json.loads(line)
        except ValueError:
            continue
        if isinstance(run, dict) and "index" in run:
            runs.append(run)
    return runs
