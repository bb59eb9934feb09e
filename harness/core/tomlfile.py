"""One reader for the TOML files a user writes (suites as asv reads them, acknowledgements,
pyproject.toml): a file that cannot be read or parsed is one line naming it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.core.errors import UserError

try:
    import tomllib
except ModuleNotFoundError:   # Python 3.10: the same parser, as a package
    import tomli as tomllib  # type: ignore[no-redef]


def read_toml(path: Path, what: str) -> dict[str, Any]:
    """The parsed file; UserError "PATH: cannot read WHAT: ..." or "PATH: not valid TOML: ..."."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read {what}: {e}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise UserError(f"{path}: not valid TOML: {e}") from None
