"""The sections of a record the session writes beside its runs: resumes, the duty, the paired
sequential check's summary, the scaling measurement, and a compare-commits side's own.

Each is written whole by one producer (the analyses' `to_dict`, the record's finish(), the
engine's scaling measurement) with every field every time, a null included, so these Structs
encode every field (no omit_defaults): a record written through them has the keys the producer's
dict had, in its order. A default only fills a field a record from before it lacks.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, UnsetType


class _W(msgspec.Struct, kw_only=True):
    """A section the harness writes whole, every field each time (a field at its default, None
    included, is written too, as the dict it replaced was). Defaults only fill what a record from
    before a field lacks; unknown fields are ignored."""


class Resume(_W, kw_only=True):
    """One `harness run --resume` of the session: when, its command line, the host it ran on."""
    at: str
    command: list[str] = []
    host: dict[str, Any] = {}


class Duty(_W, kw_only=True):
    """How the session's wall time was spent (harness.collect.record.duty_cycle), written by finish()."""
    session_wall_s: float
    run_s: float                      # every run's wall_s, warm-ups and failures too
    measured_run_s: float             # measured runs' wall_s
    duty_cycle: float | None          # measured_run_s / session_wall_s; None without wall time
    waiting_s: float                  # cooldowns, quiet waits and thermal waits
    runs: int


class SequentialDesign(_W, kw_only=True):
    """The design a sequential check was judged at (harness.analyze.design.Design.to_dict): at the
    look it stopped at, with its derived levels."""
    threshold: float
    alpha: float
    looks: int
    figures: int
    power: float
    floor: float | None = None
    selected: int = 1
    look: int | None = None           # the look it stopped at (absent before 2026-12-05)
    # Each look's budget share and rounds (since 2026-12-06; before: looks planned evenly).
    times: list[float] = []
    sizes: list[float] = []
    look_share: float | None = None   # this look's level as a share of one figure's (absent in older records)
    alpha_per_test: float
    min_effect: float


class LookFigure(_W, kw_only=True):
    """One figure's paired reading at a look (harness.analyze.paired.Paired.to_dict): head / base."""
    n: int
    ratio: float | None
    lo: float | None
    hi: float | None
    detectable: float | None
    verdict: str                      # worse | improved | unchanged | inconclusive
    note: str = ""
    sd_log: float | None = None
    # The fields below were added over time; a record from before one reads its default.
    inflation: float = 1.0
    autocorr: float | None = None
    location: str = "mean"            # "mean" (ratio: geometric mean) or "huber"
    mean_ratio: float | None = None
    spread: float | None = None
    # The dispatch measurement's adjustment: {"n", "probe_ratio", "used", "why"?, "probe_p"?,
    # "theta"?, "corr"?, "variance_removed"?, "widen"?}; None without one.
    dispatch_measurement: dict[str, Any] | None = None
    # The worker generations' test: {"count", "used", "p"?, "se_ratio"?}; None: one worker a side.
    generations: dict[str, Any] | None = None
    df: int | None = None             # the interval's degrees of freedom (None: n - 1)
    threshold: float | None = None    # what the verdict was judged against
    # A clean reading set aside for contention: {"reading", "contended", "runs", "limit"}.
    contended: dict[str, Any] | None = None


class Look(_W, kw_only=True):
    """One look of a sequential check (harness.analyze.sequential.Look)."""
    index: int                        # 1-based
    rounds: int                       # rounds complete at this look
    elapsed_s: float
    time: float | None = None         # the budget share at this look (absent before 2026-12-06)
    figures: dict[str, LookFigure] = {}   # arm (or "arm figure") -> its reading
    resolved: bool                    # every worse/improved figure's detectable within its threshold


class Sequential(_W, kw_only=True):
    """A paired sequential check's summary (harness.analyze.sequential.Outcome.summary): a
    session's each speculative arm against classic, or a comparison's head against base."""
    design: SequentialDesign
    budget_s: float | None            # None: no budget (a fixed number of rounds)
    # A session's round bounds; a comparison's summary has none.
    min_repetitions: int | UnsetType = UNSET
    max_repetitions: int | UnsetType = UNSET
    rounds: int
    stopped: str                      # a key of harness.analyze.sequential.STOPS
    stopped_because: str
    looks: list[Look] = []
    round_s: list[float] = []


class ScalingWidth(_W, kw_only=True):
    """One width T of the verify-forward cost scaling: warm (a KV length run before) and cold."""
    T: int
    median_ms: float
    min_ms: float
    max_ms: float
    repeats: int
    cold_median_ms: float | None = None   # cold: absent in records before the cold measurement
    cold_min_ms: float | None = None
    cold_max_ms: float | None = None
    cold_vs_warm: float | None = None
    vs_T1: float


class DispatchFloor(_W, kw_only=True):
    """What a step costs before bandwidth: one trivial evaluated op, the host's time to issue one
    T=1 step (issue_ms, absent in older records), one decoder layer, the whole evaluated step."""
    layers: int | None = None
    repeats: int
    empty_ms: float
    step_ms: float
    issue_ms: float | None = None
    layer_ms: float | None = None


class Scaling(_W, kw_only=True):
    """Verify-forward cost scaling of the first pairing (suite `scaling = true`)."""
    context_tokens: int
    device: str
    widths: list[ScalingWidth]
    dispatch: DispatchFloor | None = None   # absent in records before the dispatch floor
    what: str | None = None
    pairing: str | None = None
    target: str | None = None


class PairedWith(_W, kw_only=True):
    """compare-commits: the two commits a side's record was paired with."""
    base: str
    head: str


class Build(_W, kw_only=True):
    """How a compare-commits side's tree was built (harness.ci.build.BuildInfo)."""
    commit: str
    tree: str
    argv: list[list[str]]
    wall_s: float
    cached: bool
    tail: list[str]


class Restart(_W, kw_only=True):
    """compare-commits: one restart of both sides' workers (suite `restart_s`)."""
    generation: int
    before_round: int
    warmup_wall_s: float
    wall_s: float


class Comparison(_W, kw_only=True):
    """compare-commits: the paired verdict over both sides, in each side's record."""
    headline: str
    exit_status: int
    sequential: Sequential


class BaselinesStored(_W, kw_only=True):
    """A baseline session stored its baselines: where, and when."""
    path: str
    at: str


class ModelFiles(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One model directory of a pairing as the session found it: its tensor table, or why not."""
    directory: str
    tensors: dict[str, tuple[int, list[int]]] | None = None   # {name: (bytes, shape)}
    sha256: str | None = None         # the weights' content (every shard), harness.collect.models
    error: str | None = None
