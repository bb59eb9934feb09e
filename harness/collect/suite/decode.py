"""A suite file's values -> its typed parts (msgspec.convert), every error one `UserError` line
"<file>: <key>: <what is wrong>", the key a path into the file (`arms[2].block`,
`engines.mine.phases`) and the value it got, as the hand-written checks before it said them."""

from __future__ import annotations

import math
import re
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import msgspec

from harness.core.errors import UserError

# What to give where a required field is missing, by field name.
_MISSING = {"target": "a model directory or \"embedded\"", "name": "a non-empty string"}


def fail(source: str, key: str, what: str) -> UserError:
    return UserError(f"{source}: {key}: {what}")


def typed(raw: Any, typ: Any, source: str, key: str, also_known: tuple[str, ...] = ()) -> Any:
    """raw as typ; `key` is where raw sits in the file ("" for the top level), `also_known`
    the fields besides typ's that an unknown-field error lists (the top level's parts)."""
    _finite(raw, source, key)
    try:
        return msgspec.convert(raw, typ)
    except msgspec.ValidationError as e:
        raise fail(source, *_explain(str(e), raw, typ, key, also_known)) from None


def _finite(raw: Any, source: str, key: str) -> None:
    # inf would wait, time out or budget forever; nan compares false with every bound.
    if isinstance(raw, float) and not math.isfinite(raw):
        raise fail(source, key, f"expected a finite number, got {raw}")
    items = raw.items() if isinstance(raw, dict) else enumerate(raw) if isinstance(raw, list) else ()
    for k, v in items:
        _finite(v, source, _join(key, k))


def _explain(msg: str, raw: Any, typ: Any, key: str, also_known: tuple[str, ...]) -> tuple[str, str]:
    text, _, at = msg.partition(" - at `")
    segs: list[str | int] = []
    value, t = raw, typ
    for step in re.finditer(r"\.([^.\[]+)|\[(\d+)\]|\[\.\.\.\]", at.rstrip("`").removeprefix("$")):
        seg: str | int | None = step[1] if step[1] is not None else int(step[2]) if step[2] is not None else None
        t = _child(t, seg)
        if seg is None:          # a table's value: msgspec does not say which key, the data does
            seg = next((k for k, v in value.items() if not _fits(v, t)), "?")
        segs.append(seg)
        value = value.get(seg) if isinstance(value, dict) else \
            value[seg] if isinstance(value, list) and isinstance(seg, int) else None
    where = key
    for s in segs:
        where = _join(where, s)
    if m := re.fullmatch(r"Object contains unknown field `(.*)`", text):
        known = [*_fields(t), *(() if segs else also_known)]   # the top level also has its parts
        return _join(where, m[1]), f"unknown field (known: {', '.join(known)})"
    if m := re.fullmatch(r"Object missing required field `(.*)`", text):
        return _join(where, m[1]), f"missing ({_MISSING.get(m[1], 'required')})"
    if m := re.fullmatch(r"Expected `\w+` (>=|>|<=|<) (\S+)", text):
        return where, f"must be {m[1]} {float(m[2]):g}, got {value:g}"
    if text.startswith("Expected `str` of length"):
        return where, f"expected a non-empty string, got {value!r}"
    if text.startswith(("Expected `", "Invalid enum value")):
        return where, f"expected {_describe(t, where)}, got {_show(value)}"
    return where, text


def _show(value: Any) -> str:
    # A whole table or list would not fit the one line.
    return "a table" if isinstance(value, dict) else "a list" if isinstance(value, list) else repr(value)


def _join(key: str, seg: str | int) -> str:
    if isinstance(seg, int):
        return f"{key}[{seg}]"
    return f"{key}.{seg}" if key else seg


def _fits(value: Any, typ: Any) -> bool:
    try:
        msgspec.convert(value, typ)
    except msgspec.ValidationError:
        return False
    return True


def _bare(t: Any) -> Any:
    """t without its constraints and without None (an optional field's value was not None)."""
    while True:
        if get_origin(t) is Annotated:
            t = get_args(t)[0]
        elif get_origin(t) in (Union, types.UnionType) and type(None) in get_args(t):
            rest = tuple(a for a in get_args(t) if a is not type(None))
            t = rest[0] if len(rest) == 1 else Union[rest]  # noqa: UP007  (a tuple of types)
        else:
            return t


def _is_struct(t: Any) -> bool:
    return isinstance(t, type) and issubclass(t, msgspec.Struct)


def _fields(t: Any) -> list[str]:
    t = _bare(t)
    return [f.encode_name for f in msgspec.structs.fields(t)] if _is_struct(t) else []


def _child(t: Any, seg: str | int | None) -> Any:
    """The type at one step into t: a struct's field, a list's item, a table's value."""
    t = _bare(t)
    if _is_struct(t) and isinstance(seg, str):
        return get_type_hints(t, include_extras=True).get(seg, Any)
    if get_origin(t) in (list, tuple):
        return get_args(t)[0]
    if get_origin(t) is dict:
        return get_args(t)[1]
    return Any


def _describe(t: Any, where: str) -> str:
    t = _bare(t)
    if get_origin(t) in (Union, types.UnionType):
        return " or ".join(_describe(a, where) for a in get_args(t))
    if get_origin(t) is Literal:
        return "one of " + ", ".join(f'"{a}"' for a in get_args(t))
    if get_origin(t) in (list, tuple):
        item = _bare(get_args(t)[0])
        if item is str:
            return "a list of strings"
        return f"an array of tables ([[{where}]])" if _is_struct(item) else "a list"
    if get_origin(t) is dict or _is_struct(t):
        return "a table"
    return {bool: "true or false", int: "an integer", float: "a number", str: "a string"}.get(t, str(t))
