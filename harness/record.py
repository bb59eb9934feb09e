"""One JSON record per session: append-only, written atomically after every run.

A temp file in the same directory plus os.replace means a reader (or a crash, Ctrl-C, or
kill -9) only ever sees the previous complete file or the next one, never half of one. The
record says complete: false until the last planned run lands; `--resume` finishes it.

The record also keeps the session's wall time: one monotonic-clock segment per process that
creates, or loads and writes, it (a resume is a new segment), summed into session_wall_s on
every write. finish() writes the duty cycle: how much of that wall time was measured runs.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.errors import UserError

SCHEMA_VERSION = 1
KIND = "harness.record"


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).astimezone().isoformat(timespec="seconds")


def write_json_atomic(path: Path, data: Any, compact: bool = False) -> None:
    """Write JSON so that `path` is always either the old complete file or the new one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
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
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def read_json(path: Path, kind: str, schema_version: int = SCHEMA_VERSION) -> dict[str, Any]:
    """Read a harness JSON file, with one-line errors for the ways it can be wrong."""
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
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise UserError(f"{path}: not a {kind} file (kind is {data.get('kind') if isinstance(data, dict) else None!r})")
    if data.get("schema_version") != schema_version:
        raise UserError(f"{path}: schema_version {data.get('schema_version')!r}; "
                        f"this harness reads schema_version {schema_version}")
    return data


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
    waiting = sum(num(r.get("cooldown_s")) + num(r.get("gate_wait_s"))
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

    def __post_init__(self) -> None:
        self._segment_start = time.monotonic()
        segs = self.data.get("session_segments_s")
        self._earlier_segments = [float(x) for x in segs] if isinstance(segs, list) else []
        # Runs already in a record from before session wall time are left out of its duty.
        self._from_run = None if "session_segments_s" in self.data else len(self.data.get("runs") or [])

    @classmethod
    def create(cls, path: str | Path, suite: dict[str, Any], host: dict[str, Any],
               command: list[str], planned_runs: int, extra: dict[str, Any] | None = None) -> "Record":
        """Start a new record; refuses to replace an existing file."""
        p = Path(path)
        if p.exists():
            raise UserError(f"{p}: record already exists; finish it with --resume {p} "
                            "or pass another --record")
        data: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION, "kind": KIND, "session_id": uuid.uuid4().hex,
            "created": now_iso(), "finished": None, "complete": False, "command": list(command),
            "planned_runs": planned_runs, "resumes": [],
            **(extra or {}),
            "suite": suite, "host": host, "runs": [],
        }
        rec = cls(p, data)
        # O_EXCL first: two sessions started at once cannot both take the same path.
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(p, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            raise UserError(f"{p}: record already exists") from None
        rec.write()
        return rec

    @classmethod
    def load(cls, path: str | Path) -> "Record":
        p = Path(path)
        data = read_json(p, KIND)
        for key in ("suite", "runs", "session_id"):
            if key not in data:
                raise UserError(f"{p}: record has no {key!r} field")
        return cls(p, data)

    @property
    def runs(self) -> list[dict[str, Any]]:
        return self.data["runs"]

    def done_indices(self) -> set[int]:
        return {r["index"] for r in self.runs}

    def add_run(self, run: dict[str, Any]) -> None:
        """Append one finished run and persist at once (runs are never edited afterwards)."""
        if run["index"] in self.done_indices():
            raise ValueError(f"run {run['index']} is already in the record")
        self.runs.append(run)
        self.write(compact=True)

    def note_resume(self, command: list[str], host: dict[str, Any]) -> None:
        self.data.setdefault("resumes", []).append({"at": now_iso(), "command": list(command),
                                                    "host": host})
        self.write()

    def finish(self, planned: int) -> None:
        self.data["complete"] = len(self.done_indices()) >= planned
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

    def write(self, compact: bool = False) -> None:
        """Atomically; compact while runs are being added, indented (readable) at finish."""
        self._update_wall()
        write_json_atomic(self.path, self.data, compact=compact)
