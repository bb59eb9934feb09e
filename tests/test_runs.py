"""The one definition of the runs that count (harness.core.runs)."""

from __future__ import annotations

from harness.core.runs import is_ok, measured_ok, measured_ok_runs

RUNS = [
    {"index": 0, "warmup": True, "status": "ok"},
    {"index": 1, "warmup": True, "status": "failed"},
    {"index": 2, "warmup": False, "status": "ok"},
    {"index": 3, "warmup": False, "status": "failed"},
    {"index": 4, "status": "ok"},                     # no warmup key: measured
    {"index": 5, "warmup": False, "status": "ok"},
]


def test_measured_ok_runs_are_ok_runs_that_are_not_warm_ups_in_order() -> None:
    assert [r["index"] for r in measured_ok_runs(RUNS)] == [2, 4, 5]
    assert [r["index"] for r in RUNS if measured_ok(r)] == [2, 4, 5]


def test_is_ok_takes_warm_ups_too() -> None:
    assert [r["index"] for r in RUNS if is_ok(r)] == [0, 2, 4, 5]
    assert not is_ok({"index": 6})                    # no status: not ok
