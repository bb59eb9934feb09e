"""What a suite is once validated: settings, pairings, arms, prompts and the engines they use."""

from __future__ import annotations

import importlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness.core import declare
from harness.core.declare import EngineDecl, default_engine

EMBEDDED = "embedded"
# Placeholders a command arm's argv may use; anything else is a typo caught at load time.
COMMAND_PLACEHOLDERS = (
    "prompt_file", "prompt", "max_tokens", "block", "num_draft", "model", "draft_model",
    "temp", "seed", "python", "ignore_eos", "tree",
)
DEFAULT_SUITE = Path(__file__).resolve().parents[2] / "suites" / "default.toml"


@dataclass(frozen=True)
class QuietSettings:
    enabled: bool = True
    threshold_pct: float = 15.0
    # None (unset): sized to each run's expected length (host/quiet.py, gate_limits).
    settle_s: float | None = None
    timeout_s: float | None = None


@dataclass(frozen=True)
class WatchSettings:
    # Contention watch during a run: a sample is contended when a foreign process is above
    # threshold_pct; the run is marked when the contended fraction passes contention_threshold.
    enabled: bool = True
    threshold_pct: float = 15.0
    interval_s: float = 0.25   # the most between two samples (host/quiet.py, watch_interval)
    # Past this share of a side's runs contended, the check says so first and gives no clean
    # verdict (harness.analyze.contended, CONTENDED_SHARE says why 0.25).
    contended_share: float = 0.25


@dataclass(frozen=True)
class Settings:
    max_tokens: int = 128
    temp: float = 0.0
    seed: int = 0
    repetitions: int = 5
    warmups: int = 1
    # The cooldown before a measured run is clamp(cooldown_ratio x the previous run's wall_s,
    # cooldown_s, cooldown_cap_s): cooldown_s is the floor; ratio 0 (the default) keeps it fixed.
    cooldown_s: float = 10.0
    # "suite" (a number in the file), "host" (to be replaced by the host profile's cooldown
    # rule, floor, ratio and cap, before planning), or where a resolved value came from.
    cooldown_source: str = "suite"
    cooldown_ratio: float = 0.0
    cooldown_cap_s: float | None = None      # None: no cap
    ignore_eos: bool = True
    quiet: QuietSettings = field(default_factory=QuietSettings)
    watch: WatchSettings = field(default_factory=WatchSettings)
    spread_threshold: float = 0.04
    contention_threshold: float = 0.20
    # Inherited env vars with these prefixes are overrides in force, besides the prefixes each
    # arm's engine declares (none by default: a command engine declares its own).
    override_prefixes: tuple[str, ...] = ()
    # Exact names under those prefixes that do not change a shipping decision.
    override_ignore: tuple[str, ...] = ()
    # After the runs, time the target forward at T = 1, 2, 3, 4, 8 (an engine with a scaling tool).
    scaling: bool = False
    # For the time-budget feature (parsed, validated and recorded here; used elsewhere):
    budget_s: float | None = None            # session time budget in seconds; None: no budget
    max_repetitions: int | None = None       # most repetitions a budgeted session may add (>= repetitions)
    threshold: float = 0.10                  # relative change to detect, in (0, 1)
    # Per figure (harness.core.figures ids), in place of `threshold` for that figure: the nightly's
    # change points and alerts use them (a phase's id is "phase_ms_per_round").
    thresholds: dict[str, float] = field(default_factory=dict)
    alpha: float = 0.05                      # significance level, in (0, 0.5]
    looks: int = 4                           # interim looks at the data, >= 1
    # Time the dispatch probe (harness.collect.host.probe) after every run, and let the paired
    # verdict subtract what it predicts of a pair's ratio (docs/statistics.md).
    dispatch_probe: bool = False
    # Two commits compared run by run (compare-commits, pr-check): restart both sides' worker
    # processes once they have served this many seconds (at the next round, then a warm-up round
    # on each side), so that a per-process effect varies between the pairs' generations and the
    # verdict's interval counts it (harness.analyze.estimators.generations). None: never.
    restart_s: float | None = None


@dataclass(frozen=True)
class Pairing:
    name: str
    target: str          # "embedded", "embedded:NAME" or an absolute model directory
    drafter: str | None  # "embedded", "embedded:NAME", an absolute directory, or None (classic only)

    def target_dir(self) -> Path:
        return model_dir(self.target, "target")

    def drafter_dir(self) -> Path | None:
        return None if self.drafter is None else model_dir(self.drafter, "drafter")


@dataclass(frozen=True)
class Arm:
    name: str
    pairing: str
    engine: str = ""                    # resolved at load: the arm's, else the default engine
    block: int = 1                      # 1 = classic (target alone); K > 1 drafts K-1 tokens
    env: dict[str, str] = field(default_factory=dict)
    command: tuple[str, ...] | None = None
    timeout_s: float = 600.0
    tok_s_regex: str | None = None
    # Resolved from the engine's declaration: which adapter runs it, and the override prefixes
    # (the suite's plus the engine's) under which an inherited variable is an override.
    adapter: str = "command"
    override_prefixes: tuple[str, ...] = ()
    # The engine's text parser (harness.collect.textparse.TextParser), when it declares one.
    parser: Any = field(default=None, compare=False)

    @property
    def classic(self) -> bool:
        return self.block == 1


@dataclass(frozen=True)
class Prompt:
    name: str
    category: str | None
    text: str


@dataclass(frozen=True)
class Suite:
    name: str
    path: str
    sha256: str
    settings: Settings
    pairings: tuple[Pairing, ...]
    arms: tuple[Arm, ...]
    prompts: tuple[Prompt, ...]
    engines: dict[str, EngineDecl] = field(default_factory=dict)   # every engine an arm runs

    def engine(self, arm: Arm) -> EngineDecl:
        return self.engines[arm.engine]

    def pairing(self, name: str) -> Pairing:
        return next(p for p in self.pairings if p.name == name)

    def arm(self, name: str) -> Arm:
        return next(a for a in self.arms if a.name == name)

    def prompt(self, name: str) -> Prompt:
        return next(p for p in self.prompts if p.name == name)

    def to_dict(self) -> dict[str, Any]:
        """The record's "suite" section (docs/architecture.md)."""
        s = asdict(self.settings)
        # Every prefix any arm uses, so readers of the settings alone (asv labels) see them all.
        s["override_prefixes"] = list(dict.fromkeys(p for a in self.arms for p in a.override_prefixes)) \
            or list(self.settings.override_prefixes)
        s["override_ignore"] = list(self.settings.override_ignore)
        arms = []
        for a in self.arms:
            d: dict[str, Any] = {"name": a.name, "pairing": a.pairing, "engine": a.engine,
                                 "block": a.block, "env": dict(a.env), "timeout_s": a.timeout_s}
            if a.command is not None:
                d["command"] = list(a.command)
            if a.tok_s_regex is not None:
                d["tok_s_regex"] = a.tok_s_regex
            arms.append(d)
        return {
            "name": self.name, "path": self.path, "sha256": self.sha256, "settings": s,
            "pairings": [asdict(p) for p in self.pairings],
            "arms": arms,
            "prompts": [asdict(p) for p in self.prompts],
            "engines": {n: d.to_dict() for n, d in self.engines.items()},
        }


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
    return importlib.import_module(declare.builtin_modules()[default_engine()]).embedded_dir(which)
