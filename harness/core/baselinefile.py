"""The baselines file's shape (harness.collect.baselines reads and writes it; harness.core.schema
publishes its JSON Schema): each arm's own output on a host, keyed by identity key
(harness.analyze.identity), the reference for byte identity. Unknown fields are ignored."""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class BaselineOutput(msgspec.Struct, kw_only=True):
    """One arm's own output on this host as a baseline session recorded it: an entry's reference,
    or an older one its history keeps. Every field is written, null where unknown."""
    pairing: str | None = None
    arm: str | None = None
    prompt: str | None = None
    max_tokens: int | None = None
    temp: float | None = None
    seed: int | None = None
    token_ids: list[int]
    text: str | None = None
    text_sha256: str | None = None
    recorded: str | None = None
    session_id: str | None = None
    engine: dict[str, Any] = {}       # the run's engine_info (EngineInfo's fields), as the file has it
    label: str | None = None
    target: str | None = None
    drafter: str | None = None


class BaselineEntry(BaselineOutput, kw_only=True):
    """One arm's own output on this host, the reference for byte identity (harness.analyze.identity),
    with the baselines it replaced (`harness baseline record --update`), oldest first."""
    history: list[BaselineOutput] = []

    def output(self) -> BaselineOutput:
        """This entry as an older baseline (its history left behind)."""
        return msgspec.convert(msgspec.to_builtins(self), BaselineOutput)


class Baselines(msgspec.Struct, kw_only=True):
    schema_version: Literal[1]
    kind: Literal["harness.baselines"]
    entries: dict[str, BaselineEntry]
