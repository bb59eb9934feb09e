"""The words for runs set aside for their host (harness.analyze.spoiled): the reason codes'
legend, and the lines the PR comment and the terminal say before any figure: each run set
aside is left out of the verdicts and still counts towards the contended share. The same words in
every output; the report's flags table takes its row from `reasons_text`."""

from __future__ import annotations

import textwrap
from collections.abc import Iterable

from harness.analyze import spoiled
from harness.analyze.contended import SidesContention

# Each reason code's words: what the host was doing when the run started.
LEGEND = {spoiled.BACKUP: "a backup was running",
          spoiled.BATTERY: "the host ran on battery power",
          spoiled.THERMAL: "thermal pressure above nominal",
          spoiled.GPU_BUSY: "another process used the GPU just before or after"}
WIDTH = 80
# What a set-aside run does: its timings enter no verdict (analyze.spoiled.usable).
LEFT_OUT = "left out of the verdicts"


def legend(codes: Iterable[str]) -> str:
    """"backup: a backup was running; battery: the host ran on battery power" for these codes."""
    return "; ".join(f"{c}: {LEGEND.get(c, c)}" for c in codes)


def reasons_text(codes: Iterable[str]) -> str:
    """The report's flag for one group of runs: "set aside (battery, thermal): the host ran on
    battery power; thermal pressure above nominal; left out of the verdicts; the row is do not
    publish" (analyze.summary marks the arm's row as for a contended run)."""
    cs = list(codes)
    return (f"set aside ({', '.join(cs)}): " + "; ".join(LEGEND.get(c, c) for c in cs)
            + f"; {LEFT_OUT}; the row is do not publish")


def set_aside_lines(info: SidesContention | None, width: int = WIDTH) -> list[str]:
    """From analyze.contended.sides_info's set_aside: e.g.
    "set aside for the host: 12 of 24 runs of head (battery 12), 3 of 24 runs of base
    (gpu-busy 3), left out of the verdicts (docs/lab-hosts.md); battery: the host ran on
    battery power; ...", wrapped to `width`; [] when no run was set aside."""
    if info is None or not info.set_aside:
        return []
    parts, codes = [], []
    for name, h in info.set_aside.items():
        side = info.sides.get(name)
        counted = ", ".join(f"{c} {n}" for c, n in h.reasons.items())
        parts.append(f"{h.runs} of {side.runs} runs of {name} ({counted})" if side and side.runs
                     else f"{h.runs} runs of {name} ({counted})")
        codes += [c for c in h.reasons if c not in codes]
    order = [c for c in spoiled.REASONS if c in codes]
    text = f"set aside for the host: {', '.join(parts)}, {LEFT_OUT} (docs/lab-hosts.md); {legend(order)}"
    return textwrap.wrap(text, width=width, subsequent_indent="  ", break_on_hyphens=False)
