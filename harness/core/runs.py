"""Which of a record's runs count: the one definition every layer reads.

A run is measured unless it is a warm-up, and ok unless it failed (an engine error, a result
the gate refused, or a run set aside on load). Statistics, identity and figures read the
measured ok runs; a few readers also take ok warm-ups (a shape's first use, an output to
compare), and say so by calling `is_ok` alone.

The record still travels as a dict while its readers move to the typed `Record` and `Run`:
`as_record`, `as_run` and `as_runs` are the boundary a typed analysis converts at, once at its
entry (a typed one passes through), and `is_ok`/`measured_ok` read either form until every
caller passes `Run`s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import msgspec

from harness.core.recordsections import Scaling
from harness.core.schema import Record, Run, SuiteSection

R = TypeVar("R", bound=Run | Mapping[str, Any])


def as_run(run: Run | Mapping[str, Any]) -> Run:
    """A run as the typed `Run` (a loaded record's run dict converted, a `Run` as it is)."""
    return run if isinstance(run, Run) else msgspec.convert(run, Run)


def as_runs(runs: Iterable[Run | Mapping[str, Any]]) -> list[Run]:
    """`as_run` of each, in their order."""
    return [as_run(r) for r in runs]


# A record typed, or as a loaded record's dict (the analyses convert it once a call).
RecordData = Record | Mapping[str, Any]


def as_record(rec: RecordData) -> Record:
    """A record as the typed `Record` (a loaded record's dict converted once, a `Record` as it is)."""
    return rec if isinstance(rec, Record) else msgspec.convert(rec, Record)


class RecordCore(msgspec.Struct, kw_only=True):
    """What the analyses of a session read of its record: the suite, the runs and the scaling
    probe. Read from a record still being written too (a session's own summary), which lacks
    the fields a finished `Record` requires."""
    suite: SuiteSection
    runs: list[Run] = []
    scaling: Scaling | None = None


AnyRecord = Record | RecordCore | Mapping[str, Any]


def record_core(rec: AnyRecord) -> RecordCore:
    """A record's suite, runs and scaling, typed (a dict converted once; a typed one taken as it is)."""
    if isinstance(rec, RecordCore):
        return rec
    if isinstance(rec, Record):
        return RecordCore(suite=rec.suite, runs=rec.runs, scaling=rec.scaling)
    return msgspec.convert(rec, RecordCore)


def is_ok(run: Run | Mapping[str, Any]) -> bool:
    """The run finished ok (a warm-up too)."""
    return run.is_ok if isinstance(run, Run) else run.get("status") == "ok"


def measured_ok(run: Run | Mapping[str, Any]) -> bool:
    """The run is measured (not a warm-up) and finished ok."""
    return run.measured_ok if isinstance(run, Run) else not run.get("warmup") and is_ok(run)


def measured_ok_runs(runs: Iterable[R]) -> list[R]:
    """The measured ok runs of `runs` (a record's "runs", or some of them), in their order."""
    return [r for r in runs if measured_ok(r)]
