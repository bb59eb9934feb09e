"""Count string-keyed accesses in harness/, per package: `x["key"]` and `x.get("key")` on any
expression, found with Python's ast (a subscript whose index is a str constant; a call of an
attribute `get` whose first argument is a str constant). The schema (harness/core/schema.py)
and migration modules are left out: they are where the record's keys are meant to be spelled.

A measurement, printed by `make lint`; it never fails. Usage: python scripts/count_record_keys.py
"""

from __future__ import annotations

import ast
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent
while not (ROOT / "harness").is_dir() and ROOT != ROOT.parent:
    # Found from scripts/ or a folder below it.
    ROOT = ROOT.parent
PACKAGES = ("analyze", "collect", "render", "ci", "cli", "core")
EXCLUDED = {Path("harness/core/schema.py")}


def _is_str(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str)


def keyed_accesses(source: str) -> int:
    """String-keyed subscripts and .get("key") calls in one module's source."""
    count = 0
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and _is_str(node.slice):
            count += 1
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr == "get" and node.args and _is_str(node.args[0])):
            count += 1
    return count


def counted(path: Path) -> bool:
    rel = path.relative_to(ROOT)
    return rel not in EXCLUDED and "migrat" not in path.stem


def by_package(root: Path = ROOT) -> Counter[str]:
    """Accesses per package of harness/; anything else under harness/ (its top-level modules,
    the init templates) counts as "other"."""
    totals: Counter[str] = Counter({p: 0 for p in PACKAGES})
    for path in sorted((root / "harness").rglob("*.py")):
        if not counted(path):
            continue
        parts = path.relative_to(root / "harness").parts
        package = parts[0] if parts[0] in PACKAGES else "other"
        totals[package] += keyed_accesses(path.read_text(encoding="utf-8"))
    return totals


def main() -> int:
    totals = by_package()
    print("string-keyed accesses (x[\"k\"], x.get(\"k\")) in harness/, outside the schema and migrations:")
    for package, n in totals.items():
        if package in PACKAGES or n:
            print(f"  {package:<8} {n:>5}")
    print(f"  {'total':<8} {sum(totals.values()):>5}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
