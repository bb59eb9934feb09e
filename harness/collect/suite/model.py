"""What a suite is once validated: settings, pairings, arms, prompts and the engines they use.

The parts are the typed shapes of `harness.core.suitespec`, shared with the record's suite
section; an arm here also carries what load resolved from its engine's declaration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from harness.core import suitespec
from harness.core.declare import EngineDecl
from harness.core.suitespec import (
    EMBEDDED,
    Pairing,
    Prompt,
    QuietSettings,
    Settings,
    WatchSettings,
    embedded_dir,
    embedded_which,
    model_dir,
)

__all__ = ["COMMAND_PLACEHOLDERS", "DEFAULT_SUITE", "EMBEDDED", "Arm", "Pairing", "Prompt", "QuietSettings",
           "Settings", "Suite", "WatchSettings", "embedded_dir", "embedded_which", "model_dir"]

# Placeholders a command arm's argv may use; anything else is a typo caught at load time.
COMMAND_PLACEHOLDERS = (
    "prompt_file", "prompt", "max_tokens", "block", "num_draft", "model", "draft_model",
    "temp", "seed", "python", "ignore_eos", "tree",
)
DEFAULT_SUITE = Path(__file__).resolve().parents[2] / "suites" / "default.toml"


class Arm(suitespec.Arm, frozen=True, kw_only=True):
    """An arm as the suite file and the record give it, with what its engine's declaration
    resolves (never recorded: a resumed session resolves it again)."""
    adapter: str = "command"                # which adapter runs it
    # The suite's prefixes and the engine's: an inherited variable under one is an override.
    override_prefixes: tuple[str, ...] = ()
    # The engine's text parser (harness.collect.textparse.TextParser), when it declares one.
    parser: Any = None


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
        """The record's "suite" section (docs/architecture.md; its type: schema.SuiteSection)."""
        # Every prefix any arm uses, so readers of the settings alone (asv labels) see them all.
        prefixes = tuple(dict.fromkeys(p for a in self.arms for p in a.override_prefixes)) \
            or self.settings.override_prefixes
        return {
            "name": self.name, "path": self.path, "sha256": self.sha256,
            "settings": _plain(msgspec.structs.replace(self.settings, override_prefixes=prefixes)),
            "pairings": [_plain(p) for p in self.pairings],
            "arms": [_plain(_RecordArm(name=a.name, pairing=a.pairing, engine=a.engine, block=a.block,
                                       env=a.env, timeout_s=a.timeout_s, command=a.command,
                                       tok_s_regex=a.tok_s_regex)) for a in self.arms],
            "prompts": [_plain(p) for p in self.prompts],
            "engines": {n: d.to_dict() for n, d in self.engines.items()},
        }


class _RecordArm(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An arm as the record writes it, in the order it always has: command and tok_s_regex
    only when set."""
    name: str
    pairing: str
    engine: str
    block: int
    env: dict[str, str]
    timeout_s: float
    command: tuple[str, ...] | None = None
    tok_s_regex: str | None = None


def _plain(obj: Any) -> Any:
    """JSON's own types (lists, not tuples), as the record holds them once read back."""
    return msgspec.json.decode(msgspec.json.encode(obj))
