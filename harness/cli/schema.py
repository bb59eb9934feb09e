"""`harness schema [--write | --check]`: print, regenerate or verify schema/*.schema.json."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from harness.core.schema import SCHEMA_DIR, json_schemas, stale_schemas, write_schemas

NAME = "schema"


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """`harness schema [--write | --check]`: print, regenerate or verify schema/*.schema.json."""
    p = sub.add_parser("schema", help="the JSON Schema of the engine result, record and baselines")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true", help=f"regenerate the files under {SCHEMA_DIR.name}/")
    g.add_argument("--check", action="store_true", help="exit 1 when the committed files are stale")
    p.add_argument("--dir", type=Path, default=SCHEMA_DIR, help="where the files live (default: the repository's schema/)")
    return p


def run(args: argparse.Namespace) -> int:
    if args.write:
        for path in write_schemas(args.dir):
            print(path)
        return 0
    if args.check:
        stale = stale_schemas(args.dir)
        for n in stale:
            print(f"{args.dir / n}: stale or missing; run `harness schema --write`")
        return 1 if stale else 0
    print(json_schemas()["engine-result.schema.json"], end="")
    return 0
