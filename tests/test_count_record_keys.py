"""The string-keyed access count `make lint` prints: what it counts and where it looks."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def _script() -> ModuleType:
    # Found wherever under scripts/ it lives.
    path = next(REPO.glob("scripts/**/count_record_keys.py"))
    spec = importlib.util.spec_from_file_location("count_record_keys", path)
    mod = importlib.util.module_from_spec(spec)
    assert spec is not None and spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def test_it_counts_str_subscripts_and_str_gets_on_any_expression() -> None:
    src = ('r["a"]; r.get("b"); r.get(\'c\', 0); f()["d"]["e"]; x[0]; x[k]; x.get(k); '
           'x.get(); get("f"); x[1:2]; x.items()\n')
    assert _script().keyed_accesses(src) == 5


def test_it_leaves_out_the_schema_and_migrations_and_counts_every_package() -> None:
    mod = _script()
    assert not mod.counted(REPO / "harness/core/schema.py")
    assert not mod.counted(REPO / "harness/core/migrations.py")
    assert mod.counted(REPO / "harness/analyze/summary.py")
    totals = mod.by_package(REPO)
    assert set(mod.PACKAGES) <= set(totals) and totals["analyze"] > 0
