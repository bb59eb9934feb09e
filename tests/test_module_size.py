"""Small modules: no module of the harness or the engine over 500 lines (make lint runs this)."""

from __future__ import annotations

from harness_helpers import REPO

LIMIT = 500


def test_no_module_is_over_500_lines() -> None:
    sizes = {p.relative_to(REPO).as_posix(): len(p.read_text().splitlines())
             for pkg in ("harness", "specdec") for p in (REPO / pkg).rglob("*.py")}
    assert sizes, "no module found"
    over = {p: n for p, n in sizes.items() if n > LIMIT}
    assert not over, f"split these modules (over {LIMIT} lines): {over}"
