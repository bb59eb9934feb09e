"""Files the harness writes and reads: atomic writers, and the checks made before any work.

Every output is written atomically (a temp file beside it, then a rename), so a reader, a full
disk or kill -9 only ever sees the previous complete file or the next one. The checks say in one
line, before anything is measured, when a path cannot be written or would replace something the
user has.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgspec

from harness.core import schema
from harness.core.errors import UserError


class _Header(msgspec.Struct):
    """A harness JSON file's two leading fields, as found (UNSET: the file lacks it; any JSON
    value otherwise, judged by the reader)."""
    kind: Any = msgspec.UNSET
    schema_version: Any = msgspec.UNSET


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
    kind = msgspec.convert(data, _Header).kind if isinstance(data, dict) else None
    return kind if isinstance(kind, str) and kind.startswith(HARNESS_KIND_PREFIX) else None


def text_marker(writer: str) -> str:
    """The last line of a text output `harness WRITER` wrote: an HTML comment, so it does not show
    in rendered Markdown, and the mark check_output looks for before replacing the file."""
    return f"<!-- written by harness {writer}; replaced on the next run -->"


def marked(text: str, writer: str) -> str:
    """text with its writer's marker as the last line, after a blank one (a table above it ends)."""
    return text.rstrip("\n") + "\n\n" + text_marker(writer) + "\n"


def written_by(path: Path, writer: str, own_kind: str | None = None,
               earlier: Callable[[str], bool] | None = None) -> bool:
    """Whether the regular file `path` may be replaced by `harness WRITER`'s output: empty (nothing
    in it to lose: `touch`, mktemp), JSON of `own_kind` for a JSON output, the writer's marker as
    the last line of a text output, or text `earlier` takes for an output from before markers."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return False            # unreadable or binary: not a file the harness wrote
    if not text.strip():
        return True
    if own_kind is not None:
        return held_kind(path) == own_kind
    lines = text.rstrip().splitlines()
    return lines[-1].strip() == text_marker(writer) or (earlier is not None and earlier(text))


def check_harness_name(path: Path, what: str) -> None:
    """One line when `path` is named like a file the harness keeps beside another and removes or
    reads on its own: a record's journal (RECORD.journal), a lock (.NAME.lock), a temp file
    (.NAME.*.tmp, a write probe)."""
    name = path.name
    if name.endswith(".journal"):
        raise UserError(f"{path}: named like a record's run journal (RECORD.journal, which the harness reads "
                        f"with its record and removes); pass another path for the {what}")
    if name.startswith(".") and name.endswith((".lock", ".tmp")) or name.startswith(".harness-write-probe-"):
        raise UserError(f"{path}: named like a harness lock or temp file (.NAME.lock, .NAME.*.tmp, which the "
                        f"harness removes); pass another path for the {what}")


def check_output(path: str | Path, what: str, own_kind: str | None = None, writer: str | None = None,
                 earlier: Callable[[str], bool] | None = None) -> None:
    """One line (UserError) when writing the `what` to `path` would fail or would replace
    something the user has, said before any work starts: an existing path that is not a regular
    file (a device, a pipe), a file holding a harness kind other than `own_kind` (a record,
    baselines, another command's JSON), a name the harness keeps for its own files
    (check_harness_name), check_writable's checks, and, given the `writer` ("report",
    "pr-check", ...), an existing file that is not its earlier output (written_by)."""
    p = Path(path)
    if p.exists() and not p.is_dir() and not p.is_file():
        raise UserError(f"{p}: the {what} path is not a regular file (a device, pipe or socket); "
                        "pass a file path")
    kind = held_kind(p) if p.is_file() else None
    if kind is not None and kind != own_kind:
        raise UserError(f"{p}: holds a {kind}; writing the {what} there would replace it; pass another path")
    check_harness_name(p, what)
    check_writable(p, what)
    if writer is not None and p.is_file() and not written_by(p, writer, own_kind, earlier):
        raise UserError(f"{p}: not written by harness {writer}; writing the {what} there would replace it; "
                        "pass another path or remove it")


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


def write_json_atomic(path: Path, data: Any, compact: bool = False, exclusive: bool = False) -> None:
    """Write JSON so that `path` is always either the old complete file or the new one.
    exclusive: `path` must not exist yet (FileExistsError if it does); it appears complete, by a
    hard link of the finished temp file, so no reader ever sees it empty."""
    mode = _new_file_mode(path)
    with _temp_beside(path) as (fd, tmp):
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            # Compact uses json's C encoder, about 4x faster than indent=1's Python one: the
            # record is rewritten after every run and grows with each, so this is per-run cost.
            # allow_nan=False: strict JSON (a bare NaN is no JSON; harness.core.results keeps them out).
            if compact:
                json.dump(data, f, separators=(",", ":"), allow_nan=False)
            else:
                json.dump(data, f, indent=1, sort_keys=False, allow_nan=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)   # a record follows the umask, as a report does
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
    replace or link onto `path`; the temp file is removed if the block fails. Its name carries
    the writer's pid, so one that kill -9 left is known stale (remove_stale_temps)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        yield fd, tmp
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _temp_pattern(path: Path) -> re.Pattern[str]:
    # _temp_beside's names for exactly this target: .NAME.<pid>.<mkstemp's 8 characters>.tmp
    return re.compile(rf"\.{re.escape(path.name)}\.(\d+)\.[a-z0-9_]{{8}}\.tmp")


def remove_stale_temps(path: Path) -> list[Path]:
    """Remove the temp files _temp_beside made for `path` whose writer (by the pid in the name)
    is no longer running on this host, as kill -9 mid-write leaves them; the removed ones. Call
    it only holding `path`'s lock (harness.collect.lock), so no live writer of it is cut short."""
    pattern = _temp_pattern(path)
    removed: list[Path] = []
    try:
        names = os.listdir(path.parent)
    except OSError:
        return removed
    for name in names:
        m = pattern.fullmatch(name)
        if m and not _pid_alive(int(m.group(1))):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path.parent / name)
                removed.append(path.parent / name)
    return removed


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return True   # not a pid the harness wrote: leave the file
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True   # someone else's live process, or no such pid to ask about: leave the file
    return True


def append_line(path: Path, line: str) -> None:
    """Append one line to `path` (made if missing, following the umask). A failed write (a full
    disk) is cut back off, so the file never ends in half a line that the next append would
    run into (a reader skips a cut-short last line; one mid-file would eat the line after it)."""
    data = memoryview((line.rstrip("\n") + "\n").encode("utf-8"))
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o666)
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        if end and os.pread(fd, 1, end - 1) != b"\n":   # a line a kill cut short: end it first
            data = memoryview(b"\n" + bytes(data))
        try:
            while data:
                data = data[os.write(fd, data):]
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, end)
            raise
    finally:
        os.close(fd)


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


def read_json(path: Path, kind: str, schema_version: int | None = schema.SCHEMA_VERSION) -> dict[str, Any]:
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
    header = msgspec.convert(data, _Header)
    if header.kind is msgspec.UNSET:
        raise UserError(f"{path}: not a {kind} file: it has no \"kind\" field; pass a file the harness wrote")
    if header.kind != kind:
        raise UserError(f"{path}: not a {kind} file (kind is {header.kind!r})")
    v = header.schema_version
    if v is msgspec.UNSET:
        raise UserError(f"{path}: {kind} file without a schema_version field; "
                        "was it edited by hand or written by another tool?")
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise UserError(f"{path}: invalid schema_version {v!r} (a whole number from 1 is expected); "
                        "was it edited by hand or written by another tool?")
    if schema_version is not None and v != schema_version:
        raise UserError(f"{path}: schema_version {v!r}; "
                        f"this harness reads schema_version {schema_version}")
    return data


def _json_type(data: Any) -> str:
    return {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(data), "null" if data is None else type(data).__name__)


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
