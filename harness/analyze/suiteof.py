"""A record's suite section as the typed `SuiteSection`: the boundary the analyses that read a
record's arms, pairings, prompts and settings convert at, once a call (a `SuiteSection` passes
through), while the record itself still travels as a dict."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec

from harness.core.schema import SuiteSection


def suite_of(record: Mapping[str, Any] | SuiteSection) -> SuiteSection:
    """The record's suite, typed (a loaded record's suite has this shape)."""
    return record if isinstance(record, SuiteSection) else msgspec.convert(record["suite"], SuiteSection)
