"""A record's runs checked against its own suite and plan when it is loaded or resumed.

A run naming an arm, pairing or prompt its suite lacks once gave `harness report` a KeyError,
and `harness run --resume` took a record with a run index twice, past its plan, or at an index
where the plan has another arm, prompt or repetition (the missing runs are found by index, so
such a record resumes into the wrong runs). Each is one line naming the file and the run.

Runs recorded as ok by a harness that did not yet check engine results (NaN, a negative time,
no token: harness.core.results) are set aside on load: failed, marked `set_aside`, their
non-finite numbers left out (absent from an object, so the run keeps its typed shape; null in a
list), so every figure leaves them out and the report names them.
"""

from __future__ import annotations

from typing import Any

from harness.core.errors import UserError
from harness.core.results import run_problem, scrub_non_finite
from harness.core.runs import as_record
from harness.core.schema import Record

SET_ASIDE = "set_aside"
SET_ASIDE_PREFIX = "set aside on load: "
FIX = "was the record edited by hand or joined from another session? restore it from a copy, or remove that run"


def check_runs_in_suite(rec: Record, where: str) -> None:
    """One line (UserError) for a run whose index is taken already or whose arm, pairing or
    prompt the record's suite does not have."""
    suite = rec.suite
    arms = [a.name for a in suite.arms]
    pairings = [p.name for p in suite.pairings]
    prompts = [p.name for p in suite.prompts]
    seen: set[int] = set()
    for r in rec.runs:
        i = r.index
        if i in seen:
            raise UserError(f"{where}: run {i} appears twice in the record (or its journal); {FIX}")
        seen.add(i)
        for key, got, names in (("arm", r.arm, arms), ("pairing", r.pairing, pairings), ("prompt", r.prompt, prompts)):
            # A pairing or prompt absent from an old run is left to the readers that default it.
            if (key == "arm" or got is not None) and got not in names:
                raise UserError(f"{where}: run {i} names {key} {got!r}, which the record's suite does not "
                                f"have ({', '.join(map(str, names)) or 'none'}); {FIX}")


def set_aside_bad_runs(rec: Record, runs: list[dict[str, Any]]) -> list[str]:
    """Runs recorded as ok that hold what no engine result may: failed and marked set_aside,
    with what was wrong as their error; a one-line description of each. `runs` is the record's
    runs as loaded (its dicts, changed in place), `rec` the same record typed."""
    out = []
    for k, (run, r) in enumerate(zip(rec.runs, runs, strict=True)):
        problem = run_problem(r)
        if problem is None:
            continue
        if run.is_ok:
            r.update(status="failed", error=SET_ASIDE_PREFIX + problem, marks=[*run.marks, "failed", SET_ASIDE])
            out.append(f"run {run.index} ({run.arm} on {run.prompt}) set aside: {problem}")
        # Strict JSON holds no NaN: a resumed record is rewritten with these runs in it.
        runs[k] = scrub_non_finite(r)
    return out


def checked(data: dict[str, Any], where: str) -> dict[str, Any]:
    """A loaded record's runs checked against its suite, and its implausible runs set aside.
    `data` has the Record's shape (schema.load_record checked it)."""
    rec = as_record(data)
    check_runs_in_suite(rec, where)
    set_aside_bad_runs(rec, data["runs"])
    return data


def check_runs_in_plan(data: Record, plan: list[Any], where: str) -> None:
    """Before a resume: every run is the plan's run at its index (the missing runs are found by
    index); one line (UserError) naming the first that is not."""
    by_index = {p.index: p for p in plan}
    for r in data.runs:
        p = by_index.get(r.index)
        if p is None:
            raise UserError(f"{where}: run {r.index} is outside the record's plan of {len(plan)} runs "
                            f"(indices 0 to {len(plan) - 1}); {FIX}")
        for key, got, want in (("arm", r.arm, p.arm), ("pairing", r.pairing, p.pairing), ("prompt", r.prompt, p.prompt),
                               ("repetition", r.repetition, p.repetition), ("warmup", r.warmup, p.warmup)):
            if got != want:
                raise UserError(f"{where}: run {r.index} has {key} {got!r} where the record's plan has {want!r} at "
                                f"that index; resuming would measure the wrong runs; {FIX}")


def resume_plan_repetitions(data: Record, settings: Any) -> int:
    """How many repetitions a resumed record's plan holds: those it planned (the minimum and each
    round its budget added), else its suite's; a budgeted record killed before it said how many
    rounds it had added has all its runs' repetitions."""
    if data.planned_repetitions is not None:
        return data.planned_repetitions
    reps = int(settings.repetitions)
    if settings.budget_s:
        reps = max([reps] + [r.repetition + 1 for r in data.runs if not r.warmup and r.repetition is not None])
    return reps


def check_resumable(data: Record, suite: Any, where: str) -> None:
    """Before `harness run --resume`: every run already there is the resumed plan's run at its
    index (check_runs_in_plan), the plan being the suite's over the repetitions planned."""
    from harness.collect.plan import build_plan
    check_runs_in_plan(data, build_plan(suite, resume_plan_repetitions(data, suite.settings)), where)
