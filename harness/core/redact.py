"""Secrets kept out of everything the harness writes.

The values of environment variables whose names say they are secret (TOKEN, KEY, SECRET,
PASSWORD, ...) are replaced wherever they appear in a record: engine output kept for a failed
run, error messages, argv, host fields. Records feed the reports, the PR comments and the
dashboard, so this is the one door. Values shorter than MIN_LEN are left alone: a variable like
`USE_KEY=1` is not a secret, and replacing every "1" would corrupt the record.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

SECRET_NAME = re.compile(r"TOKEN|KEY|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.IGNORECASE)
MIN_LEN = 6


def secrets(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """{value: variable name} of the secret-looking variables in env (default: os.environ),
    with each value's JSON-escaped form too (a value with quotes appears escaped in JSON text)."""
    out: dict[str, str] = {}
    for name, value in (os.environ if env is None else env).items():
        if SECRET_NAME.search(name) and len(value) >= MIN_LEN:
            out[value] = name
            out.setdefault(json.dumps(value)[1:-1], name)
    return out


def redact_text(text: str, found: Mapping[str, str]) -> str:
    for value in sorted(found, key=len, reverse=True):   # longest first: one may contain another
        if value in text:
            text = text.replace(value, f"[redacted ${found[value]}]")
    return text


def redact(obj: Any, env: Mapping[str, str] | None = None) -> Any:
    """obj with every secret value in its strings (keys included) replaced; obj itself is
    returned unchanged when there is nothing to replace."""
    found = secrets(env)
    return _walk(obj, found) if found else obj


def _walk(obj: Any, found: Mapping[str, str]) -> Any:
    if isinstance(obj, str):
        return redact_text(obj, found)
    if isinstance(obj, dict):
        return {_walk(k, found): _walk(v, found) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_walk(v, found) for v in obj]
    return obj
