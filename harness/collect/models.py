"""Each pairing's weights as safetensors headers describe them, read when a session starts.

The record keeps the tables (`models`, schema 4) so the cost model's bytes per step come from
the weights that were measured, and a report renders the same on a machine without them.
Headers only: no tensor data is read.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from harness.collect.suite import model_dir
from harness.core.schema import SuiteSection

Tensors = dict[str, tuple[int, list[int]]]   # {tensor name: (bytes, shape)}


class _TensorEntry(msgspec.Struct):
    """One tensor in a safetensors header: where its bytes lie in the data, and its shape."""
    data_offsets: list[int]
    shape: list[int]


class _Index(msgspec.Struct):
    """A sharded model's model.safetensors.index.json: tensor name -> the shard file holding it."""
    weight_map: dict[str, str]


class _Cached(msgspec.Struct):
    """A shard's digest in the weights cache, valid while its size and mtime are these."""
    size: int
    mtime_ns: int
    sha256: str


def _cached(entry: Any) -> _Cached | None:
    try:
        return msgspec.convert(entry, _Cached)
    except msgspec.ValidationError:
        return None   # absent, or a cache entry another version wrote

# A safetensors header larger than this is not a header (the format caps it at 100 MB).
_MAX_HEADER = 100 * 1024 * 1024


def safetensors_tensor_bytes(path: str | os.PathLike[str]) -> Tensors:
    """{tensor name: (bytes, shape)} from one .safetensors file's JSON header, no tensor data read:
    bytes = data_offsets[1] - data_offsets[0]. ValueError if the header is malformed or runs past the file."""
    p = Path(path)
    size = p.stat().st_size
    with p.open("rb") as f:
        raw_len = f.read(8)
        if len(raw_len) != 8:
            raise ValueError(f"{p}: not a safetensors file (shorter than the 8-byte header length)")
        (n,) = struct.unpack("<Q", raw_len)
        if n == 0 or n > _MAX_HEADER or 8 + n > size:
            raise ValueError(f"{p}: not a safetensors file (header length {n} for a {size}-byte file)")
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{p}: safetensors header is not JSON ({exc})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{p}: safetensors header is not a JSON object")
    data_len = size - 8 - n
    out: Tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        try:
            entry = msgspec.convert(info, _TensorEntry, strict=False)
            start, end = entry.data_offsets
            shape = entry.shape
        except (msgspec.ValidationError, ValueError):
            raise ValueError(f"{p}: tensor {name!r} has no valid data_offsets/shape") from None
        if not 0 <= start <= end <= data_len:
            raise ValueError(f"{p}: tensor {name!r} offsets {start}..{end} outside the {data_len}-byte data")
        out[name] = (end - start, shape)
    return out


def _weight_files(model_dir: Path) -> list[Path]:
    # With an index, only the shards it names count (a directory may also hold a consolidated copy).
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            weight_map = msgspec.json.decode(index.read_bytes(), type=_Index).weight_map
        except msgspec.DecodeError:
            raise ValueError(f"{index}: no weight_map object") from None
        return sorted({model_dir / shard for shard in weight_map.values()})
    return sorted(model_dir.glob("*.safetensors"))


def model_tensor_bytes(model_dir: str | os.PathLike[str]) -> Tensors:
    """{tensor name: (bytes, shape)} over every safetensors shard of a model directory (headers only)."""
    d = Path(model_dir)
    if not d.is_dir():
        raise ValueError(f"{d}: not a model directory")
    files = _weight_files(d)
    if not files:
        raise ValueError(f"{d}: no .safetensors files")
    out: Tensors = {}
    for f in files:
        out.update(safetensors_tensor_bytes(f))
    return out



def weights_problem(directories: dict[str, Path | None]) -> str | None:
    """For an engine that loads safetensors itself: a truncated or corrupt weights file, said in
    one line before the session ({role: directory}; headers only, so a 16 GB model costs
    milliseconds). None when every header holds together."""
    for role, d in directories.items():
        if d is None or not Path(d).is_dir():
            continue   # a missing directory is the engine's own check to say
        try:
            model_tensor_bytes(d)
        except (ValueError, OSError) as e:
            return f"{role} weights cannot be loaded: {e}; copy the model again"
    return None


def _cache_path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harness" / "weights-sha256.json"


def _file_sha256(f: Path, cache: dict[str, Any]) -> str:
    st = f.stat()
    key = str(f.resolve())
    hit = _cached(cache.get(key))
    if hit is not None and hit.size == st.st_size and hit.mtime_ns == st.st_mtime_ns:
        return hit.sha256
    h = hashlib.sha256()
    with f.open("rb") as fh:
        for chunk in iter(lambda: fh.read(8 << 20), b""):
            h.update(chunk)
    cache[key] = msgspec.to_builtins(_Cached(size=st.st_size, mtime_ns=st.st_mtime_ns, sha256=h.hexdigest()))
    return h.hexdigest()


def weights_sha256(model_dir: Path) -> str:
    """One digest of a model directory's weights (every safetensors shard's content, by name):
    two directories of the same name with other weights differ here. A shard's digest is cached
    by path, size and mtime (XDG_CACHE_HOME/harness), so a 16 GB model is read once, not per session."""
    cache_file = _cache_path()
    try:
        cache = json.loads(cache_file.read_text())
        cache = cache if isinstance(cache, dict) else {}
    except (OSError, ValueError):
        cache = {}
    h = hashlib.sha256()
    old = dict(cache)
    for f in _weight_files(model_dir):
        h.update(f"{f.name}:{_file_sha256(f, cache)}\n".encode())
    if cache == old:
        return h.hexdigest()   # every shard was a cache hit: nothing to write
    try:   # a cache that cannot be written costs time next session, never this one
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = cache_file.with_name(f".{cache_file.name}.{os.getpid()}")
        tmp.write_text(json.dumps(cache, sort_keys=True))
        os.replace(tmp, cache_file)
    except OSError:
        pass
    return h.hexdigest()


def model_files(suite: SuiteSection | Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """{pairing: {role: {"directory", "tensors", "sha256"} or {"directory", "error"}}} for a suite's
    pairings; "embedded" is the default engine's embedded pair. A directory that cannot be read
    is said so here, not refused: command engines may make their weights themselves."""
    section = suite if isinstance(suite, SuiteSection) else msgspec.convert(suite, SuiteSection)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for pairing in section.pairings:
        roles: dict[str, dict[str, Any]] = {}
        for role, v in (("target", pairing.target), ("drafter", pairing.drafter)):
            if v is None:
                continue
            d = model_dir(v, role)
            if not d.is_dir():
                roles[role] = {"directory": str(d), "error": f"{role} directory {d} is not on this machine"}
                continue
            try:
                roles[role] = {"directory": str(d), "tensors": model_tensor_bytes(d), "sha256": weights_sha256(d)}
            except (ValueError, OSError) as e:
                roles[role] = {"directory": str(d), "error": str(e)}
        out[pairing.name] = roles
    return out
