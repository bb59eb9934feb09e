"""The one definition of the runs that count (harness.core.runs)."""

from __future__ import annotations

from harness.core.runs import as_run, as_runs, is_ok, measured_ok, measured_ok_runs
from harness.core.schema import Run

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


def test_a_typed_run_answers_as_its_dict_does() -> None:
    typed = as_runs(RUNS[:4] + [{**RUNS[4], "status": "ok"}, RUNS[5]])
    assert [r.index for r in typed if r.measured_ok] == [2, 4, 5]
    assert [r.index for r in typed if r.is_ok] == [0, 2, 4, 5]
    assert [r.index for r in measured_ok_runs(typed)] == [2, 4, 5]
    assert [is_ok(r) for r in typed] == [is_ok(r) for r in RUNS]


def test_as_run_passes_a_run_through_and_converts_a_dict_once() -> None:
    run = as_run({"index": 7, "status": "ok", "diagnostics": {"rounds": 3, "rounds_log": [{"offset": 0, "accepted": 1, "drafted": [4, 5]}]}})
    assert as_run(run) is run
    assert isinstance(run, Run) and run.diagnostics.rounds == 3
    assert run.diagnostics.rounds_log is not None and run.diagnostics.rounds_log[0].proposed == 2
