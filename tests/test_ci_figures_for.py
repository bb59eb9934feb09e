"""harness.ci.reportfiles.figures_for: the figures a pr-check or history page draws."""

from __future__ import annotations

import json
from typing import Any

from harness_helpers import REPO

from harness.ci.reportfiles import figures_for
from harness.core.schema import load_record

REPORTS = REPO / "reports"


def rec(name: str) -> dict[str, Any]:
    p = REPORTS / name
    return load_record(json.loads(p.read_text()), str(p))


def test_a_comparison_of_records_without_runs_draws_nothing() -> None:
    """Two records with no runs have no comparison data: no figure, not a crash."""
    a, b = rec("20261205-084154-mtp-study-linux-cpu.json"), rec("20261205-032041-mtp-study-h200.json")
    a["runs"], b["runs"] = [], []
    assert figures_for(a, b) == []


def test_a_comparison_with_runs_draws_the_ms_per_token_figure() -> None:
    a, b = rec("20261205-084154-mtp-study-linux-cpu.json"), rec("20261205-032041-mtp-study-h200.json")
    assert "compare-ms-per-token" in {f.name for f in figures_for(a, b)}
