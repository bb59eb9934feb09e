"""The suite file's rules: every key checked, every error one `UserError` line naming the
file and key, before anything runs."""

from __future__ import annotations

import math
import re
import string
from pathlib import Path
from typing import Any

from harness.collect import textparse
from harness.collect.suite import size
from harness.collect.suite.model import (
    COMMAND_PLACEHOLDERS,
    Arm,
    Pairing,
    Prompt,
    QuietSettings,
    Settings,
    Suite,
    WatchSettings,
    embedded_dir,
    embedded_which,
)
from harness.core import declare, redact
from harness.core.declare import EngineDecl, default_engine
from harness.core.errors import UserError
from harness.core.figures import FIGURES

# --- validation helpers ----------------------------------------------------------------

class _V:
    """Carries the file name so every message names the file and the key."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, key: str, what: str) -> UserError:
        return UserError(f"{self.source}: {key}: {what}")

    def known(self, table: dict, key: str, allowed: tuple[str, ...]) -> None:
        for k in table:
            if k not in allowed:
                where = f"{key}.{k}" if key else k
                raise self.fail(where, f"unknown field (known: {', '.join(allowed)})")

    def int_(self, v: Any, key: str, lo: int | None = None) -> int:
        if isinstance(v, bool) or not isinstance(v, int):
            raise self.fail(key, f"expected an integer, got {v!r}")
        if lo is not None and v < lo:
            raise self.fail(key, f"must be >= {lo}, got {v}")
        return v

    def num(self, v: Any, key: str, lo: float | None = None, hi: float | None = None,
            lo_open: bool = False, hi_open: bool = False) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise self.fail(key, f"expected a number, got {v!r}")
        v = float(v)
        if not math.isfinite(v):
            # inf would wait, time out or budget forever; nan compares false with every bound.
            raise self.fail(key, f"expected a finite number, got {v}")
        if lo is not None and (v < lo or (lo_open and v == lo)):
            raise self.fail(key, f"must be {'>' if lo_open else '>='} {lo:g}, got {v:g}")
        if hi is not None and (v > hi or (hi_open and v == hi)):
            raise self.fail(key, f"must be {'<' if hi_open else '<='} {hi:g}, got {v:g}")
        return v

    def str_(self, v: Any, key: str) -> str:
        if not isinstance(v, str) or not v:
            raise self.fail(key, f"expected a non-empty string, got {v!r}")
        return v

    def bool_(self, v: Any, key: str) -> bool:
        if not isinstance(v, bool):
            raise self.fail(key, f"expected true or false, got {v!r}")
        return v

    def str_list(self, v: Any, key: str) -> tuple[str, ...]:
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise self.fail(key, f"expected a list of strings, got {v!r}")
        return tuple(v)

    def table(self, v: Any, key: str) -> dict:
        if not isinstance(v, dict):
            raise self.fail(key, f"expected a table, got {v!r}")
        return v

    def tables(self, v: Any, key: str) -> list[dict]:
        if not isinstance(v, list) or not all(isinstance(x, dict) for x in v):
            raise self.fail(key, f"expected an array of tables ([[{key}]])")
        return v

    def named_tables(self, v: Any, key: str, known: tuple[str, ...], what: str) -> list[tuple[str, dict, str]]:
        """(key path, table, name) of each [[key]] table: known fields only, a name each, no two alike."""
        out: list[tuple[str, dict, str]] = []
        for i, t in enumerate(self.tables(v, key)):
            k = f"{key}[{i}]"
            self.known(t, k, known)
            name = self.str_(t.get("name"), f"{k}.name")
            if any(n == name for _, _, n in out):
                raise self.fail(f"{k}.name", f"two {what} are named {name!r}")
            out.append((k, t, name))
        return out


_TOP = ("name", "description", "max_tokens", "temp", "seed", "repetitions", "warmups",
        "cooldown_s", "cooldown_source", "cooldown_ratio", "cooldown_cap_s", "ignore_eos", "quiet",
        "watch", "spread_threshold", "contention_threshold", "override_prefixes", "override_ignore",
        "scaling", "budget_s", "max_repetitions", "threshold", "thresholds", "alpha", "looks", "dispatch_probe",
        "restart_s", "pairings", "arms", "prompts", "engines")
_QUIET = ("enabled", "threshold_pct", "settle_s", "timeout_s")
_WATCH = ("enabled", "threshold_pct", "interval_s", "contended_share")
_PAIRING = ("name", "target", "drafter")
_ARM = ("name", "pairing", "engine", "block", "env", "command", "timeout_s", "tok_s_regex")
_PROMPT = ("name", "category", "text", "file", "limit", "engine")
_ENGINE = ("adapter", "phases", "phase_labels", "overrides", "override_prefixes", "profile_var", "split_notes",
           "numerics", "tools", "prompts", "build", "interpreted",
           "command", "timeout_s", "parse")


def build(data: dict, source: str, base_dir: Path, sha256: str, default_name: str,
           path: str) -> Suite:
    v = _V(source)
    v.known(data, "", _TOP)
    settings = _settings(v, data)
    declared = _engines(v, data.get("engines", {}), base_dir)
    pairings = _pairings(v, data.get("pairings"), base_dir)
    arms, engines = _arms(v, data.get("arms"), {p.name: p for p in pairings}, declared, settings)
    prompts = _prompts(v, data.get("prompts"), base_dir, engines)
    bad = size.absurd(settings, len(arms), len(prompts))   # counted, before any plan is built
    if bad is not None:
        raise v.fail(*bad)
    name = v.str_(data.get("name", default_name), "name")
    return Suite(name=name, path=path, sha256=sha256, settings=settings,
                 pairings=pairings, arms=arms, prompts=prompts, engines=engines)


def _engines(v: _V, raw: Any, base_dir: Path) -> dict[str, EngineDecl]:
    """[engines.NAME] tables: what a command engine declares about itself."""
    out: dict[str, EngineDecl] = {}
    for name, t in v.table(raw, "engines").items():
        k = f"engines.{name}"
        t = v.table(t, k)
        v.known(t, k, _ENGINE)
        if declare.builtin(name) is not None:
            raise v.fail(k, f"{name!r} is a built-in engine that declares itself; pick another name")
        adapter = v.str_(t.get("adapter", "command"), f"{k}.adapter")
        if adapter != "command":
            raise v.fail(f"{k}.adapter", f"a declared engine runs through \"command\", got {adapter!r}")
        phases = v.str_list(t.get("phases", []), f"{k}.phases")
        if len(set(phases)) != len(phases):
            raise v.fail(f"{k}.phases", "a phase is named twice")
        profile = t.get("profile_var")
        try:
            parser = textparse.compile_spec(t["parse"], base_dir, f"{k}.parse") if "parse" in t else None
        except textparse.SpecError as e:
            raise v.fail(e.key, e.what) from None
        prompts: dict[str, tuple[tuple[str, str], ...]] = {}
        for cat, items in v.table(t.get("prompts", {}), f"{k}.prompts").items():
            got = []
            for i, it in enumerate(v.tables(items, f"{k}.prompts.{cat}")):
                v.known(it, f"{k}.prompts.{cat}[{i}]", ("name", "text"))
                got.append((v.str_(it.get("name"), f"{k}.prompts.{cat}[{i}].name"),
                            v.str_(it.get("text"), f"{k}.prompts.{cat}[{i}].text")))
            prompts[cat] = tuple(got)
        out[name] = EngineDecl(
            name=name, adapter=adapter, phases=phases,
            phase_labels=_str_table(v, t.get("phase_labels", {}), f"{k}.phase_labels"),
            overrides=_str_table(v, t.get("overrides", {}), f"{k}.overrides"),
            override_prefixes=v.str_list(t.get("override_prefixes", []), f"{k}.override_prefixes"),
            profile_var=None if profile is None else v.str_(profile, f"{k}.profile_var"),
            numerics=v.str_(t.get("numerics", "unknown"), f"{k}.numerics"),
            tools=_str_table(v, t.get("tools", {}), f"{k}.tools"), prompts=prompts,
            command=_command(v, t["command"], f"{k}.command") if "command" in t else None,
            timeout_s=v.num(t["timeout_s"], f"{k}.timeout_s", 0, lo_open=True) if "timeout_s" in t else None,
            parse=None if parser is None else parser.spec, parser=parser,
            split_notes=_str_table(v, t.get("split_notes", {}), f"{k}.split_notes"),
            build=_build_argv(v, t, k),
            interpreted=None if "interpreted" not in t else v.bool_(t["interpreted"], f"{k}.interpreted"))
    return out


def _build_argv(v: _V, t: dict, k: str) -> tuple[str, ...]:
    """An engine's `build`: an argv list (never a shell) run in each commit's exported tree."""
    if "build" not in t:
        return ()
    argv = v.str_list(t["build"], f"{k}.build")
    if not argv:
        raise v.fail(f"{k}.build", "empty argv list (leave `build` out when nothing is built)")
    return argv


def _command(v: _V, raw: Any, key: str) -> tuple[str, ...]:
    """A command engine's argv: strings, not empty, only known placeholders."""
    command = v.str_list(raw, key)
    if not command:
        raise v.fail(key, "empty argv list")
    for part in command:
        try:
            fields = [f for _, f, _, _ in string.Formatter().parse(part)]
        except ValueError as e:
            raise v.fail(key, f"bad placeholder in {part!r}: {e}") from None
        for fname in fields:
            if fname is not None and fname not in COMMAND_PLACEHOLDERS:
                raise v.fail(key, f"unknown placeholder {{{fname}}} "
                             f"(known: {', '.join(COMMAND_PLACEHOLDERS)})")
    return command


def _str_table(v: _V, raw: Any, key: str) -> dict[str, str]:
    t = v.table(raw, key)
    for name, val in t.items():
        v.str_(val, f"{key}.{name}")
    return dict(t)


def _settings(v: _V, d: dict) -> Settings:
    base = Settings()
    q = v.table(d.get("quiet", {}), "quiet")
    v.known(q, "quiet", _QUIET)
    w = v.table(d.get("watch", {}), "watch")
    v.known(w, "watch", _WATCH)
    bq, bw = base.quiet, base.watch
    quiet = QuietSettings(
        enabled=v.bool_(q.get("enabled", bq.enabled), "quiet.enabled"),
        threshold_pct=v.num(q.get("threshold_pct", bq.threshold_pct), "quiet.threshold_pct", 0, 100, True),
        settle_s=None if q.get("settle_s") is None else v.num(q["settle_s"], "quiet.settle_s", 0),
        timeout_s=None if q.get("timeout_s") is None else v.num(q["timeout_s"], "quiet.timeout_s", 0),
    )
    watch = WatchSettings(
        enabled=v.bool_(w.get("enabled", bw.enabled), "watch.enabled"),
        threshold_pct=v.num(w.get("threshold_pct", bw.threshold_pct), "watch.threshold_pct", 0, 100, True),
        interval_s=v.num(w.get("interval_s", bw.interval_s), "watch.interval_s", 0, lo_open=True),
        contended_share=v.num(w.get("contended_share", bw.contended_share), "watch.contended_share", 0, 1),
    )
    prefixes = v.str_list(d.get("override_prefixes", list(base.override_prefixes)), "override_prefixes")
    cooldown, cooldown_source, ratio, cap = _cooldown_rule(v, d, base)
    repetitions = v.int_(d.get("repetitions", base.repetitions), "repetitions", 1)
    # A record's settings say null for an unset optional value; TOML has no null.
    budget = d.get("budget_s")
    max_reps = d.get("max_repetitions")
    restart = _given(d, "restart_s", base.restart_s)
    if max_reps is not None:
        max_reps = v.int_(max_reps, "max_repetitions")
        if max_reps < repetitions:
            raise v.fail("max_repetitions", f"must be >= repetitions ({repetitions}), got {max_reps}")
    return Settings(
        max_tokens=v.int_(d.get("max_tokens", base.max_tokens), "max_tokens", 1),
        temp=v.num(d.get("temp", base.temp), "temp", 0),
        seed=_seed(v, d.get("seed", base.seed)),
        repetitions=repetitions,
        warmups=v.int_(d.get("warmups", base.warmups), "warmups", 0),
        cooldown_s=cooldown, cooldown_source=cooldown_source,
        cooldown_ratio=ratio, cooldown_cap_s=cap,
        ignore_eos=v.bool_(d.get("ignore_eos", base.ignore_eos), "ignore_eos"),
        quiet=quiet, watch=watch,
        spread_threshold=v.num(d.get("spread_threshold", base.spread_threshold), "spread_threshold", 0, lo_open=True),
        contention_threshold=v.num(d.get("contention_threshold", base.contention_threshold),
                                   "contention_threshold", 0, 1),
        override_prefixes=prefixes,
        override_ignore=v.str_list(d.get("override_ignore", []), "override_ignore"),
        scaling=v.bool_(d.get("scaling", base.scaling), "scaling"),
        budget_s=None if budget is None else v.num(budget, "budget_s", 0, lo_open=True),
        max_repetitions=max_reps,
        threshold=v.num(_given(d, "threshold", base.threshold), "threshold", 0, 1, lo_open=True, hi_open=True),
        thresholds=_thresholds(v, _given(d, "thresholds", {})),
        alpha=v.num(_given(d, "alpha", base.alpha), "alpha", 0, 0.5, lo_open=True),
        looks=v.int_(_given(d, "looks", base.looks), "looks", 1),
        dispatch_probe=v.bool_(_given(d, "dispatch_probe", base.dispatch_probe), "dispatch_probe"),
        restart_s=None if restart is None else v.num(restart, "restart_s", 0, lo_open=True),
    )


def _seed(v: _V, raw: Any) -> int:
    """Engines seed an unsigned 64-bit generator (MLX, NumPy): a negative seed fails every run."""
    seed = v.int_(raw, "seed", 0)
    if seed >= 2 ** 64:
        raise v.fail("seed", f"must be < 2**64, got {seed}")
    return seed


def _thresholds(v: _V, t: Any) -> dict[str, float]:
    """[thresholds] figure id -> relative change, each in (0, 1)."""
    if not isinstance(t, dict):
        raise v.fail("thresholds", "expected a table: figure id = relative change")
    out = {}
    for k, x in t.items():
        if k not in FIGURES:
            raise v.fail(f"thresholds.{k}", f"unknown figure (known: {', '.join(FIGURES)})")
        out[k] = v.num(x, f"thresholds.{k}", 0, 1, lo_open=True, hi_open=True)
    return out


def _given(d: dict, key: str, default: Any) -> Any:
    """d[key], or default when it is absent or null (a record's settings)."""
    x = d.get(key)
    return default if x is None else x


def _cooldown_rule(v: _V, d: dict, base: Settings) -> tuple[float, str, float, float | None]:
    """(cooldown_s, cooldown_source, cooldown_ratio, cooldown_cap_s) from the file."""
    cooldown_raw = d.get("cooldown_s", base.cooldown_s)
    ratio_raw, cap_raw = d.get("cooldown_ratio"), d.get("cooldown_cap_s")
    if cooldown_raw == "host":
        for key, raw in (("cooldown_ratio", ratio_raw), ("cooldown_cap_s", cap_raw)):
            if raw is not None:
                raise v.fail(key, "the host profile gives it when cooldown_s = \"host\"; "
                             "drop it or give cooldown_s in seconds")
        return base.cooldown_s, "host", base.cooldown_ratio, base.cooldown_cap_s
    if isinstance(cooldown_raw, str):
        raise v.fail("cooldown_s", f"expected a number of seconds or \"host\", got {cooldown_raw!r}")
    cooldown = v.num(cooldown_raw, "cooldown_s", 0)
    source = v.str_(d.get("cooldown_source", "suite"), "cooldown_source")
    ratio = v.num(base.cooldown_ratio if ratio_raw is None else ratio_raw, "cooldown_ratio", 0)
    cap = None
    if cap_raw is not None:
        cap = v.num(cap_raw, "cooldown_cap_s", 0)
        if cap < cooldown:
            raise v.fail("cooldown_cap_s", f"must be >= cooldown_s ({cooldown:g}), got {cap:g}")
    return cooldown, source, ratio, cap


def _model_dir(v: _V, raw: Any, key: str, base_dir: Path) -> str:
    s = v.str_(raw, key)
    which = embedded_which(s, key.rsplit(".", 1)[-1])
    if which:
        d = embedded_dir(which)
        if not d.is_dir():
            raise v.fail(key, f"the embedded {which} model is missing ({d} is not a directory)")
        return s
    d = Path(s).expanduser()
    d = d if d.is_absolute() else base_dir / d
    if not d.is_dir():
        raise v.fail(key, f"model directory not found: {d}")
    return str(d.resolve())


def _pairings(v: _V, raw: Any, base_dir: Path) -> tuple[Pairing, ...]:
    if raw is None:
        raise v.fail("pairings", "missing: the suite needs at least one [[pairings]] table")
    out: list[Pairing] = []
    for k, t, name in v.named_tables(raw, "pairings", _PAIRING, "pairings"):
        if "target" not in t:
            raise v.fail(f"{k}.target", "missing (a model directory or \"embedded\")")
        target = _model_dir(v, t["target"], f"{k}.target", base_dir)
        drafter = _model_dir(v, t["drafter"], f"{k}.drafter", base_dir) if "drafter" in t else None
        out.append(Pairing(name=name, target=target, drafter=drafter))
    if not out:
        raise v.fail("pairings", "empty: the suite needs at least one pairing")
    return tuple(out)


def _arms(v: _V, raw: Any, pairings: dict[str, Pairing], declared: dict[str, EngineDecl],
          settings: Settings) -> tuple[tuple[Arm, ...], dict[str, EngineDecl]]:
    engines: dict[str, EngineDecl] = {}
    if raw is None:
        raise v.fail("arms", "missing: the suite needs at least one [[arms]] table")
    out: list[Arm] = []
    for k, t, name in v.named_tables(raw, "arms", _ARM, "arms"):
        pairing = v.str_(t.get("pairing", next(iter(pairings)) if len(pairings) == 1 else None),
                         f"{k}.pairing")
        if pairing not in pairings:
            raise v.fail(f"{k}.pairing", f"no pairing named {pairing!r} (have: {', '.join(pairings)})")
        engine = v.str_(t.get("engine", default_engine()), f"{k}.engine")
        decl = declared.get(engine) or declare.builtin(engine)
        if decl is None:
            known = [*declare.adapters(), *declared]
            raise v.fail(f"{k}.engine", f"unknown engine {engine!r} (known: {', '.join(known)}; "
                         f"a command engine can be declared in an [engines.{engine}] table)")
        engines[engine] = decl
        block = v.int_(t.get("block", 1), f"{k}.block", 1)
        if block > settings.max_tokens:
            # A round drafts block - 1 tokens; more than a run generates is never used.
            raise v.fail(f"{k}.block", f"must be <= max_tokens ({settings.max_tokens}), got {block}")
        if block > 1 and pairings[pairing].drafter is None and decl.adapter != "command":
            raise v.fail(f"{k}.block", f"block {block} needs a drafter, and pairing {pairing!r} has none")
        env_t = v.table(t.get("env", {}), f"{k}.env")
        env: dict[str, str] = {}
        for ek, ev in env_t.items():
            if isinstance(ev, bool) or not isinstance(ev, (str, int)):
                raise v.fail(f"{k}.env.{ek}", f"env values are strings (or integers), got {ev!r}")
            env[ek] = str(ev)
            if not ek or "=" in ek or "\0" in ek:
                raise v.fail(f"{k}.env", f"{ek!r} is not an environment variable name (non-empty, "
                             "no '=' and no NUL character)")
            if "\0" in env[ek]:
                raise v.fail(f"{k}.env.{ek}", "the value holds a NUL character, which no environment can carry")
        redact.remember(env)   # a secret-named variable here is kept out of every output too
        command = None
        if decl.adapter == "command":
            # The arm's own argv wins; else the engine's default (`[engines.NAME] command`).
            if "command" in t:
                command = _command(v, t["command"], f"{k}.command")
            elif decl.command is not None:
                command = decl.command
            else:
                raise v.fail(f"{k}.command", f"missing: engine {engine!r} runs a command and needs an argv "
                             f"list (here, or once for every arm as [engines.{engine}] command)")
        elif "command" in t:
            raise v.fail(f"{k}.command", f"only engine \"command\" takes a command (engine is {engine!r})")
        regex = None
        if "tok_s_regex" in t:
            if decl.adapter != "command":
                raise v.fail(f"{k}.tok_s_regex", "only a command engine takes tok_s_regex")
            if decl.parser is not None:
                raise v.fail(f"{k}.tok_s_regex", f"engine {engine!r} declares a parse table; give one or the other")
            regex = v.str_(t["tok_s_regex"], f"{k}.tok_s_regex")
            try:
                rx = re.compile(regex)
            except re.error as e:
                raise v.fail(f"{k}.tok_s_regex", f"not a valid regular expression: {e}") from None
            if rx.groups < 1:
                raise v.fail(f"{k}.tok_s_regex", "needs one capture group around the number")
        timeout = v.num(t.get("timeout_s", decl.timeout_s or 600.0), f"{k}.timeout_s", 0, lo_open=True)
        prefixes = tuple(dict.fromkeys([*settings.override_prefixes, *decl.override_prefixes]))
        out.append(Arm(name=name, pairing=pairing, engine=engine, block=block, env=env,
                       command=command, timeout_s=timeout, tok_s_regex=regex,
                       adapter=decl.adapter, override_prefixes=prefixes, parser=decl.parser))
    if not out:
        raise v.fail("arms", "empty: the suite needs at least one arm")
    return tuple(out), engines


def _prompts(v: _V, raw: Any, base_dir: Path, engines: dict[str, EngineDecl]) -> tuple[Prompt, ...]:
    if raw is None:
        raise v.fail("prompts", "missing: the suite needs at least one [[prompts]] table")
    out: list[Prompt] = []
    for i, t in enumerate(v.tables(raw, "prompts")):
        k = f"prompts[{i}]"
        v.known(t, k, _PROMPT)
        sources = [s for s in ("text", "file") if s in t]
        if len(sources) > 1:
            raise v.fail(k, "give one of text or file, not both")
        category = v.str_(t["category"], f"{k}.category") if "category" in t else None
        if sources:
            if "engine" in t:
                raise v.fail(f"{k}.engine", "only a built-in category takes engine")
            name = v.str_(t.get("name"), f"{k}.name")
            if "limit" in t:
                raise v.fail(f"{k}.limit", "only a built-in category takes limit")
            if "text" in t:
                text = v.str_(t["text"], f"{k}.text")
            else:
                f = Path(v.str_(t["file"], f"{k}.file")).expanduser()
                f = f if f.is_absolute() else base_dir / f
                try:
                    text = f.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError) as e:
                    raise v.fail(f"{k}.file", f"cannot read prompt file {f}: {e}") from None
            if not text.strip():
                # Engines refuse an empty prompt: every run would fail; say it once, now.
                raise v.fail(f"{k}.{sources[0]}", "the prompt is empty or only whitespace")
            if "\0" in text:
                # No engine can take it: argv and C strings end at a NUL, so every run would fail.
                raise v.fail(f"{k}.{sources[0]}", f"the prompt holds a NUL character (at character "
                                                  f"{text.index(chr(0))}); remove it")
            new = [Prompt(name=name, category=category, text=text)]
        elif category is not None:
            limit = v.int_(t["limit"], f"{k}.limit", 1) if "limit" in t else None
            if "name" in t:
                raise v.fail(f"{k}.name", "a built-in category names its own prompts; drop name")
            new = [Prompt(name=f"{category}/{n}", category=category, text=txt)
                   for n, txt in _builtin(v, t, engines, category, f"{k}")[:limit]]
        else:
            raise v.fail(k, "needs text, file, or a built-in category")
        for p in new:
            if any(q.name == p.name for q in out):
                raise v.fail(f"{k}.name", f"two prompts are named {p.name!r}")
            out.append(p)
    if not out:
        raise v.fail("prompts", "empty: the suite needs at least one prompt")
    return tuple(out)


def _builtin(v: _V, t: dict, engines: dict[str, EngineDecl], category: str, k: str) -> list[tuple[str, str]]:
    """A built-in category from the prompt table's `engine`, else from the first arm engine
    that has it."""
    if "engine" in t:
        name = v.str_(t["engine"], f"{k}.engine")
        if name not in engines:
            raise v.fail(f"{k}.engine", f"no arm runs engine {name!r} (arms run: {', '.join(engines)})")
        candidates = [engines[name]]
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
            raise v.fail(f"{k}.category", f"built-in category {category!r} of engine {decl.name!r} has no prompts")
        return [(str(n), str(txt)) for n, txt in got]
    raise v.fail(f"{k}.category", f"no engine of this suite has built-in prompts of category {category!r} "
                 f"({'; '.join(errors) or 'no engines'}); give text or file instead")


