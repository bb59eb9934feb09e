"""The baselines file: each arm's own earlier output, read and written here (the comparison
and what a baseline session stores are harness.analyze.identity's, pure).

Baselines file (default `baselines/<host>.json`, <host> = the host spec's name, or
"local" when no host spec matches):

    {"schema_version": 1, "kind": "harness.baselines",
     "entries": {key: {"pairing", "arm", "prompt", "max_tokens", "temp", "seed",
                       "token_ids", "text", "text_sha256", "recorded", "session_id",
                       "engine", "target", "drafter", "history": [older entries]}}}
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

import msgspec

from harness.collect.files import read_json, write_json_atomic
from harness.core import schema
from harness.core.baselinefile import BaselineEntry, Baselines

KIND: Final = "harness.baselines"
SCHEMA_VERSION: Final = 1


@dataclass
class BaselineStore:
    """One baselines file in memory: `entries` by identity key (harness.analyze.identity)."""

    path: Path
    entries: dict[str, BaselineEntry] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> BaselineStore:
        p = Path(path)
        if not p.exists():
            return cls(p, {})
        data = read_json(p, KIND, SCHEMA_VERSION)
        # The shape too, before any run: a wrong entry is one line naming it, not a crash mid-session.
        schema.check(data, Baselines, str(p))
        return cls(p, msgspec.convert(data, Baselines).entries)

    def get(self, key: str) -> BaselineEntry | None:
        return self.entries.get(key)

    def put(self, key: str, entry: BaselineEntry) -> None:
        self.entries[key] = entry

    def save(self) -> None:
        write_json_atomic(self.path, msgspec.to_builtins(Baselines(
            schema_version=SCHEMA_VERSION, kind=KIND, entries=dict(sorted(self.entries.items())))))
