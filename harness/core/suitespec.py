"""What a suite is: settings, pairings, arms and prompts, one typed shape for the suite file
(`harness.collect.suite` decodes the TOML into it) and for the record's `suite` section
(`harness.core.schema.SuiteSection`), so both are checked by the same constraints.

Field ranges and enums are msgspec constraints; a rule between fields (a pairing an arm names,
two arms with one name, a cap below its floor) is a function of `harness.collect.suite.validate`.
Unknown fields are refused: a typo in a suite file is an error, never a silently ignored key,
and every record the harness writes holds only these fields.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Annotated

import msgspec
from msgspec import Meta

from harness.core import declare

EMBEDDED = "embedded"

Name = Annotated[str, Meta(min_length=1)]
Count = Annotated[int, Meta(ge=1)]
NonNegative = Annotated[float, Meta(ge=0)]
Positive = Annotated[float, Meta(gt=0)]
Percent = Annotated[float, Meta(ge=0, le=100)]
Share = Annotated[float, Meta(ge=0, le=1)]
Fraction = Annotated[float, Meta(gt=0, lt=1)]           # a relative change, in (0, 1)


class _Spec(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A part of a suite: immutable, unknown fields refused."""


class QuietSettings(_Spec, frozen=True, kw_only=True):
    enabled: bool = True
    threshold_pct: Percent = 15.0
    # None (unset): sized to each run's expected length (host/quiet.py, wait_limits).
    settle_s: NonNegative | None = None
    timeout_s: NonNegative | None = None


class WatchSettings(_Spec, frozen=True, kw_only=True):
    # Contention watch during a run: a sample is contended when a foreign process is above
    # threshold_pct; the run is marked when the contended fraction passes contention_threshold.
    enabled: bool = True
    threshold_pct: Percent = 15.0
    interval_s: Positive = 0.25   # the most between two samples (host/quiet.py, watch_interval)
    # Past this share of a side's runs contended, the check says so first and gives no clean
    # verdict (harness.analyze.contended, CONTENDED_SHARE says why 0.25).
    contended_share: Share = 0.25


class Settings(_Spec, frozen=True, kw_only=True):
    max_tokens: Count = 128
    temp: NonNegative = 0.0
    # Engines seed an unsigned 64-bit generator (MLX, NumPy): below 2**64 (validate.py).
    seed: Annotated[int, Meta(ge=0)] = 0
    repetitions: Count = 5
    warmups: Annotated[int, Meta(ge=0)] = 1
    # The cooldown before a measured run is clamp(cooldown_ratio x the previous run's wall_s,
    # cooldown_s, cooldown_cap_s): cooldown_s is the floor; ratio 0 (the default) keeps it fixed.
    # A suite file may say cooldown_s = "host": cooldown_source "host" (validate.py).
    cooldown_s: NonNegative = 10.0
    # "suite" (a number in the file), "host" (to be replaced by the host spec's cooldown
    # rule, floor, ratio and cap, before planning), or where a resolved value came from.
    cooldown_source: Name = "suite"
    cooldown_ratio: NonNegative = 0.0
    cooldown_cap_s: NonNegative | None = None      # None: no cap
    ignore_eos: bool = True
    quiet: QuietSettings = QuietSettings()
    watch: WatchSettings = WatchSettings()
    spread_threshold: Positive = 0.04
    contention_threshold: Share = 0.20
    # Inherited env vars with these prefixes are overrides in force, besides the prefixes each
    # arm's engine declares (none by default: a command engine declares its own).
    override_prefixes: tuple[str, ...] = ()
    # Exact names under those prefixes that do not change a shipping decision.
    override_ignore: tuple[str, ...] = ()
    # After the runs, time the target forward at T = 1, 2, 3, 4, 8 (an engine with a scaling tool).
    scaling: bool = False
    # For the time-budget feature (parsed, validated and recorded here; used elsewhere):
    budget_s: Positive | None = None            # session time budget in seconds; None: no budget
    max_repetitions: int | None = None          # most repetitions a budgeted session may add (>= repetitions)
    threshold: Fraction = 0.10                  # relative change to detect, in (0, 1)
    # Per figure (harness.core.figures ids), in place of `threshold` for that figure: the nightly's
    # change points and alerts use them (a phase's id is "phase_ms_per_round").
    thresholds: dict[str, Fraction] = {}
    alpha: Annotated[float, Meta(gt=0, le=0.5)] = 0.05   # significance level, in (0, 0.5]
    looks: Count = 4                            # interim looks at the data, >= 1
    # Time the dispatch measurement (harness.collect.host.dispatch) after every run, and let the paired
    # verdict subtract what it predicts of a pair's ratio (docs/statistics.md).
    dispatch_measurement: bool = False
    # Two commits compared run by run (compare-commits, pr-check): restart both sides' worker
    # processes once they have served this many seconds (at the next round, then a warm-up round
    # on each side), so that a per-process effect varies between the pairs' generations and the
    # verdict's interval counts it (harness.analyze.estimators.generations). None: never.
    restart_s: Positive | None = None


class Pairing(_Spec, frozen=True, kw_only=True):
    name: Name
    target: Name                # "embedded", "embedded:NAME" or an absolute model directory
    drafter: Name | None = None  # "embedded", "embedded:NAME", an absolute directory, or None (classic only)

    def target_dir(self) -> Path:
        return model_dir(self.target, "target")

    def drafter_dir(self) -> Path | None:
        return None if self.drafter is None else model_dir(self.drafter, "drafter")


class Arm(_Spec, frozen=True, kw_only=True):
    name: Name
    pairing: str = ""               # the file may leave it out when the suite has one pairing
    engine: str = ""                # the file may leave it out: the default engine
    block: Count = 1                # 1 = classic (target alone); K > 1 drafts K-1 tokens
    env: dict[str, str] = {}        # a file's integer values become strings (validate.py)
    timeout_s: Positive = 600.0     # a file without it takes its engine's default
    command: tuple[str, ...] | None = None
    tok_s_regex: Name | None = None

    @property
    def classic(self) -> bool:
        return self.block == 1


class Prompt(_Spec, frozen=True, kw_only=True):
    """One prompt as the session ran it (a [[prompts]] table of a built-in category is many)."""
    name: Name
    category: str | None = None
    text: str


def embedded_which(value: str | None, role: str) -> str | None:
    """The embedded model a suite value names: "embedded" is the role's own ("target",
    "drafter"), "embedded:NAME" the default engine's embedded model NAME (say an MTP head);
    None for a directory."""
    if value == EMBEDDED:
        return role
    if value and value.startswith(EMBEDDED + ":"):
        return value.split(":", 1)[1]
    return None


def model_dir(value: str, role: str) -> Path:
    which = embedded_which(value, role)
    return embedded_dir(which) if which else Path(value)


def embedded_dir(which: str) -> Path:
    """The default engine's embedded model directory, found without loading MLX."""
    module = importlib.import_module(declare.builtin_modules()[declare.default_engine()])
    return Path(module.embedded_dir(which))
