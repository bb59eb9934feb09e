"""What the session commands (run, check, baseline record) print when the runs are done, and
where: people's lines on stdout; with `--json` alone the JSON summary alone on stdout (people's
lines then go to stderr, or nowhere with --quiet); with `--json FILE` the JSON in FILE, written
atomically, and people's lines on stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from harness.core.errors import UserError
from harness.render import termsummary

SUMMARY_KIND = "harness.summary"
BASELINES_KIND = "harness.baselines.outcome"


@dataclass(frozen=True)
class Output:
    """How a session command reports."""

    json: str | None = None     # None, "-" (stdout) or the path of the JSON file
    quiet: bool = False         # no progress while the runs go (and, with the JSON on stdout, no lines for people)
    per_prompt: bool = False    # a line per prompt under each arm

    @property
    def json_on_stdout(self) -> bool:
        return self.json == "-"

    def console(self) -> Console | None:
        """Where people's lines go; None where they go nowhere (--json --quiet)."""
        if self.json_on_stdout:
            return None if self.quiet else Console(stderr=True, highlight=False, emoji=False)
        return Console(highlight=False, emoji=False)

    def check(self, kind: str, *taken: Path | None) -> None:
        """Before any run: one line if the JSON file cannot be written, would replace a file the
        harness did not write as this kind, or is one of the session's own files (`taken`)."""
        from harness.collect.files import check_output
        if self.json in (None, "-"):
            return
        p = Path(self.json)
        for t in taken:
            if t is not None and p.resolve() == Path(t).resolve():
                raise UserError(f"{p}: --json would write over the session's own {t.name}; pass another path")
        check_output(p, "JSON summary", own_kind=kind, writer="run")


def add_output_args(p: argparse.ArgumentParser, per_prompt: bool = True) -> None:
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="the machine-readable summary: alone on stdout (people's summary then on stderr), "
                        "or written to FILE (replaces only a summary the harness wrote)")
    p.add_argument("--quiet", action="store_true", help="no progress while the runs go")
    if per_prompt:
        p.add_argument("--per-prompt", action="store_true", help="a line per prompt under each arm")


def output_of(args: argparse.Namespace) -> Output:
    json_arg = getattr(args, "json", None)
    # `--json SUITE.toml` means the suite (argparse gave it to --json): a summary is no TOML file.
    if json_arg not in (None, "-") and json_arg.endswith(".toml") and getattr(args, "suite", "") is None:
        args.suite, json_arg = json_arg, "-"
    return Output(json=json_arg, quiet=bool(getattr(args, "quiet", False)),
                  per_prompt=bool(getattr(args, "per_prompt", False)))


def width(console: Console) -> int:
    return min(termsummary.WIDTH, console.width)


def say(console: Console | None, lines: list[Text] | list[str]) -> None:
    if console is None:
        return
    for line in lines:
        console.print(line, soft_wrap=True, markup=False)


def _finite(x: Any) -> Any:
    """Strict JSON: a non-finite number (an interval from one pair) becomes null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def emit_json(out: Output, doc: dict[str, Any]) -> None:
    """The JSON summary: alone on stdout, or written to its file atomically."""
    from harness.collect.files import write_json_atomic
    doc = _finite(doc)
    if out.json_on_stdout:
        sys.stdout.write(json.dumps(doc, sort_keys=True) + "\n")
        sys.stdout.flush()
    elif out.json is not None:
        try:
            write_json_atomic(Path(out.json), doc)
        except OSError as e:
            raise UserError(f"{out.json}: cannot write the JSON summary ({e.strerror or e}); "
                            "the record keeps everything: `harness run --resume RECORD --json FILE` "
                            "writes it again") from None
        print(f"harness: JSON summary in {out.json}", file=sys.stderr)


# --- a run session ---------------------------------------------------------------------

def verdict_doc(v: Any) -> dict[str, Any]:
    """One arm's verdict for machines: the typed outcome and the paired reading's figures (ratio:
    the arm's ms/token over classic's), with the words people read."""
    from harness.render import verdictwords as W
    r = v.reading
    return {"arm": v.arm, "outcome": v.outcome, "classic": v.classic,
            "ratio": None if r is None else r.ratio, "lo": None if r is None else r.lo,
            "hi": None if r is None else r.hi, "detectable": v.detectable,
            "pairs": None if r is None else r.n, "speed": W.speed(v) if v.judged else None,
            "cell": W.cell(v), "label": W.label(v), "shipping": v.shipping, "overrides": v.overrides,
            "marks": list(v.marks), "do_not_publish": v.do_not_publish, "tok_s": v.tok_s,
            "spread": v.spread, "runs": v.runs, "failed": v.failed}


def session_summary(record: Any) -> tuple[termsummary.SessionSummary, list[Any]]:
    """The analysis the summary renders: each arm judged, the per-prompt rows, what comes first."""
    from harness.analyze.contended import contention_lines, record_info
    from harness.analyze.summary import summarize, waiting_lines
    from harness.analyze.verdict import judge
    from harness.render.hostwords import set_aside_lines
    typed = record.data
    rows = summarize(typed)
    s = termsummary.SessionSummary(
        judgement=judge(typed), rows=rows, record_path=str(record.path),
        planned_runs=typed.planned_runs, recorded_runs=len(typed.runs),
        first=contention_lines(info := record_info(typed)) + set_aside_lines(info) + waiting_lines(typed),
        spread_limit=typed.suite.settings.spread_threshold)
    return s, rows


def summary_doc(record: Any, s: termsummary.SessionSummary, rows: list[Any]) -> dict[str, Any]:
    from harness.analyze.summary import machine_summary
    from harness.render.finding import verdict_sentence
    doc = machine_summary(record.data, rows, str(record.path))
    doc.update(finding=verdict_sentence(s.judgement), paired=s.judgement.paired_when,
               verdicts=[verdict_doc(v) for v in s.judgement.arms])
    return doc


def print_summary(record: Any, out: Output) -> None:
    """A finished (or interrupted and resumed) session's summary, where `out` says."""
    s, rows = session_summary(record)
    console = out.console()
    if console is not None:
        say(console, termsummary.summary_lines(s, width(console), out.per_prompt))
    emit_json(out, summary_doc(record, s, rows))
