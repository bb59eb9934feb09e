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
# The record's fields of an arm, in the order the record has always written them.
_ARM_RECORD = ("name", "pairing", "engine", "block", "env", "timeout_s")


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
        s = _plain(self.settings)
        # Every prefix any arm uses, so readers of the settings alone (asv labels) see them all.
        s["override_prefixes"] = list(dict.fromkeys(p for a in self.arms for p in a.override_prefixes)) \
            or list(self.settings.override_prefixes)
        arms = []
        for a in self.arms:
            d: dict[str, Any] = {k: _plain(getattr(a, k)) for k in _ARM_RECORD}
            if a.command is not None:
                d["command"] = list(a.command)
            if a.tok_s_regex is not None:
                d["tok_s_regex"] = a.tok_s_regex
            arms.append(d)
        return {
            "name": self.name, "path": self.path, "sha256": self.sha256, "settings": s,
            "pairings": [_plain(p) for p in self.pairings],
            "arms": arms,
            "prompts": [_plain(p) for p in self.prompts],
            "engines": {n: d.to_dict() for n, d in self.engines.items()},
        }


def _plain(obj: Any) -> Any:
    """JSON's own types (lists, not tuples), as the record holds them once read back."""
    return msgspec.json.decode(msgspec.json.encode(obj))
