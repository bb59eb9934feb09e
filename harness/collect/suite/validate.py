"""The suite file's rules: the file decodes into the typed suite (`harness.core.suitespec`, field
by field, decode.py), then the rules between fields; every error one `UserError` line naming
the file and key, before anything runs."""

from __future__ import annotations

import re
import string
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import asdict, replace

from harness.collect import textparse
from harness.collect.suite import size
from harness.collect.suite.decode import fail, typed
from harness.collect.suite.model import (
    COMMAND_PLACEHOLDERS,
    Arm,
    Pairing,
    Prompt,
    Settings,
    Suite,
    embedded_dir,
    embedded_which,
)
from harness.collect.suite.tables import EngineTable, PromptTable
from harness.core import counters, declare, redact, suitespec
from harness.core.declare import EngineDecl, default_engine
from harness.core.figures import FIGURES

# The top level's parts besides the settings.
_PARTS = ("name", "description", "pairings", "arms", "prompts", "engines")


class _Parts(msgspec.Struct, kw_only=True):
    """The suite file's top-level parts besides the settings, each still as the file gives it:
    every part is checked on its own below, so that an error names its key."""
    name: Any = None
    description: Any = None
    pairings: Any = None
    arms: Any = None
    prompts: Any = None
    engines: Any = msgspec.field(default_factory=dict)


class _CooldownKeys(msgspec.Struct, kw_only=True):
    """The settings whose rules between them come before the settings are typed."""
    cooldown_s: Any = None
    cooldown_ratio: Any = None
    cooldown_cap_s: Any = None
    thresholds: Any = None


def build(data: dict[str, Any], source: str, base_dir: Path, sha256: str, default_name: str,
          path: str) -> Suite:
    settings_raw = {k: v for k, v in data.items() if k not in _PARTS}
    settings = _settings(source, settings_raw)
    parts = msgspec.convert(data, _Parts)
    declared = _engines(source, parts.engines, base_dir)
    pairings = _pairings(source, parts.pairings, base_dir)
    arms, engines = _arms(source, parts.arms, pairings, declared, settings)
    prompts = _prompts(source, parts.prompts, base_dir, engines)
    bad = size.absurd(settings, len(arms), len(prompts))   # counted, before any plan is built
    if bad is not None:
        raise fail(source, *bad)
    name = typed(default_name if parts.name is None else parts.name, suitespec.Name, source, "name")
    return Suite(name=name, path=path, sha256=sha256, settings=settings,
                 pairings=pairings, arms=arms, prompts=prompts, engines=engines)


# Settings renamed, their old names read for one release: (old, new).
RENAMED = (("dispatch_probe", "dispatch_measurement"),)


def _settings(src: str, d: dict[str, Any]) -> Settings:
    for old, new in RENAMED:
        if old in d:
            if new in d:
                raise fail(src, old, f"the old name of {new}, which is given too: drop {old}")
            d = {new if k == old else k: v for k, v in d.items()}
    given = msgspec.convert(d, _CooldownKeys)
    cooldown = given.cooldown_s
    if cooldown == "host":
        for key, value in (("cooldown_ratio", given.cooldown_ratio), ("cooldown_cap_s", given.cooldown_cap_s)):
            if value is not None:
                raise fail(src, key, "the host spec gives it when cooldown_s = \"host\"; "
                           "drop it or give cooldown_s in seconds")
        d = {k: v for k, v in d.items() if k != "cooldown_s"} | {"cooldown_source": "host"}
    elif isinstance(cooldown, str):
        raise fail(src, "cooldown_s", f"expected a number of seconds or \"host\", got {cooldown!r}")
    thresholds = given.thresholds
    for k in thresholds if isinstance(thresholds, dict) else ():
        if k not in FIGURES:
            raise fail(src, f"thresholds.{k}", f"unknown figure (known: {', '.join(FIGURES)})")
    s: Settings = typed(d, Settings, src, "", also_known=_PARTS)
    if s.seed >= 2 ** 64:   # engines seed an unsigned 64-bit generator
        raise fail(src, "seed", f"must be < 2**64, got {s.seed}")
    if s.max_repetitions is not None and s.max_repetitions < s.repetitions:
        raise fail(src, "max_repetitions", f"must be >= repetitions ({s.repetitions}), got {s.max_repetitions}")
    if s.cooldown_cap_s is not None and s.cooldown_cap_s < s.cooldown_s:
        raise fail(src, "cooldown_cap_s", f"must be >= cooldown_s ({s.cooldown_s:g}), got {s.cooldown_cap_s:g}")
    return s


def _engines(src: str, raw: Any, base_dir: Path) -> dict[str, EngineDecl]:
    """[engines.NAME] tables: what a command engine declares about itself."""
    for name in raw if isinstance(raw, dict) else ():
        if declare.builtin(name) is not None:
            raise fail(src, f"engines.{name}", f"{name!r} is a built-in engine that declares itself; pick another name")
    out: dict[str, EngineDecl] = {}
    for name, t in typed(raw, dict[str, EngineTable], src, "engines").items():
        k = f"engines.{name}"
        if len(set(t.phases)) != len(t.phases):
            raise fail(src, f"{k}.phases", "a phase is named twice")
        bad = declare.roles_problem(t.roles, t.phases)
        if bad is not None:
            raise fail(src, f"{k}.roles" + (f".{bad[0]}" if bad[0] else ""), bad[1])
        bad = counters.declared_problem(t.counters)
        if bad is not None:
            raise fail(src, f"{k}.counters" + (f".{bad[0]}" if bad[0] else ""), bad[1])
        if t.build == ():
            raise fail(src, f"{k}.build", "empty argv list (leave `build` out when nothing is built)")
        try:
            parser = None if t.parse is None else textparse.compile_spec(t.parse, base_dir, f"{k}.parse")
        except textparse.SpecError as e:
            raise fail(src, e.key, e.what) from None
        out[name] = EngineDecl(
            name=name, adapter=t.adapter, phases=t.phases, roles=t.roles, counters=t.counters,
            phase_labels=t.phase_labels,
            overrides=t.overrides, override_prefixes=t.override_prefixes, profile_var=t.profile_var,
            numerics=t.numerics, tools=t.tools, split_notes=t.split_notes, build=t.build or (),
            prompts={c: tuple((p.name, p.text) for p in ps) for c, ps in t.prompts.items()},
            command=None if t.command is None else _command(src, t.command, f"{k}.command"),
            timeout_s=t.timeout_s, parse=None if parser is None else parser.spec, parser=parser,
            interpreted=t.interpreted)
    return out


def _command(src: str, command: tuple[str, ...], key: str) -> tuple[str, ...]:
    """A command engine's argv: not empty, only known placeholders."""
    if not command:
        raise fail(src, key, "empty argv list")
    for part in command:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(part)]
        except ValueError as e:
            raise fail(src, key, f"bad placeholder in {part!r}: {e}") from None
        for fname in fields:
            if fname is not None and fname not in COMMAND_PLACEHOLDERS:
                raise fail(src, key, f"unknown placeholder {{{fname}}} (known: {', '.join(COMMAND_PLACEHOLDERS)})")
    return command


def _tables(src: str, raw: Any, key: str, typ: Any) -> list[Any]:
    """The [[key]] tables as typ, at least one."""
    if raw is None:
        raise fail(src, key, f"missing: the suite needs at least one [[{key}]] table")
    out: list[Any] = typed(raw, list[typ], src, key)
    if not out:
        raise fail(src, key, f"empty: the suite needs at least one [[{key}]] table")
    return out


def _unique(src: str, key: str, names: list[str]) -> None:
    for i, n in enumerate(names):
        if n in names[:i]:
            raise fail(src, f"{key}[{i}].name", f"two {key} are named {n!r}")


def _model_dir(src: str, s: str, key: str, base_dir: Path) -> str:
    which = embedded_which(s, key.rsplit(".", 1)[-1])
    if which:
        d = embedded_dir(which)
        if not d.is_dir():
            raise fail(src, key, f"the embedded {which} model is missing ({d} is not a directory)")
        return s
    d = Path(s).expanduser()
    d = d if d.is_absolute() else base_dir / d
    if not d.is_dir():
        raise fail(src, key, f"model directory not found: {d}")
    return str(d.resolve())


def _pairings(src: str, raw: Any, base_dir: Path) -> tuple[Pairing, ...]:
    got: list[Pairing] = _tables(src, raw, "pairings", Pairing)
    _unique(src, "pairings", [p.name for p in got])
    return tuple(replace(p, target=_model_dir(src, p.target, f"pairings[{i}].target", base_dir),
                         drafter=None if p.drafter is None else
                         _model_dir(src, p.drafter, f"pairings[{i}].drafter", base_dir))
                 for i, p in enumerate(got))


def _env_strings(src: str, raw: Any) -> Any:
    """The [[arms]] tables with env's integer values as strings (TOML writes 1 for "1")."""
    if not isinstance(raw, list):
        return raw
    out = []
    for i, t in enumerate(raw):
        env = msgspec.convert(t, _ArmEnv).env if isinstance(t, dict) else None
        if isinstance(env, dict):
            for ek, ev in env.items():
                if isinstance(ev, bool) or not isinstance(ev, (str, int)):
                    raise fail(src, f"arms[{i}].env.{ek}", f"env values are strings (or integers), got {ev!r}")
            t = {**t, "env": {ek: str(ev) for ek, ev in env.items()}}
        out.append(t)
    return out


class _ArmEnv(msgspec.Struct, kw_only=True):
    """An [[arms]] table's env as the file gives it, before it is typed."""
    env: Any = None


def _arms(src: str, raw: Any, pairings: tuple[Pairing, ...], declared: dict[str, EngineDecl],
          settings: Settings) -> tuple[tuple[Arm, ...], dict[str, EngineDecl]]:
    raw = _env_strings(src, raw)
    got: list[suitespec.Arm] = _tables(src, raw, "arms", suitespec.Arm)
    _unique(src, "arms", [a.name for a in got])
    by_name = {p.name: p for p in pairings}
    engines: dict[str, EngineDecl] = {}
    out: list[Arm] = []
    for i, (a, t) in enumerate(zip(got, raw)):
        k = f"arms[{i}]"
        pairing = a.pairing if "pairing" in t else pairings[0].name if len(pairings) == 1 else ""
        if "pairing" not in t and not pairing:
            raise fail(src, f"{k}.pairing", f"missing: the suite has several pairings (have: {', '.join(by_name)})")
        if pairing not in by_name:
            raise fail(src, f"{k}.pairing", f"no pairing named {pairing!r} (have: {', '.join(by_name)})")
        engine = a.engine if "engine" in t else default_engine()
        decl = declared.get(engine) or declare.builtin(engine)
        if decl is None:
            raise fail(src, f"{k}.engine", f"unknown engine {engine!r} (known: {', '.join([*declare.adapters(), *declared])}; "
                       f"a command engine can be declared in an [engines.{engine}] table)")
        engines[engine] = decl
        _block(src, k, a.block, settings, by_name[pairing], decl)
        _env(src, k, a.env)
        command = _arm_command(src, k, a, engine, decl)
        if a.tok_s_regex is not None:
            _tok_s_regex(src, f"{k}.tok_s_regex", a.tok_s_regex, engine, decl)
        timeout = a.timeout_s if "timeout_s" in t else decl.timeout_s or a.timeout_s
        prefixes = tuple(dict.fromkeys([*settings.override_prefixes, *decl.override_prefixes]))
        out.append(Arm(**{**asdict(a), "pairing": pairing, "engine": engine, "command": command,
                          "timeout_s": timeout}, adapter=decl.adapter, override_prefixes=prefixes,
                       parser=decl.parser))
    return tuple(out), engines


def _block(src: str, k: str, block: int, settings: Settings, pairing: Pairing, decl: EngineDecl) -> None:
    if block > settings.max_tokens:
        # A round drafts block - 1 tokens; more than a run generates is never used.
        raise fail(src, f"{k}.block", f"must be <= max_tokens ({settings.max_tokens}), got {block}")
    if block > 1 and pairing.drafter is None and decl.adapter != "command":
        raise fail(src, f"{k}.block", f"block {block} needs a drafter, and pairing {pairing.name!r} has none")


def _env(src: str, k: str, env: dict[str, str]) -> None:
    for ek, ev in env.items():
        if not ek or "=" in ek or "\0" in ek:
            raise fail(src, f"{k}.env", f"{ek!r} is not an environment variable name (non-empty, "
                       "no '=' and no NUL character)")
        if "\0" in ev:
            raise fail(src, f"{k}.env.{ek}", "the value holds a NUL character, which no environment can carry")
    redact.remember(env)   # a secret-named variable here is kept out of every output too


def _arm_command(src: str, k: str, a: suitespec.Arm, engine: str, decl: EngineDecl) -> tuple[str, ...] | None:
    """The arm's own argv wins; else the engine's default (`[engines.NAME] command`)."""
    if decl.adapter != "command":
        if a.command is not None:
            raise fail(src, f"{k}.command", f"only engine \"command\" takes a command (engine is {engine!r})")
        return None
    if a.command is not None:
        return _command(src, a.command, f"{k}.command")
    if decl.command is None:
        raise fail(src, f"{k}.command", f"missing: engine {engine!r} runs a command and needs an argv "
                   f"list (here, or once for every arm as [engines.{engine}] command)")
    return decl.command


def _tok_s_regex(src: str, key: str, regex: str, engine: str, decl: EngineDecl) -> None:
    if decl.adapter != "command":
        raise fail(src, key, "only a command engine takes tok_s_regex")
    if decl.parser is not None:
        raise fail(src, key, f"engine {engine!r} declares a parse table; give one or the other")
    try:
        rx = re.compile(regex)
    except re.error as e:
        raise fail(src, key, f"not a valid regular expression: {e}") from None
    if rx.groups < 1:
        raise fail(src, key, "needs one capture group around the number")


def _prompts(src: str, raw: Any, base_dir: Path, engines: dict[str, EngineDecl]) -> tuple[Prompt, ...]:
    out: list[Prompt] = []
    for i, t in enumerate(_tables(src, raw, "prompts", PromptTable)):
        k = f"prompts[{i}]"
        for p in _prompt_table(src, k, t, base_dir, engines):
            if any(q.name == p.name for q in out):
                raise fail(src, f"{k}.name", f"two prompts are named {p.name!r}")
            out.append(p)
    return tuple(out)


def _prompt_table(src: str, k: str, t: PromptTable, base_dir: Path,
                  engines: dict[str, EngineDecl]) -> list[Prompt]:
    if t.text is not None and t.file is not None:
        raise fail(src, k, "give one of text or file, not both")
    if t.text is None and t.file is None:
        if t.category is None:
            raise fail(src, k, "needs text, file, or a built-in category")
        if t.name is not None:
            raise fail(src, f"{k}.name", "a built-in category names its own prompts; drop name")
        return [Prompt(name=f"{t.category}/{n}", category=t.category, text=txt)
                for n, txt in _builtin(src, t, engines, t.category, k)[:t.limit]]
    for field in ("engine", "limit"):
        if getattr(t, field) is not None:
            raise fail(src, f"{k}.{field}", f"only a built-in category takes {field}")
    if t.name is None:
        raise fail(src, f"{k}.name", "missing (a prompt given by text or file needs a name)")
    key = f"{k}.text" if t.text is not None else f"{k}.file"
    text = t.text if t.text is not None else _read_prompt(src, key, str(t.file), base_dir)
    if not text.strip():
        # Engines refuse an empty prompt: every run would fail; say it once, now.
        raise fail(src, key, "the prompt is empty or only whitespace")
    if "\0" in text:
        # No engine can take it: argv and C strings end at a NUL, so every run would fail.
        raise fail(src, key, f"the prompt holds a NUL character (at character {text.index(chr(0))}); remove it")
    return [Prompt(name=t.name, category=t.category, text=text)]


def _read_prompt(src: str, key: str, file: str, base_dir: Path) -> str:
    f = Path(file).expanduser()
    f = f if f.is_absolute() else base_dir / f
    try:
        return f.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise fail(src, key, f"cannot read prompt file {f}: {e}") from None


def _builtin(src: str, t: PromptTable, engines: dict[str, EngineDecl], category: str, k: str) -> list[tuple[str, str]]:
    """A built-in category from the prompt table's `engine`, else from the first arm engine
    that has it."""
    if t.engine is not None:
        if t.engine not in engines:
            raise fail(src, f"{k}.engine", f"no arm runs engine {t.engine!r} (arms run: {', '.join(engines)})")
        candidates = [engines[t.engine]]
    else:
        candidates = list(engines.values())
    errors = []
    for decl in candidates:
        try:
            got = list(decl.builtin_prompts(category))
        except Exception as e:  # an engine's own loader raises its own error type
            errors.append(f"{decl.name}: {e}")
            continue
        if not got:
            raise fail(src, f"{k}.category", f"built-in category {category!r} of engine {decl.name!r} has no prompts")
        return [(str(n), str(txt)) for n, txt in got]
    raise fail(src, f"{k}.category", f"no engine of this suite has built-in prompts of category {category!r} "
               f"({'; '.join(errors) or 'no engines'}); give text or file instead")
