"""Work counters: what an engine did over one generation's decode, counted, not timed.

An engine may report `diagnostics.counters`, name -> a non-negative int over the decode (the
first decode step to the last token, prefill excluded, as decode_ms). The standard names are
below; an engine adds its own by declaring them (EngineDecl.counters, name -> what it counts),
as it declares its phases. At temperature 0 the same code and inputs give the same counts, so
the harness compares them exactly (harness/analyze/counters.py): any change is a change.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

HOST_SYNCS = "host_syncs"
TARGET_FORWARDS = "target_forwards"
DRAFTER_FORWARDS = "drafter_forwards"
TARGET_TOKENS = "target_tokens"
DRAFTER_TOKENS = "drafter_tokens"

STANDARD: dict[str, str] = {
    HOST_SYNCS: "times the host waited for the device: evaluations and scalar readbacks",
    TARGET_FORWARDS: "forwards of the target model (a verify forward, a classic step)",
    DRAFTER_FORWARDS: "forwards of the drafter (a draft model's step, an MTP head's step)",
    TARGET_TOKENS: "positions the target's forwards processed, summed",
    DRAFTER_TOKENS: "positions the drafter's forwards processed, summed",
}

# Tokens per forward: positions over forwards, derived, never reported.
PER_FORWARD = {TARGET_TOKENS: TARGET_FORWARDS, DRAFTER_TOKENS: DRAFTER_FORWARDS}

NAME = re.compile(r"^[a-z][a-z0-9_]{0,47}$")


def words(name: str) -> str:
    """A counter as people read it: "host_syncs" -> "host syncs"."""
    return name.replace("_", " ")


def declared_problem(counters: Any) -> tuple[str, str] | None:
    """What is wrong with an engine's declared counters, as (the counter's key, what), or None:
    a table of new name -> what it counts (a standard name needs no declaration)."""
    if not isinstance(counters, Mapping):
        return "", f"a table of name = description, got {type(counters).__name__}"
    for name, what in counters.items():
        if not isinstance(name, str) or not NAME.match(name):
            return str(name), "a counter name is lower case letters, digits and _ (at most 48)"
        if name in STANDARD:
            return name, f"{name!r} is a standard counter; declare only the engine's own"
        if not isinstance(what, str) or not what.strip():
            return name, "say what it counts (a non-empty string)"
    return None

