"""Secrets kept out of everything the harness writes.

A variable whose name says it is secret (TOKEN, KEY, SECRET, PASSWORD, ...) is a secret,
whether it is in the harness's environment or set in an arm's `env` in a suite (each suite
remembers its arms' when it is loaded: `remember`). Its value is replaced by
`[redacted $NAME]` in everything a record keeps (engine output kept for a failed run, labels,
overrides, error messages, argv, host fields, the suite's own arm env); records feed the
journal, the terminal's lines and summary, the reports, the PR comments and the dashboard, so
this is the one door.

Two rules, because a value alone can be too short to find safely:
- bound: wherever the value is bound to its name (`NAME=value`, `NAME: value`,
  `"NAME": "value"`, `NAME='value'`, an argv `NAME=value`, or a mapping's `NAME` key, as in an
  arm's env and a run's overrides), it is replaced whatever its length (AWS_SECRET_ACCESS_KEY=xyz);
- bare: anywhere else, as a substring, only from MIN_LEN characters on: replacing every "1" or
  "xyz" of a record would corrupt its numbers and texts, and a value that short is not what a
  leak of a real credential looks like.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MIN_LEN = 6
MARKER = re.compile(r"\[redacted \$([A-Za-z_][A-Za-z0-9_]*)\]")

# name -> values of the secret-named variables of the arms of every suite this process loaded.
_SUITE_ENV: dict[str, set[str]] = {}


def marker(name: str) -> str:
    return f"[redacted ${name}]"


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def remember(env: Mapping[str, str]) -> None:
    """Keep the secret-named variables of an arm's env (a suite being loaded): every later
    redaction in this process replaces their values too, as it does the environment's."""
    for name, value in env.items():
        if is_secret_name(name) and value and not MARKER.fullmatch(value):
            _SUITE_ENV.setdefault(name, set()).add(value)


@dataclass(frozen=True)
class Secrets:
    """bound: (name, its values longest first, JSON-escaped forms too); bare: (value, name) of the
    values from MIN_LEN characters, longest first (one may contain another)."""
    bound: tuple[tuple[str, tuple[str, ...]], ...]
    bare: tuple[tuple[str, str], ...]

    def __bool__(self) -> bool:
        return bool(self.bound)

    @property
    def names(self) -> frozenset[str]:
        return frozenset(n for n, _ in self.bound)


def secrets(env: Mapping[str, str] | None = None) -> Secrets:
    """The secrets of env (default: os.environ) and of the arms of every suite loaded so far."""
    named: dict[str, set[str]] = {}
    pairs: Iterable[tuple[str, str]] = (os.environ if env is None else env).items()
    for name, value in pairs:
        if is_secret_name(name) and value and not MARKER.fullmatch(value):
            named.setdefault(name, set()).add(value)
    for name, values in _SUITE_ENV.items():
        named.setdefault(name, set()).update(values)
    bound: list[tuple[str, tuple[str, ...]]] = []
    bare: dict[str, str] = {}
    for name in sorted(named):
        forms = set()
        for v in named[name]:
            forms |= {v, json.dumps(v)[1:-1]}   # a value with quotes appears escaped in JSON text
        bound.append((name, tuple(sorted(forms, key=len, reverse=True))))
        for v in forms:
            if len(v) >= MIN_LEN:
                bare.setdefault(v, name)
    return Secrets(tuple(bound), tuple(sorted(bare.items(), key=lambda kv: len(kv[0]), reverse=True)))


@functools.lru_cache(maxsize=256)
def _bound_pattern(name: str, values: tuple[str, ...]) -> re.Pattern[str]:
    exact = "|".join(re.escape(v) for v in values)
    stop = r"""\s,;)\]}'\""""
    return re.compile(
        rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])"   # the name, as a whole word
        r"""['"]?[ \t]*[=:][ \t]*"""                              # = or :, and a "NAME": form's quotes
        rf"""(?:(?P<q>['"])(?!\[redacted )(?P<qv>{exact}|[^'"\r\n]+?)(?=(?P=q))"""   # quoted, to its quote
        rf"|(?!\[redacted )(?P<v>(?:{exact})(?=[{stop}]|$)|[^{stop}]+))",             # bare, to a stop
        re.MULTILINE)


def redact_text(text: str, found: Secrets) -> str:
    for value, name in found.bare:
        if value in text:
            text = text.replace(value, marker(name))
    for name, values in found.bound:
        if name in text:
            text = _bound_pattern(name, values).sub(functools.partial(_keep_name, name=name), text)
    return text


def _keep_name(m: re.Match[str], name: str) -> str:
    start = m.start("qv") if m.group("qv") is not None else m.start("v")
    return m.group(0)[:start - m.start()] + marker(name)


def redact(obj: Any, env: Mapping[str, str] | None = None) -> Any:
    """obj with every secret value in its strings (keys included) replaced; obj itself is
    returned unchanged when there is nothing to replace."""
    found = secrets(env)
    return _walk(obj, found, found.names) if found else obj


def _walk(obj: Any, found: Secrets, names: frozenset[str]) -> Any:
    if isinstance(obj, str):
        return redact_text(obj, found)
    if isinstance(obj, dict):
        # A secret's name as a key (an arm's env, a run's overrides): its value, whatever it is.
        return {_walk(k, found, names): marker(k) if k in names and isinstance(v, str) and v
                and not MARKER.fullmatch(v) else _walk(v, found, names) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_walk(v, found, names) for v in obj]
    return obj


def restore(text: str, env: Mapping[str, str] | None = None) -> str:
    """text with each `[redacted $NAME]` replaced by NAME's value in env (default: os.environ),
    for a resumed session that must run what the record no longer says; KeyError(NAME) when a
    variable is not set."""
    env = os.environ if env is None else env

    def value(m: re.Match[str]) -> str:
        name = m.group(1)
        if not env.get(name):
            raise KeyError(name)
        return env[name]
    return MARKER.sub(value, text)
