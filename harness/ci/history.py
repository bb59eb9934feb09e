"""The nightly series of one host: change points (harness.analyze.changepoints), and alerts for new
ones, once each.

Series: every asv figure of the results directory (one benchmark at one parameter combination:
a figure of one arm) over the branch's first-parent history, oldest first, a point per commit
with results (its per-run samples). Each step found is matched against the acknowledgements
and against the alert state kept in the results repository (alerts/<machine>/state.json): a
step already alerted (same series, same direction, an overlapping commit range) is not
alerted again; an acknowledged one is listed with its reason and not alerted, and an alert filed
before its acknowledgement is marked acknowledged: a line in its Markdown ("Acknowledged <date>
by <who>: <reason>"), its state entry, and its feed entry's title and summary.

A new alert is a Markdown file (alerts/<machine>/<id>.md, usable as an issue body), an entry of
the Atom feed alerts/<machine>/feed.atom, and a run of the notification command, if one is
configured (asv.conf.json "harness_notify": argv, no shell; "{alert}" is replaced by the
Markdown file's path and "{title}" by the alert's title).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import msgspec

from harness.analyze import acks as ackmod
from harness.analyze.changepoints import ALPHA, MIN_AFTER, WINDOW, Point, SeriesResult, Step, analyze_series
from harness.analyze.design import share_text
from harness.analyze.series import Acknowledged, Alert, AlertState
from harness.ci.asvtool import AsvConfig, load_figures, result_commits
from harness.collect.files import write_text_atomic
from harness.core.errors import UserError
from harness.core.figures import PER_CLASSIC_STEP, is_exact
from harness.core.tomlfile import read_toml

NOTIFY_KEY = "harness_notify"


@dataclass(frozen=True)
class SeriesInfo:
    name: str            # asv's: "bench_engine.Decode.track_ms_per_token('classic')"
    benchmark: str
    arm: str             # the arm's name (its label without the override note)
    figure: str          # harness.core.figures id, "phase_ms_per_round:verify" for a phase
    unit: str | None


def series_info(name: str, benchmark: str, params: tuple[str, ...], unit: str | None) -> SeriesInfo:
    m = re.search(r"\.track_(\w+)$", benchmark)
    fid = m.group(1) if m else benchmark
    if fid in ("phase_ms_per_round", "counter_per_round") and len(params) > 1:
        fid = f"{fid}:{params[1]}"
    arm = params[0].split(" [", 1)[0] if params else ""
    return SeriesInfo(name, benchmark, arm, fid, unit)


def load_series(conf: AsvConfig, machine: str, commits: list[str]) -> tuple[dict[str, list[Point]],
                                                                              dict[str, SeriesInfo]]:
    """Points per series over `commits` (oldest first); commits without results are skipped."""
    have = result_commits(conf, machine)
    series: dict[str, list[Point]] = {}
    info: dict[str, SeriesInfo] = {}
    for c in commits:
        if c not in have:
            continue
        for name, f in load_figures(conf, machine, c).items():
            if f.failed or f.skipped:
                continue
            pool: Sequence[float | None] = f.samples or [f.value]
            xs = [float(x) for x in pool if x is not None]
            if not xs:
                continue
            series.setdefault(name, []).append(Point(c, tuple(xs)))
            info.setdefault(name, series_info(name, f.benchmark, f.params, f.unit))
    return series, info


@dataclass
class Found:
    """One step with its series and what became of it."""
    step: Step
    info: SeriesInfo
    threshold: float
    ack: ackmod.Ack | None = None
    alert_id: str | None = None        # set when alerted (now or earlier)
    new: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {**self.step.to_dict(), "arm": self.info.arm, "figure": self.info.figure, "unit": self.info.unit,
                "threshold": self.threshold, "acknowledged": self.ack.reason if self.ack else None,
                "alert_id": self.alert_id, "new": self.new}


@dataclass
class History:
    machine: str
    commits: int                        # commits in the branch's window
    series: int
    found: list[Found] = field(default_factory=list)
    unstable: list[tuple[str, str]] = field(default_factory=list)
    alpha: float = ALPHA

    def to_dict(self) -> dict[str, Any]:
        return {"machine": self.machine, "commits": self.commits, "series": self.series, "alpha": self.alpha,
                "window": WINDOW, "steps": [f.to_dict() for f in self.found],
                "unstable": [{"series": s, "why": w} for s, w in self.unstable]}


class SuiteThresholds(msgspec.Struct, kw_only=True):
    """What the change points read of the suite file's top level (suite_table): the relative change
    to detect, per figure id where given, and the temperature (exact figures at 0)."""
    threshold: float | None = None
    thresholds: dict[str, float] = {}
    temp: float | None = None


def detect(conf: AsvConfig, machine: str, commits: list[str], suite: dict[str, Any],
           acks: list[ackmod.Ack] | None = None, alpha: float = ALPHA) -> History:
    """Change points of every series over `commits` (oldest first), acknowledgements applied;
    suite: suite_table's."""
    series, info = load_series(conf, machine, commits)
    table = msgspec.convert(suite, SuiteThresholds)
    default = table.threshold or 0.10
    thresholds = {n: float(table.thresholds.get(i.figure.split(":", 1)[0], default)) for n, i in info.items()}
    exact = {n for n, i in info.items() if is_exact(i.figure, table.temp or 0.0)}
    results: list[SeriesResult] = analyze_series(series, commits, thresholds, exact, alpha)
    h = History(machine, len(commits), len(series), alpha=alpha)
    for r in results:
        if r.unstable:
            h.unstable.append((r.series, r.unstable))
        for s in r.steps:
            i = info[r.series]
            names = ackmod.figure_names(i.figure, i.benchmark) + [r.series]
            h.found.append(Found(s, i, thresholds[r.series], ackmod.find(acks or [], s.commits, names, i.arm)))
    return h


# --- alert state ------------------------------------------------------------------------

def _state_path(alerts_dir: Path) -> Path:
    return alerts_dir / "state.json"


def load_state(alerts_dir: Path) -> AlertState:
    p = _state_path(alerts_dir)
    if not p.exists():
        return AlertState()
    try:
        return msgspec.json.decode(p.read_bytes(), type=AlertState)
    except msgspec.DecodeError as e:   # a ValidationError too
        raise UserError(f"{p}: not an alert state file ({e}); restore it from the results "
                        "repository's history") from None


def _write_state(alerts_dir: Path, state: AlertState) -> None:
    write_text_atomic(_state_path(alerts_dir), json.dumps(msgspec.to_builtins(state), indent=1) + "\n")


def alert_id(f: Found) -> str:
    """One alert per change: its commit range and direction (every series it moved is listed)."""
    key = f"{f.step.direction}|{f.step.last_before}|{f.step.first_after}"
    return hashlib.sha256(key.encode()).hexdigest()[:12]


def _same_step(a: Alert, f: Found, order: dict[str, int]) -> bool:
    """An earlier alert of the same series and direction whose range overlaps this step's."""
    if f.step.series not in a.series or a.direction != f.step.direction:
        return False
    lo, hi = order.get(a.last_before), order.get(a.first_after)
    if lo is None or hi is None:
        return a.first_after == f.step.first_after
    return order[f.step.last_before] < hi and lo < order[f.step.first_after]


def _earlier(state: AlertState, f: Found, order: dict[str, int]) -> Alert | None:
    return next((a for a in state.alerts if _same_step(a, f, order)), None)


def file_alerts(h: History, commits: list[str], alerts_dir: Path, notify: list[str] | None = None,
                now: _dt.datetime | None = None) -> list[dict[str, Any]]:
    """Alert each step not alerted before (acknowledged ones never): one alert per change (commit
    range and direction) listing every series it moved; write the state, each new alert's
    Markdown and the feed; run the notification command once per new alert. Returns the new
    alerts as the nightly's summary lists them (the state's fields and the Markdown's "file")."""
    now = now or _dt.datetime.now(_dt.timezone.utc)
    alerts_dir.mkdir(parents=True, exist_ok=True)
    state = load_state(alerts_dir)
    order = {c: i for i, c in enumerate(commits)}
    _mark_acknowledged(h, state, order, alerts_dir, now)
    groups: dict[str, list[Found]] = {}
    for f in h.found:
        if f.ack is not None:
            continue
        old = _earlier(state, f, order)
        if old is not None:
            f.alert_id = old.id
            continue
        f.alert_id, f.new = alert_id(f), True
        groups.setdefault(f.alert_id, []).append(f)
    fresh: list[Alert] = []
    for aid, fs in groups.items():
        known = state.find(aid)
        if known is not None:        # the same change, more series moved: listed, not alerted again
            known.series = sorted(set(known.series) | {f.step.series for f in fs})
            for f in fs:
                f.new = False
            continue
        write_text_atomic(alerts_dir / f"{aid}.md", alert_markdown(fs, h))
        s = fs[0].step
        fresh.append(Alert(id=aid, series=sorted(f.step.series for f in fs), direction=s.direction,
                           last_before=s.last_before, first_after=s.first_after,
                           title=alert_title(fs[0], len(fs)), at=now.isoformat(timespec="seconds")))
    state.alerts += fresh
    _write_state(alerts_dir, state)
    write_feed(alerts_dir, h.machine, state)
    for a in fresh:
        notify_one(notify, alerts_dir / f"{a.id}.md", a.title)
    return [{**msgspec.to_builtins(a), "file": str(alerts_dir / f"{a.id}.md")} for a in fresh]


def acknowledge_alerts(h: History, commits: list[str], alerts_dir: Path,
                       now: _dt.datetime | None = None) -> list[str]:
    """Mark the alerts already filed that an acknowledgement now covers (file_alerts does this
    too, each night), and files nothing new; the ids marked."""
    if not _state_path(alerts_dir).exists():
        return []
    state = load_state(alerts_dir)
    marked = _mark_acknowledged(h, state, {c: i for i, c in enumerate(commits)}, alerts_dir,
                                now or _dt.datetime.now(_dt.timezone.utc))
    if marked:
        _write_state(alerts_dir, state)
        write_feed(alerts_dir, h.machine, state)
    return marked


def _mark_acknowledged(h: History, state: AlertState, order: dict[str, int], alerts_dir: Path,
                       now: _dt.datetime) -> list[str]:
    """Each acknowledged step's earlier alert, not marked yet: its state entry records the
    acknowledgement, and its Markdown gains the line under its heading (the rest kept as it is:
    the file may be an issue body someone edited)."""
    marked = []
    for f in h.found:
        old = _earlier(state, f, order) if f.ack else None
        if old is None or f.ack is None:
            continue
        f.alert_id = old.id
        mark = old.acknowledged = old.acknowledged or Acknowledged()
        if f.step.series in mark.series:
            continue
        mark.series = sorted(set(mark.series) | {f.step.series})
        if mark.line is not None:       # a second series of the alert, covered too
            continue
        mark.line = ackmod.ack_line(f.ack, now.date().isoformat())
        mark.reason, mark.by, mark.commits = f.ack.reason, f.ack.by, f.ack.commits_spec
        mark.at = now.isoformat(timespec="seconds")
        _add_ack_line(alerts_dir / f"{old.id}.md", mark.line)
        marked.append(old.id)
    return marked


def _add_ack_line(path: Path, line: str) -> None:
    """The acknowledgement line as its own paragraph right under the alert's heading."""
    if not path.exists():
        return
    text = path.read_text(encoding="utf-8")
    if line in text:
        return
    lines = text.split("\n")
    at = next((i + 1 for i, x in enumerate(lines) if x.startswith("## ")), 0)
    write_text_atomic(path, "\n".join(lines[:at] + ["", line] + lines[at:]))


def confidence_text(c: float | None) -> str:
    """1 - the adjusted p, never rounded up to a certainty it is not."""
    if c is None:
        return "-"
    return ">99.9%" if c > 0.999 else f"{c:.1%}"


def alert_title(f: Found, series: int = 1) -> str:
    s = f.step
    more = f" and {series - 1} more series" if series > 1 else ""
    return (f"{s.direction}: {f.info.arm} {f.info.figure} {s.change:+.1%}{more} at {s.first_after[:8]}"
            + (f" (range {s.last_before[:8]}..{s.first_after[:8]})" if len(s.commits) > 1 else ""))


def alert_markdown(fs: list[Found], h: History) -> str:
    """The alert for one change: the commits that may hold it, then every series it moved."""
    first = max(fs, key=lambda f: abs(math.log(f.step.ratio)) if f.step.ratio > 0 else 0.0)
    s = first.step
    lines = [f"<!-- harness-alert:{h.machine}:{first.alert_id} -->", f"## {alert_title(first, len(fs))}", "",
             f"Host {h.machine}. First commit after the change `{s.first_after}`, last before it "
             f"`{s.last_before}`; the commits that may hold it ({len(s.commits)}): "
             f"{', '.join(c[:8] for c in s.commits)}.", "",
             "| series | unit | before | after | change | threshold | how found | asv's step fit |",
             "|---|---|---|---|---|---|---|---|"]
    for f in sorted(fs, key=lambda f: -abs(math.log(f.step.ratio)) if f.step.ratio > 0 else 0.0):
        st = f.step
        how = "exact (deterministic at temperature 0)" if st.exact else f"confidence {confidence_text(st.confidence)}"
        asv = (f"{st.asv_segments[0]:.4g} -> {st.asv_segments[1]:.4g}" if st.asv_segments else "no boundary here")
        lines.append(f"| `{st.series}` | {f.info.unit or '-'} | {st.before:.4g} | {st.after:.4g} | "
                     f"{st.change:+.1%} | {share_text(f.threshold)} | {how} | {asv} |")
    lines += ["", f"Lower is better for every figure. Found by a t test of the commits' medians (log scale), up to "
              f"{WINDOW} measured commits before each boundary against up to {WINDOW} after it (at least "
              f"{MIN_AFTER}), Benjamini-Hochberg over every boundary of all {h.series} series of this host at a "
              f"false-discovery rate of {share_text(h.alpha)}; exact figures change at the first differing commit. "
              "\"asv's step fit\" is what asv's Regressions page draws there.", ""]
    per_classic = sorted({f.info.figure for f in fs if f.info.figure in PER_CLASSIC_STEP})
    if per_classic:
        # A slower classic arm makes a round cost fewer classic steps: an "improvement" of the arm
        # that is only its divisor's regression.
        lines += [f"{', '.join(per_classic)} is divided by the classic (block 1) arm's ms/token of the same "
                  "session: it moves when classic's own time moves, the other way. Read it beside classic's "
                  "series at this commit before calling it a change of this arm.", ""]
    lines.append(f"To find the commit: `harness bisect {s.last_before[:12]} {s.first_after[:12]} --arm "
                 f"{first.info.arm} --figure {first.info.figure}`. If the change was meant, acknowledge it in "
                 "benchmarks/acknowledgements.toml (docs/history.md).")
    return "\n".join(lines) + "\n"


def write_feed(alerts_dir: Path, machine: str, state: AlertState) -> None:
    """An Atom feed with one entry per alert ever filed (newest first)."""
    ns = "http://www.w3.org/2005/Atom"
    ET.register_namespace("", ns)
    feed = ET.Element(f"{{{ns}}}feed")
    ET.SubElement(feed, f"{{{ns}}}title").text = f"benchmark alerts on {machine}"
    ET.SubElement(feed, f"{{{ns}}}id").text = f"urn:harness:alerts:{machine}"
    alerts = sorted(state.alerts, key=lambda a: a.at, reverse=True)
    latest = max((a.updated for a in alerts), default="1970-01-01T00:00:00+00:00")
    ET.SubElement(feed, f"{{{ns}}}updated").text = latest
    for a in alerts:
        e = ET.SubElement(feed, f"{{{ns}}}entry")
        ET.SubElement(e, f"{{{ns}}}id").text = f"urn:harness:alert:{machine}:{a.id}"
        ET.SubElement(e, f"{{{ns}}}title").text = a.feed_title
        ET.SubElement(e, f"{{{ns}}}updated").text = a.updated
        if a.acknowledged and a.acknowledged.line:
            ET.SubElement(e, f"{{{ns}}}summary").text = a.acknowledged.line
        body = alerts_dir / f"{a.id}.md"
        content = ET.SubElement(e, f"{{{ns}}}content", {"type": "text"})
        content.text = body.read_text(encoding="utf-8") if body.exists() else a.title
    text = ET.tostring(feed, encoding="unicode", xml_declaration=False)
    write_text_atomic(alerts_dir / "feed.atom", "<?xml version='1.0' encoding='utf-8'?>\n" + text)


def notify_one(argv: list[str] | None, alert: Path, title: str) -> None:
    """The configured command, once per new alert; a failing one warns and the night goes on."""
    if not argv:
        return
    cmd = [a.replace("{alert}", str(alert)).replace("{title}", title) for a in argv]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            print(f"harness: warning: the notification command exited {r.returncode}: "
                  f"{(r.stderr or r.stdout).strip()[-300:]}", file=sys.stderr)
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"harness: warning: the notification command could not run: {e}", file=sys.stderr)


def suite_table(path: Path) -> dict[str, Any]:
    """The suite file's top-level settings as written (threshold, thresholds, temp)."""
    return read_toml(path, "the suite")


def notify_command(conf: AsvConfig) -> list[str] | None:
    argv = conf.data.get(NOTIFY_KEY)
    if argv is None:
        return None
    if not (isinstance(argv, list) and argv and all(isinstance(a, str) for a in argv)):
        raise UserError(f"{conf.path}: {NOTIFY_KEY} must be a list of strings (argv; no shell)")
    return argv
