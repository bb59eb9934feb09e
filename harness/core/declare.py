"""What an engine declares about itself, so the harness assumes nothing engine-specific.

A declaration names the engine's round phases (an open list, in round order), its override
variables with what each does, the prefixes under which an inherited variable counts as an
override, its profile-mode variable, its built-in prompts, which library decides its device
numerics, its own tools the report may point to, and which of its phases play the roles the
analyses read (the drafting phase, the target's verify phase). Built-in adapters declare theirs in code
(harness/collect/adapters/); a command engine declares its own in the suite's `[engines.NAME]` table.
The record keeps every declaration (suite.engines), so reports read them, not this module.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec

ADAPTER_PACKAGE = "harness.collect.adapters"

# The phase roles analyses read, and what each means. A role the engine does not declare is a
# figure the report leaves out (the drafter step, the cost model's what-if), never a guess.
ROLE_DRAFT = "draft"
ROLE_VERIFY = "verify"
ROLES = {ROLE_DRAFT: "the phase that runs the round's drafter forwards",
         ROLE_VERIFY: "the target's verify forward over the round's positions"}


@dataclass(frozen=True)
class EngineDecl:
    name: str
    adapter: str = "command"
    phases: tuple[str, ...] = ()               # known phases in round order; others come after, kept
    phase_labels: dict[str, str] = field(default_factory=dict)   # "{block}" is the arm's block
    # Role (ROLES) -> the declared phase that plays it, e.g. {"draft": "draft_block"}.
    roles: dict[str, str] = field(default_factory=dict)
    # The engine's own work counters (harness.core.counters: the standard ones need no
    # declaration), name -> what it counts, in the order the report lists them.
    counters: dict[str, str] = field(default_factory=dict)
    overrides: dict[str, str] = field(default_factory=dict)      # variable -> what it does
    override_prefixes: tuple[str, ...] = ()
    profile_var: str | None = None             # set: the engine syncs per phase (slows itself)
    numerics: str = "unknown"                  # the library deciding device numerics
    tools: dict[str, str] = field(default_factory=dict)          # e.g. {"scaling": "<command>"}
    # What a round split means in each timing mode ("default", "profile"), said under the split.
    split_notes: dict[str, str] = field(default_factory=dict)
    # The argv (and its time limit) an arm of this engine runs when the arm gives none.
    command: tuple[str, ...] | None = None
    timeout_s: float | None = None
    # How to read an engine that prints text (`[engines.NAME.parse]`, as declared), and that table
    # compiled when the suite is read (harness.collect.textparse.TextParser).
    parse: dict[str, Any] | None = None
    parser: Any = field(default=None, compare=False)
    prompts: dict[str, tuple[tuple[str, str], ...]] = field(default_factory=dict)
    # A loader for prompts kept in the engine's own package (imported only when used).
    prompt_loader: Callable[[str], list[tuple[str, str]]] | None = field(default=None, compare=False)
    # Runs in a process that will host this engine in-process, before anything loads MLX (a
    # BLAS preload, say); returns what it did, for the record. Never run for another process.
    prepare_process: Callable[[], Any] | None = field(default=None, compare=False)
    # The engine an arm without `engine` runs (suites written before engines were declared).
    default_for_undeclared_arms: bool = field(default=False, compare=False)
    # How a commit's exported tree is built before its runs (argv run in the tree; empty: not
    # built), and whether the command reads the commit's code from the tree as it runs (an
    # interpreter; None: only when the command starts with {python}). harness/ci/build.py.
    build: tuple[str, ...] = ()
    interpreted: bool | None = None

    def builtin_prompts(self, category: str) -> list[tuple[str, str]]:
        """(name, text) pairs of a built-in category; KeyError/ValueError when it has none."""
        if category in self.prompts:
            return list(self.prompts[category])
        if self.prompt_loader is not None:
            return self.prompt_loader(category)
        raise KeyError(f"engine {self.name!r} has no built-in prompt category {category!r}"
                       + (f" (has: {', '.join(self.prompts)})" if self.prompts else ""))

    def phase_for(self, role: str) -> str | None:
        """The phase that plays a role (ROLES), None when the engine declares none."""
        return self.roles.get(role)

    def phase_label(self, phase: str, block: int | str) -> str:
        return self.phase_labels.get(phase, phase).replace("{block}", str(block))

    def to_dict(self) -> dict[str, Any]:
        """The record's suite.engines[name] (prompts are in the suite's own prompts)."""
        d: dict[str, Any] = msgspec.to_builtins(Declared(
            name=self.name, adapter=self.adapter, phases=list(self.phases), phase_labels=self.phase_labels,
            overrides=self.overrides, override_prefixes=list(self.override_prefixes),
            profile_var=self.profile_var, numerics=self.numerics, tools=self.tools,
            split_notes=self.split_notes, roles=self.roles or None, counters=self.counters or None,
            build=list(self.build) or None, interpreted=self.interpreted,
            command=None if self.command is None else list(self.command), timeout_s=self.timeout_s,
            parse=self.parse))
        return {k: v for k, v in d.items() if v is not None or k in ALWAYS_WRITTEN}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EngineDecl:
        return cls.from_declared(msgspec.convert(d, Declared))

    @classmethod
    def from_declared(cls, r: Declared) -> EngineDecl:
        return cls(name=r.name, adapter=r.adapter, phases=tuple(r.phases), phase_labels=r.phase_labels,
                   roles=r.roles or {}, counters=r.counters or {}, overrides=r.overrides,
                   override_prefixes=tuple(r.override_prefixes), profile_var=r.profile_var,
                   numerics=r.numerics or "unknown", tools=r.tools, split_notes=r.split_notes,
                   build=tuple(r.build or ()), interpreted=r.interpreted,
                   command=None if r.command is None else tuple(r.command), timeout_s=r.timeout_s,
                   parse=r.parse)


class Declared(msgspec.Struct, kw_only=True):
    """A declaration as the record keeps it (suite.engines[name]): the fields up to split_notes
    always, the rest only when declared, so records of engines without them stay as they were."""
    name: str = "?"
    adapter: str = "command"
    phases: list[str] = []
    phase_labels: dict[str, str] = {}
    overrides: dict[str, str] = {}
    override_prefixes: list[str] = []
    profile_var: str | None = None
    numerics: str | None = "unknown"
    tools: dict[str, str] = {}
    split_notes: dict[str, str] = {}
    roles: dict[str, str] | None = None
    counters: dict[str, str] | None = None
    build: list[str] | None = None
    interpreted: bool | None = None
    command: list[str] | None = None
    timeout_s: float | None = None
    parse: dict[str, Any] | None = None


ALWAYS_WRITTEN = {f.name for f in msgspec.structs.fields(Declared)[:10]}


# A command engine that declares nothing: no phases, no prefixes, no profile mode.
COMMAND = EngineDecl(name="command", adapter="command")


@functools.cache
def builtin_modules() -> dict[str, str]:
    """Built-in engine name -> the module that declares it and holds its adapter: every module
    of harness/collect/adapters/ (an engine named "mlx-lm" lives in mlx_lm.py). Listed, not written
    here, so this module names no engine."""
    pkg = importlib.import_module(ADAPTER_PACKAGE)
    return {m.name.replace("_", "-"): f"{ADAPTER_PACKAGE}.{m.name}"
            for m in pkgutil.iter_modules(pkg.__path__) if not m.name.startswith("_")}


def adapters() -> tuple[str, ...]:
    return (*builtin_modules(), "command")


def builtin(name: str) -> EngineDecl | None:
    """A built-in engine's declaration (None for an unknown name); imports no engine."""
    if name == "command":
        return COMMAND
    mod = builtin_modules().get(name)
    return None if mod is None else importlib.import_module(mod).DECLARATION


@functools.cache
def default_engine() -> str:
    """The engine an arm without `engine` runs: the built-in that declares itself the default
    for suites written before engines were declared ("command" when none does)."""
    return next((n for n in builtin_modules() if getattr(builtin(n), "default_for_undeclared_arms", False)),
                "command")


def prepare_process(decls: Any) -> dict[str, Any]:
    """Each in-process engine's process preparation, before anything loads MLX; what each did."""
    return {d.name: d.prepare_process() for d in decls if d.prepare_process is not None}


def v1_declaration(name: str) -> EngineDecl:
    """How schema_version 1 read an engine: the default engine's phases, profile variable and
    prefixes for every engine (so a v1 record renders as it did)."""
    spec = builtin(default_engine())
    assert spec is not None
    own = builtin(name)
    if own is not None and own.adapter != "command":
        return own
    return EngineDecl(name=name, adapter="command", phases=spec.phases, phase_labels=spec.phase_labels,
                      roles=dict(spec.roles),
                      overrides=spec.overrides, override_prefixes=spec.override_prefixes,
                      profile_var=spec.profile_var, numerics="unknown", tools=spec.tools,
                      split_notes=spec.split_notes)


class _ArmEngine(msgspec.Struct, kw_only=True):
    """What of_record reads of a record's arm (core.recordsections.RecordArm's fields)."""
    name: str
    engine: str | None = None


class _SuiteEngines(msgspec.Struct, kw_only=True):
    """What of_record reads of a record's suite: its arms' engines and the declarations."""
    arms: list[_ArmEngine] = []
    engines: dict[str, dict[str, Any]] | None = None


class _RecordEngines(msgspec.Struct, kw_only=True):
    suite: _SuiteEngines


def of_record(record: object, arm: str) -> EngineDecl:
    """The declaration of the engine an arm of a (migrated) record ran; `record`: a record's dict
    or the typed core.schema.Record (read by attribute)."""
    suite = msgspec.convert(record, _RecordEngines, from_attributes=True).suite
    a = next((x for x in suite.arms if x.name == arm), None)
    name = a.engine if a is not None and a.engine is not None else default_engine()
    d = (suite.engines or {}).get(name)
    if d is not None:
        decl = msgspec.convert(d, Declared)
        return _with_builtin_roles(EngineDecl.from_declared(decl), decl.roles is not None)
    return builtin(name) or EngineDecl(name=name)


def _with_builtin_roles(decl: EngineDecl, stated: bool) -> EngineDecl:
    """A built-in engine recorded before declarations stated roles: its own adapter's roles, for
    the phases the record declares (so such a record reads as it did). Command engines state
    their own or have none."""
    if stated or decl.adapter == "command":
        return decl
    own = builtin(decl.name)
    if own is None or own.adapter != decl.adapter:
        return decl
    roles = {r: p for r, p in own.roles.items() if p in decl.phases}
    return dataclasses.replace(decl, roles=roles) if roles else decl


def roles_problem(roles: Any, phases: tuple[str, ...]) -> tuple[str, str] | None:
    """What is wrong with declared roles, as (the role's key, what), or None: roles are a table
    of known role -> one of the declared phases, each phase in one role at most."""
    if not isinstance(roles, dict):
        return "", f"a table of role = phase (roles: {', '.join(ROLES)}), got {type(roles).__name__}"
    for role, phase in roles.items():
        if role not in ROLES:
            return str(role), f"unknown role {role!r} (roles: {', '.join(ROLES)})"
        if not isinstance(phase, str) or phase not in phases:
            return str(role), (f"{phase!r} is not a declared phase (phases: {', '.join(phases) or 'none'}); "
                               "declare it in `phases` first")
    if len(set(roles.values())) != len(roles):
        return "", "one phase plays two roles"
    return None
