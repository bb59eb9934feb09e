"""What the PR comment is rendered from: the comparison of two commits as harness.ci.twocommits
judged it (described here by its shape, since render sits below ci), what pr-check knows of the
check (host, command, load), and the links a team configured. Nothing here measures or reads
a file."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import msgspec

from harness.analyze.checknotes import CheckNotes
from harness.analyze.design import Design
from harness.analyze.paired import Paired

# harness.ci.twocommits' exit statuses, as the comment's title says them.
STATUS_WORDS = {0: "pass", 1: "FAIL", 3: "inconclusive"}


class FigureIn(Protocol):
    """One figure of the check (harness.ci.twocommits.Figure)."""

    arm: str
    figure: str                 # "ms/token", "phase ms/round: verify_forward", ...
    gated: bool                 # decides the check; the others are diagnostics
    result: Paired              # the paired head/base reading
    base_median: float | None
    head_median: float | None
    ack: str | None             # the acknowledgement's reason, when one covers this change


class IdentityIn(Protocol):
    """One arm/prompt's byte identity against base (harness.analyze.identity.IdentityRow)."""

    arm: str
    prompt: str
    status: str                 # identical | differs | nondeterministic | ...
    detail: str


class ComparisonIn(Protocol):
    """The judged comparison of two commits (harness.ci.twocommits.Comparison)."""

    base: str
    head: str
    design: Design
    records: dict[str, str]     # side -> record path
    outcome: dict[str, Any]     # rounds, stopped_because
    duration_s: float
    notes: CheckNotes           # contention, environment, restart_s, check_duty, builds
    labels: dict[str, list[str]]

    @property
    def figures(self) -> Sequence[FigureIn]: ...

    @property
    def identity(self) -> Sequence[IdentityIn]: ...

    @property
    def exit_status(self) -> int: ...

    @property
    def newly_failing(self) -> list[str]: ...


@dataclass(frozen=True)
class Links:
    """Where a reader goes next; each optional (asv.conf.json's harness_report_url and
    harness_dashboard_url, or pr-check's --report-url and --dashboard-url)."""

    report_url: str | None = None      # the rendered record(s) of this check
    dashboard_url: str | None = None   # the published dashboard


@dataclass(frozen=True)
class MachineHost:
    """The asv machine entry's parts the comment names (every value a string, as asv stores them)."""

    chip: str = "unknown"
    gpu_generation: str = "unknown"


@dataclass(frozen=True)
class SideLoad:
    """One side's measured runs and how many of them failed, were contended or had their quiet
    wait time out."""

    runs: int
    failed: int
    contended: int
    quiet_wait_timeouts: int


@dataclass(frozen=True)
class CheckMeta:
    """What pr-check knows of the check beyond the comparison."""

    machine: str                       # the asv machine name; the comment's marker names it
    command: str                       # the command line that repeats the check
    duration_s: float                  # the check's wall time
    host: MachineHost = field(default_factory=MachineHost)   # the asv machine entry
    load: Mapping[str, SideLoad] = field(default_factory=dict)   # side ("base", "head") -> its runs
    waiting: Sequence[str] = ()        # analyze.summary.check_waiting_lines: waiting that took the check

    @classmethod
    def of(cls, meta: Mapping[str, Any]) -> CheckMeta:
        """From the dict pr-check (and older callers) build; a null host or load reads as none."""
        return msgspec.convert({k: v for k, v in meta.items() if v is not None}, cls)
