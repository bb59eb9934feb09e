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


def test_as_record_passes_a_record_through_and_reads_the_sessions_sections() -> None:
    import json
    from pathlib import Path

    import msgspec

    from harness.core.runs import as_record
    from harness.core.schema import Record, load_record
    path = Path(__file__).parent / "fixtures" / "default-suite-linux-cpu.json"
    data = load_record(json.loads(path.read_text()), str(path))
    rec = as_record(data)
    assert as_record(rec) is rec
    assert rec.purpose == "run" and rec.quick is False and rec.resumes == []
    assert rec.sequential is not None and rec.sequential.min_repetitions == data["sequential"]["min_repetitions"]
    look = rec.sequential.looks[-1]
    assert look.figures and all(f.verdict in ("worse", "improved", "unchanged", "inconclusive")
                                for f in look.figures.values())
    assert rec.duty is not None and rec.duty.runs == len(rec.runs)
    # Written back, the record's own sections have the keys, values and order they were read with.
    back = json.loads(msgspec.json.encode(rec))
    assert [k for k in back if k not in ("suite", "host")] == [k for k in data if k not in ("suite", "host")]
    for key in ("resumes", "sequential", "duty", "session_segments_s", "planned_repetitions", "baselines"):
        assert json.dumps(back[key]) == json.dumps(data[key]), key
    assert isinstance(msgspec.convert(back, Record), Record)


def test_a_comparisons_sequential_has_no_round_bounds_and_writes_none() -> None:
    import json

    import msgspec

    from harness.core.recordsections import Sequential
    summary = {"design": {"threshold": 0.1, "alpha": 0.05, "looks": 1, "figures": 1, "power": 0.8, "floor": None,
                          "selected": 1, "look": 1, "times": [], "sizes": [], "look_share": 1.0,
                          "alpha_per_test": 0.05, "min_effect": 0.05},
               "budget_s": None, "rounds": 3, "stopped": "fixed", "stopped_because": "a fixed number of rounds (no budget)",
               "looks": [], "round_s": [1.0, 1.5, 1.25]}
    seq = msgspec.convert(summary, Sequential)
    assert seq.min_repetitions is msgspec.UNSET and seq.budget_s is None
    assert json.loads(msgspec.json.encode(seq)) == summary
    assert list(json.loads(msgspec.json.encode(seq))) == list(summary)
