"""TOML suite -> validated `Suite`.

Every error a user can fix becomes one `UserError` line: "<file>: <key>: <what is wrong>".
Validation is complete before anything runs, so a typo in the last arm never costs a
half-finished session.
"""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import Any

import msgspec

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]  # same API; mypy sees both imports

from harness.collect.suite.model import (
    COMMAND_PLACEHOLDERS,
    DEFAULT_SUITE,
    EMBEDDED,
    Arm,
    Pairing,
    Prompt,
    QuietSettings,
    Settings,
    Suite,
    WatchSettings,
    embedded_dir,
    embedded_which,
    model_dir,
)
from harness.collect.suite.validate import build
from harness.core import declare, redact
from harness.core.errors import UserError

__all__ = ["COMMAND_PLACEHOLDERS", "DEFAULT_SUITE", "EMBEDDED", "Arm", "Pairing", "Prompt", "QuietSettings", "Settings",
           "Suite", "WatchSettings", "embedded_dir", "embedded_which", "load_suite", "model_dir", "quick", "suite_from_record", "with_settings"]


# --- loading ---------------------------------------------------------------------------

def load_suite(path: str | Path | None = None) -> Suite:
    """Read and validate a suite file; None means the packaged default suite."""
    p = Path(path) if path is not None else DEFAULT_SUITE
    if p.is_dir():
        raise UserError(f"{p}: a directory, not a suite file; pass a suite TOML file")
    if not p.is_file():
        raise UserError(f"{p}: suite file not found")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UserError(f"{p}: cannot read the suite file ({e.strerror or e})") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise UserError(f"{p}: not valid TOML: {e}") from None
    return build(data, source=str(p), base_dir=p.resolve().parent,
                  sha256=hashlib.sha256(raw).hexdigest(), default_name=p.stem, path=str(p))


def suite_from_record(d: dict[str, Any], source: str) -> Suite:
    """Rebuild the suite a record was made from (for --resume); model dirs are re-checked."""
    try:
        settings = dict(d["settings"])
        data: dict[str, Any] = {**settings, "name": d["name"], "pairings": d["pairings"],
                                "arms": d["arms"], "prompts": d["prompts"]}
        # Declared command engines come back from the record; built-in ones from their code.
        engines = {n: {k: v for k, v in e.items() if k != "name" and v is not None}
                   for n, e in (d.get("engines") or {}).items() if declare.builtin(n) is None}
        if engines:
            data["engines"] = engines
        data["arms"] = [_restored_arm(a, source) for a in d["arms"]]
        data["pairings"] = [{k: v for k, v in pp.items() if v is not None} for pp in d["pairings"]]
        data["prompts"] = [{k: v for k, v in pp.items() if v is not None} for pp in d["prompts"]]
    except (KeyError, TypeError) as e:
        raise UserError(f"{source}: suite: record's suite section is incomplete ({e})") from None
    return build(data, source=f"{source} (suite section)", base_dir=Path.cwd(),
                  sha256=d.get("sha256", ""), default_name=d["name"], path=d.get("path", ""))


def _restored_arm(arm: dict[str, Any], source: str) -> dict[str, Any]:
    """An arm of a record's suite as it ran: a secret the record keeps as `[redacted $NAME]` (in
    its env or command) comes back from the environment, or the resume stops with one line."""
    def restored(text: str, key: str) -> str:
        try:
            return redact.restore(text)
        except KeyError as e:
            name = e.args[0]
            raise UserError(f"{source}: arms.{arm.get('name')}.{key} was redacted in the record "
                            f"({redact.marker(name)}); set {name} in the environment to the value the "
                            "session ran with, then resume") from None
    out = dict(arm)
    if isinstance(arm.get("env"), dict):
        out["env"] = {k: restored(v, f"env.{k}") if isinstance(v, str) else v for k, v in arm["env"].items()}
    if isinstance(arm.get("command"), list):
        out["command"] = [restored(c, "command") if isinstance(c, str) else c for c in arm["command"]]
    return out


def with_settings(suite: Suite, **changes: Any) -> Suite:
    """A copy of the suite with some settings replaced (--quick, baseline and check runs)."""
    return dataclasses.replace(suite, settings=msgspec.structs.replace(suite.settings, **changes))


def quick(suite: Suite) -> Suite:
    """Smoke-test settings: 2 repetitions, no warm-up, no cooldown, no quiet wait, no budget.

    Figures from a quick session break the protocol, so summaries flag them not to publish.
    """
    s = suite.settings
    return with_settings(suite, repetitions=2, warmups=0, cooldown_s=0.0, cooldown_source="quick",
                         cooldown_ratio=0.0, cooldown_cap_s=None, budget_s=None,
                         max_repetitions=None if s.max_repetitions is None else max(2, s.max_repetitions),
                         max_tokens=min(s.max_tokens, 32),
                         quiet=msgspec.structs.replace(s.quiet, enabled=False))
