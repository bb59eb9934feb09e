"""What a compare-commits check says about itself beside its verdicts: its duty cycle, worker
restarts and generations, builds, environment differences and contention. Made by
harness.ci.twocommits; read by the PR comment, compare-commits' output and its JSON summary."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from harness.analyze.contended import SidesContention
from harness.analyze.envdiff import EnvDifference


@dataclass
class CheckDuty:
    """How much of the check's wall time was measuring."""
    measured_run_s: float
    wall_s: float
    duty_cycle: float | None      # measured_run_s / wall_s (None for a check of no time)
    restarts: int                 # worker restarts (both sides at once)
    restart_wall_s: float         # what the restarts took


@dataclass
class CheckNotes:
    duty: dict[str, Any] = field(default_factory=dict)          # side -> its record's duty section
    check_duty: CheckDuty | None = None
    worker_restarts: dict[str, int] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)   # side -> worker generations
    restart_s: float | None = None                              # the suite's restart_s
    builds: dict[str, dict[str, Any]] = field(default_factory=dict)   # side -> its build (ci.build)
    environment: list[EnvDifference] = field(default_factory=list)    # what differs between sides
    environment_compared: Any = None                            # envdiff.compared: what was compared
    contention: SidesContention | None = None

    def to_dict(self) -> dict[str, Any]:
        """For JSON: the contention as its own summary form."""
        d = asdict(self)
        d["contention"] = self.contention.to_dict() if self.contention else None
        return d
