"""The suite file's tables that the record keeps in another form: a [[prompts]] table (one
prompt, or a built-in category of many) and an [engines.NAME] declaration (the record keeps the
`EngineDecl` it makes). Settings, pairings and arms are `harness.core.suitespec`'s own."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from harness.core.suitespec import Count, Name, Positive


class _Table(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A table of the suite file: unknown fields refused."""


class PromptTable(_Table, frozen=True, kw_only=True):
    """[[prompts]]: text or file (then a name), or a built-in category (optionally of one engine,
    its first `limit` prompts)."""
    name: Name | None = None
    category: Name | None = None
    text: Name | None = None
    file: Name | None = None
    limit: Count | None = None
    engine: Name | None = None


class EnginePrompt(_Table, frozen=True, kw_only=True):
    """One prompt of a declared engine's built-in category."""
    name: Name
    text: Name


class EngineTable(_Table, frozen=True, kw_only=True):
    """[engines.NAME]: what a command engine declares about itself (harness.core.declare)."""
    adapter: Literal["command"] = "command"
    phases: tuple[str, ...] = ()
    roles: dict[str, Name] = {}              # role -> one of the phases (harness.core.declare.ROLES)
    counters: dict[str, Name] = {}           # its own work counters, name -> what it counts
    phase_labels: dict[str, Name] = {}
    overrides: dict[str, Name] = {}
    override_prefixes: tuple[str, ...] = ()
    profile_var: Name | None = None
    split_notes: dict[str, Name] = {}
    numerics: Name = "unknown"
    tools: dict[str, Name] = {}
    prompts: dict[str, list[EnginePrompt]] = {}
    build: tuple[str, ...] | None = None     # an argv list (never a shell) run in each commit's tree
    interpreted: bool | None = None
    command: tuple[str, ...] | None = None   # the default argv of its arms
    timeout_s: Positive | None = None
    parse: Any = None                        # a text parse table (harness.collect.textparse)
