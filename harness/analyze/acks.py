"""Acknowledgements: changes a team meant to make, so that a check, an alert or a report shows
them as acknowledged (with the reason) instead of as regressions.

The file (default benchmarks/acknowledgements.toml, asv.conf.json key
"harness_acknowledgements") holds entries like

    [[acknowledge]]
    commits = "3f2a9c1"          # one commit, or "A..B": the commits in B's history not in A's
    figure = "ms/token"          # a pattern (fnmatch) over the figure's names
    arm = "block3*"              # a pattern over the arm's name
    reason = "verify now re-checks the draft (PR 42): block3 +20% expected"
    by = "Ada"                   # optional: who; default the author of the commit that added it

An entry covers a change when one of the change's commits is among its commits and both
patterns match. A figure answers to its display name ("ms/token", "phase ms/round: verify"),
its id ("ms_per_token") and its asv benchmark name. Pure: ci/ackfile.py reads the file and
resolves the commits with git.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import msgspec

from harness.core.errors import UserError

KEYS = ("commits", "figure", "arm", "reason", "by")

# Display name -> id, for the figures a paired check judges.
FIGURE_IDS = {"ms/token": "ms_per_token", "ms/round": "ms_per_round"}


@dataclass(frozen=True)
class Ack:
    commits_spec: str
    figure: str
    arm: str
    reason: str
    commits: frozenset[str] = frozenset()    # full SHAs, resolved by the caller
    by: str = ""          # who acknowledged it: the entry's `by`, else its git author ("" unknown)
    on: str = ""          # when (YYYY-MM-DD): the date of the commit that added it ("" unknown)

    def covers(self, commits: Iterable[str], figure_names: Iterable[str], arm: str) -> bool:
        if not self.commits.intersection(commits):
            return False
        if not fnmatch.fnmatchcase(arm, self.arm):
            return False
        return any(fnmatch.fnmatchcase(n, self.figure) for n in figure_names)


class _File(msgspec.Struct):
    acknowledge: Any = []


class _Entry(msgspec.Struct, kw_only=True):
    """One [[acknowledge]] table, once its keys are checked."""
    commits: str
    reason: str
    figure: str = "*"
    arm: str = "*"
    by: str = ""


def parse(data: object, where: str) -> list[tuple[str, str, str, str, str]]:
    """(commits, figure, arm, reason, by) per entry, checked; one line naming the entry otherwise."""
    if not isinstance(data, dict) or set(data) - {"acknowledge"}:
        raise UserError(f"{where}: expected only [[acknowledge]] entries; see docs/history.md")
    entries = msgspec.convert(data, _File).acknowledge
    if not isinstance(entries, list):
        raise UserError(f"{where}: acknowledge must be a list of tables ([[acknowledge]])")
    out = []
    for i, e in enumerate(entries):
        at = f"{where}: acknowledge[{i}]"
        if not isinstance(e, dict):
            raise UserError(f"{at}: expected a table")
        unknown = sorted(set(e) - set(KEYS))
        if unknown:
            raise UserError(f"{at}: unknown key {unknown[0]!r} (known: {', '.join(KEYS)})")
        for k in ("commits", "reason"):
            if not isinstance(e.get(k), str) or not e[k].strip():
                raise UserError(f"{at}: {k} must be a non-empty string")
        for k in ("figure", "arm"):
            if not isinstance(e.get(k, "*"), str):
                raise UserError(f"{at}: {k} must be a string pattern")
        try:
            entry = msgspec.convert(e, _Entry)
        except msgspec.ValidationError:   # commits, reason, figure and arm are checked above
            raise UserError(f"{at}: by must be a string (who acknowledged the change)") from None
        out.append((entry.commits.strip(), entry.figure, entry.arm, entry.reason.strip(), entry.by.strip()))
    return out


def figure_names(figure: str, benchmark: str | None = None) -> list[str]:
    """Every name a pattern may use for a figure, given its display name ("ms/token", "phase
    ms/round: verify") or its id ("ms_per_token", "phase_ms_per_round:verify")."""
    display = {v: k for k, v in FIGURE_IDS.items()}
    names = [figure, FIGURE_IDS.get(figure, figure), display.get(figure, figure)]
    if figure.startswith("phase ms/round: "):
        names.append("phase_ms_per_round:" + figure.split(": ", 1)[1])
    if figure.startswith("phase_ms_per_round:"):
        names.append("phase ms/round: " + figure.split(":", 1)[1])
    # A work counter: its check figure and its nightly id (analyze/counters.py, asvbench's Counters).
    if figure.endswith(("/round (exact)", "/token (exact)")) and not figure.startswith("tokens/"):
        names.append("counter_per_round:" + figure.rsplit("/", 1)[0].replace(" ", "_"))
    if figure.startswith("counter_per_round:"):
        names.append(figure.split(":", 1)[1].replace("_", " ") + "/round (exact)")
    if benchmark:
        names.append(benchmark)
    return list(dict.fromkeys(names))


def find(acks: list[Ack], commits: Iterable[str], names: Iterable[str], arm: str) -> Ack | None:
    commits, names = list(commits), list(names)
    return next((a for a in acks if a.covers(commits, names, arm)), None)


def ack_line(a: Ack, on: str) -> str:
    """The line an alert it covers shows: "Acknowledged 2026-12-06 by Ada: <reason>"; `on`
    stands in for a date the entry does not carry."""
    return f"Acknowledged {a.on or on} by {a.by or 'an unknown author'}: {a.reason}"
