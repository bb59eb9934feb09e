"""`harness baseline record SUITE`: run each arm twice and store its output where both agree."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness.cli.output import BASELINES_KIND, Output, add_output_args, emit_json, output_of, say, width
from harness.cli.session import cannot_write, identity_session, new_session

if TYPE_CHECKING:
    from harness.analyze.identity import BaselineOutcome

NAME = "baseline"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse.ArgumentParser:
    b = sub.add_parser("baseline", help="record arms' outputs as their own baselines")
    bsub = b.add_subparsers(dest="baseline_command", metavar="ACTION", required=True)
    br = bsub.add_parser("record", help="run each arm twice and store outputs where both agree",
                         epilog="exit status: 0 every baseline stored, updated or unchanged; 1 an "
                                "INCONCLUSIVE key (the two runs disagree, or failed) or an existing, "
                                "different baseline kept because --update was not given")
    br.add_argument("suite")
    br.add_argument("--update", action="store_true", help="replace differing baselines (old ones kept in history)")
    br.add_argument("--baselines", help="baselines file (default: baselines/<host>.json)")
    br.add_argument("--record", help="record path for the baseline session")
    br.add_argument("--yes", action="store_true",
                    help="run a plan above the bounds (10,000 runs, or an estimated 24 h); one no session finishes (over 1,000,000 runs, or a year) is refused even so")
    add_output_args(br, per_prompt=False)
    return b


def run(args: argparse.Namespace) -> int:
    """Run each arm twice per prompt and store the output where both runs agree."""
    out = output_of(args)
    suite, record_path, baselines = identity_session(args, 2, "baseline")
    out.check(BASELINES_KIND, record_path, baselines)
    outcomes: list[BaselineOutcome] = []
    # The baselines are stored under the session's locks; an interrupted session's record says
    # where they go and whether to --update, so `harness run --resume` stores them (cli/run.py).
    record = new_session(args.invocation, suite, record_path, baselines,
                         "baseline", update=bool(args.update),
                         then=lambda rec: outcomes.extend(store_baselines(rec, baselines, bool(args.update))),
                         yes=args.yes, quiet=out.quiet)
    return show(outcomes, baselines, record, out)


def store_baselines(record: Any, baselines: Path, update: bool) -> list[BaselineOutcome]:
    """Store a finished baseline session's outputs in `baselines` (its lock held), then mark the
    record so a resume does not store them again; a failed write is one line saying how to finish."""
    from harness.analyze.identity import record_baselines
    from harness.collect.baselines import BaselineStore
    from harness.collect.record import now_iso
    store = BaselineStore.load(baselines)   # re-read: the file may have changed since the session began
    outcomes = record_baselines(record.data, store.entries, now_iso(), update=update)
    for o in outcomes:
        if o.entry is not None:
            store.put(o.key, o.entry)
    try:
        if any(o.status in ("stored", "updated") for o in outcomes):
            store.save()
    except OSError as e:
        # Nothing is lost: the record holds every run, and its resume stores them again.
        raise cannot_write(e, record.path, len(record.runs), "baselines", baselines) from None
    record.note_baselines_stored(baselines)
    try:
        record.write()
    except OSError as e:
        raise cannot_write(e, record.path, len(record.runs)) from None
    return outcomes


def show(outcomes: list[BaselineOutcome], baselines: Path, record: Any, out: Output | None = None) -> int:
    """A line per key with its outcome (and why, where it was not stored), or the JSON; the exit
    status (1: a key inconclusive or kept differing)."""
    from harness.render.termsummary import where, wrap
    out = out or Output()
    console = out.console()
    if console is not None:
        w = width(console)
        counts: dict[str, int] = {}
        for o in outcomes:
            counts[o.status] = counts.get(o.status, 0) + 1
        said = ", ".join(f"{n} {st.replace('_', ' ')}" for st, n in counts.items()) or "nothing to store"
        lines = wrap(f"baselines ({baselines}): {said}", w)
        for o in outcomes:
            status = o.status.upper() if o.status == "inconclusive" else o.status
            lines += wrap(f"  {status} {o.key}" + (f": {o.detail}" if o.detail else ""), w, indent="    ")
        say(console, lines + where(str(record.path), w))
    emit_json(out, {"kind": BASELINES_KIND, "baselines": str(baselines), "record": str(record.path),
                    "outcomes": [{"key": o.key, "status": o.status, "detail": o.detail} for o in outcomes]})
    return 0 if all(o.status in ("stored", "updated", "unchanged") for o in outcomes) else 1
