"""TOML suite -> validated `Suite`.

Every error a user can fix becomes one `UserError` line: "<file>: <key>: <what is wrong>".
Validation is complete before anything runs, so a typo in the last arm never costs a
half-finished session.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
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
from harness.core import declare, redact, suitespec
from harness.core.errors import UserError
from harness.core.schema import SuiteSection

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


def suite_from_record(section: SuiteSection | Mapping[str, Any], source: str) -> Suite:
    """Rebuild the suite a record was made from (for --resume); model dirs are re-checked. A
    section still as JSON's builtins is decoded here, once."""
    try:
        d = section if isinstance(section, SuiteSection) else msgspec.convert(section, SuiteSection)
    except msgspec.ValidationError as e:
        raise UserError(f"{source}: suite: record's suite section is incomplete ({e})") from None
    # The settings sit at the suite file's top level, beside its parts.
    # Declared command engines come back from the record; built-in ones from their code.
    engines = {n: {k: v for k, v in e.items() if k != "name" and v is not None}
               for n, e in d.engines.items() if declare.builtin(n) is None}
    data: dict[str, Any] = {
        **_present(d.settings), "name": d.name,
        "pairings": [_present(p) for p in d.pairings],
        "arms": [_present(_restored_arm(a, source)) for a in d.arms],
        "prompts": [_present(p) for p in d.prompts],
        "engines": engines}
    return build(data, source=f"{source} (suite section)", base_dir=Path.cwd(),
                 sha256=d.sha256, default_name=d.name, path=d.path)


def _present(part: msgspec.Struct) -> dict[str, Any]:
    """A part of the record's suite as the suite file gives it: its fields, unset ones left out."""
    return {k: v for k, v in msgspec.to_builtins(part).items() if v is not None}


def _restored_arm(arm: suitespec.Arm, source: str) -> suitespec.Arm:
    """An arm of a record's suite as it ran: a secret the record keeps as `[redacted $NAME]` (in
    its env or command) comes back from the environment, or the resume stops with one line."""
    def restored(text: str, key: str) -> str:
        try:
            return redact.restore(text)
        except KeyError as e:
            name = e.args[0]
            raise UserError(f"{source}: arms.{arm.name}.{key} was redacted in the record "
                            f"({redact.marker(name)}); set {name} in the environment to the value the "
                            "session ran with, then resume") from None
    return msgspec.structs.replace(
        arm, env={k: restored(v, f"env.{k}") for k, v in arm.env.items()},
        command=None if arm.command is None else tuple(restored(c, "command") for c in arm.command))


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
