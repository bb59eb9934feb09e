"""The session summary people read in a terminal: the finding first, then one line per arm
(median tok/s, spread, flags, the paired verdict against classic), the label footnotes, a
legend, and where the record is. Fits `width` columns (80 by default).

It renders a typed analysis (harness.analyze.verdict's Judgement, the per-prompt rows of
harness.analyze.summary) and does no analysis of its own; every verdict is verdictwords', and
the finding is the report's own first sentence (harness.render.finding).
"""

from __future__ import annotations

import shlex
import textwrap
from dataclasses import dataclass, field

from rich.text import Text

from harness.analyze import spoiled
from harness.analyze.design import share_text
from harness.analyze.summary import ArmSummary
from harness.analyze.verdict import ArmVerdict, Judgement
from harness.render import hostwords
from harness.render import verdictwords as W
from harness.render.finding import verdict_sentence

WIDTH = 80
NAME_CAP = 24    # a longer arm name takes a line of its own, its figures on the next
GAP = "  "

# A mark of verdict.ArmVerdict.marks as a one-character code, and its words in the legend.
FLAGS = {"unstable": ("U", "unstable: a prompt's spread over {spread}"),
         "contended": ("C", "contended: other work used the machine during some runs"),
         "1 run": ("1", "a prompt with one run"),
         "failed": ("F", "runs failed"),
         "quiet timeout": ("T", "the quiet wait timed out"),
         "quick": ("Q", "quick session (smoke test)"),
         "no cooldown": ("N", "no cooldown between runs"),
         # Runs set aside for their host (analyze.spoiled), left out of the verdicts.
         **{m: (c, f"{m}: {hostwords.LEGEND[m]}") for m, c in (
             (spoiled.BACKUP, "B"), (spoiled.BATTERY, "P"), (spoiled.THERMAL, "H"), (spoiled.GPU_BUSY, "G"))}}
DO_NOT_PUBLISH = ("!", "do not publish these figures")


@dataclass(frozen=True)
class SessionSummary:
    """What the terminal summary of one session shows, gathered from the analysis."""

    judgement: Judgement
    rows: list[ArmSummary]          # per arm and prompt (description only: they never judge)
    record_path: str
    planned_runs: int | None = None  # runs the plan had, warm-ups included (None: not known)
    recorded_runs: int = 0          # runs the record holds, warm-ups included
    # Lines said before the finding: runs contended past the suite's share, waiting that took
    # the session (harness.analyze.contended / summary give them).
    first: list[str] = field(default_factory=list)
    spread_limit: float = 0.04      # the suite's spread_threshold ("unstable" past it)


def wrap(text: str, width: int, indent: str = "  ") -> list[str]:
    """`text` in lines of at most `width` columns, the continuation lines indented."""
    return textwrap.wrap(text, width=width, subsequent_indent=indent, break_on_hyphens=False,
                         break_long_words=True) or [""]


def pack(head: str, items: list[str], width: int, indent: str = "  ") -> list[str]:
    """head and items, "; "-separated, in lines of at most `width`, breaking between items (an
    item longer than a line is wrapped on its own)."""
    lines = [head]
    for i, item in enumerate(items):
        piece = item + (";" if i < len(items) - 1 else "")
        if len(lines[-1]) + 1 + len(piece) <= width:
            lines[-1] += " " + piece
        else:
            lines += wrap(indent + piece, width, indent)
    return lines


def warnings(s: SessionSummary, width: int) -> list[str]:
    """What to know before any figure: an incomplete record, failed runs, contention, waiting."""
    j, out = s.judgement, []
    if not j.complete:
        of = f" of {s.planned_runs} planned" if s.planned_runs else ""
        out += wrap(f"incomplete: {s.recorded_runs}{of} runs recorded; finish it with "
                    f"harness run --resume {shlex.quote(s.record_path)}", width)
    if j.failed:
        out += wrap(f"{j.failed} of {j.measured} measured runs failed (flag F); the record keeps "
                    "their errors", width)
    for line in s.first:
        out += wrap(line, width, indent="    " if line.startswith("  ") else "  ")
    return out


def _flags(v: ArmVerdict) -> str:
    codes = "".join(FLAGS[m][0] for m in v.marks if m in FLAGS)
    return (DO_NOT_PUBLISH[0] if v.do_not_publish else "") + codes


def _spread(v: ArmVerdict, rows: list[ArmSummary]) -> str:
    """The arm's widest per-prompt spread; "1 run" where no prompt had two runs to spread."""
    if v.spread is None or all(r.runs < 2 for r in rows):
        return "1 run" if any(r.runs == 1 for r in rows) else "-"
    return W.pct(v.spread)


def _tok_s(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


@dataclass
class _Columns:
    """The rows' columns: the name's and the flags' widths as the arms need, tok/s 5 and spread
    6 wide, the verdict the rest of `width`."""

    name: int
    flags: int
    width: int

    @property
    def verdict(self) -> int:
        return max(20, self.width - self.name - 5 - 6 - self.flags - 4 * len(GAP))

    def line(self, name: str, tok_s: str, spread: str, flags: str, verdict: str) -> list[str]:
        """One row; a name past its column gets a line of its own, a long verdict wraps under
        its column."""
        out: list[str] = []
        if len(name) > self.name:
            out.append(name)
            name = ""
        cells = textwrap.wrap(verdict, self.verdict, break_on_hyphens=False) or [""]
        head = GAP.join([name.ljust(self.name), tok_s.rjust(5), spread.rjust(6), flags.ljust(self.flags)])
        out.append(f"{head}{GAP}{cells[0]}".rstrip())
        out += [" " * (len(head) + len(GAP)) + c for c in cells[1:]]
        return out


def _notes(j: Judgement) -> tuple[dict[str, str], list[str]]:
    """Each arm's label mark ("*1", "" for a shipping arm) and the footnote texts, in order."""
    texts: list[str] = []
    marks: dict[str, str] = {}
    for v in j.arms:
        if v.shipping:
            marks[v.arm] = ""
            continue
        text = W.label(v)
        if text not in texts:
            texts.append(text)
        marks[v.arm] = f" *{texts.index(text) + 1}"
    return marks, texts


def arm_lines(s: SessionSummary, width: int, per_prompt: bool = False) -> list[str]:
    """The header and one row per arm (and per prompt with per_prompt), then the footnotes."""
    j = s.judgement
    marks, notes = _notes(j)
    by_arm = {v.arm: [r for r in s.rows if r.arm == v.arm] for v in j.arms}
    names = [v.arm + marks[v.arm] for v in j.arms]
    if per_prompt:
        names += ["  " + r.prompt for r in s.rows]
    flags = max([5, *(len(_flags(v)) for v in j.arms)])
    # The verdict keeps 20 columns at least: a name past what is left gets a line of its own.
    cap = min(NAME_CAP, width - 5 - 6 - flags - 4 * len(GAP) - 20)
    cols = _Columns(name=max([3, *(len(n) for n in names if len(n) <= cap)]), flags=flags, width=width)
    out = cols.line("arm", "tok/s", "spread", "flags", "vs classic (paired)")
    for v, name in zip(j.arms, names):
        out += cols.line(name, _tok_s(v.tok_s), _spread(v, by_arm[v.arm]), _flags(v), W.cell(v))
        if per_prompt:
            for r in by_arm[v.arm]:
                runs = f"{r.runs} runs" + (f", {r.failed} failed" if r.failed else "")
                spread = "1 run" if r.runs == 1 else ("-" if r.spread is None else W.pct(r.spread))
                out += cols.line("  " + r.prompt, _tok_s(r.tok_s_median), spread, "", runs)
    for i, text in enumerate(notes):
        out += wrap(f"*{i + 1} {text}", width, indent="   ")
    return out


def legend(s: SessionSummary, width: int) -> list[str]:
    """The flags that appear, then what each figure includes."""
    j = s.judgement
    seen = {m for v in j.arms for m in v.marks if m in FLAGS}
    said = [f"{DO_NOT_PUBLISH[0]} {DO_NOT_PUBLISH[1]}"] if any(v.do_not_publish for v in j.arms) else []
    said += [f"{code} {words.format(spread=share_text(s.spread_limit))}" for m, (code, words) in FLAGS.items() if m in seen]
    prompts = len({r.prompt for r in s.rows})
    out = pack("flags:", said, width) if said else []
    over = f", geometric mean over {prompts} prompts" if prompts > 1 else ""
    widest = "the widest prompt's " if prompts > 1 else ""
    out += wrap(f"tok/s: decode, median per prompt{over}. spread: {widest}(max - min) / median. "
                "vs classic: classic's ms/token over the arm's (above 1x: faster), paired by prompt "
                f"and repetition, judged {j.paired_when}, with its interval.", width)
    return out


def where(path: str, width: int) -> list[str]:
    """One line with the command that renders the record's report and its figures beside it (two
    if too long): without --out a report goes to stdout, figures left out."""
    md = path[:-5] + ".md" if path.endswith(".json") else path + ".md"
    cmd = f"harness report {shlex.quote(path)} --out {shlex.quote(md)}"
    line = f"full report: {cmd}"
    if len(line) <= width:
        return [line]
    # A shell line continuation keeps it one command to copy.
    return ["full report, with figures:", f"  harness report {shlex.quote(path)} \\", f"    --out {shlex.quote(md)}"]


def summary_lines(s: SessionSummary, width: int = WIDTH, per_prompt: bool = False) -> list[Text]:
    """The whole summary, each line at most `width` columns (a path longer than that aside)."""
    first = warnings(s, width)
    out = [Text(line, style="yellow") for line in first]
    out += [Text(line, style="bold") for line in wrap(verdict_sentence(s.judgement), width)]
    out += [Text(line) for line in arm_lines(s, width, per_prompt)]
    out += [Text(line, style="dim") for line in legend(s, width)]
    out += [Text(line) for line in where(s.record_path, width)]
    return out
