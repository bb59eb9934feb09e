"""`harness schema [--write | --check]`: print, regenerate or verify schema/*.schema.json."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from harness.collect.files import check_directory, check_output
from harness.core.errors import UserError
from harness.core.schema import SCHEMA_DIR, json_schemas, stale_schemas, write_schemas

NAME = "schema"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    """`harness schema [--write | --check]`: print, regenerate or verify schema/*.schema.json."""
    p = sub.add_parser("schema", help="the JSON Schema of the engine result, record and baselines")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help=f"regenerate the files under {SCHEMA_DIR.name}/")
    g.add_argument("--check", action="store_true", help="exit 1 when the committed files are stale")
    p.add_argument("--dir", type=Path, default=SCHEMA_DIR, help="where the files live (default: the repository's schema/)")
    return p


class _SchemaHead(msgspec.Struct):
    """A JSON Schema file's identity: its $id and title."""
    id: Any = msgspec.field(name="$id", default=None)
    title: Any = None


def _our_schema(name: str) -> Callable[[str], bool]:
    """A JSON Schema file this command wrote: its $id is its file name, its title names the harness
    schema_version (json_schemas); JSON has no room for a marker line."""
    def ours(text: str) -> bool:
        try:
            head = msgspec.json.decode(text, type=_SchemaHead)
        except msgspec.DecodeError:   # not JSON, or not a JSON object
            return False
        return head.id == name and "(harness schema_version" in str(head.title)
    return ours


def run(args: argparse.Namespace) -> int:
    if args.write:
        check_directory(args.dir, "schema directory (--dir)")
        for name in json_schemas():
            check_output(args.dir / name, "JSON Schema", writer="schema --write", earlier=_our_schema(name))
        try:
            paths = write_schemas(args.dir)
        except OSError as e:
            raise UserError(f"{args.dir}: cannot write the JSON Schema files there ({e.strerror or e}); "
                            "pass another --dir") from None
        for path in paths:
            print(path)
        return 0
    if args.check:
        if not args.dir.exists():
            raise UserError(f"{args.dir}: no such directory (--dir names where the schema files live)")
        if not args.dir.is_dir():
            raise UserError(f"{args.dir}: not a directory (--dir names where the schema files live)")
        stale = stale_schemas(args.dir)
        for n in stale:
            print(f"{args.dir / n}: stale or missing; run `harness schema --write`")
        return 1 if stale else 0
    print(json_schemas()["engine-result.schema.json"], end="")
    return 0
