"""What the harness's dashboard shows, as typed data: per host and arm, ms/token per commit
with the judgement of that commit's record (harness.analyze.verdict), and the nightly's change
points and alerts with the acknowledgements that cover them.

Pure: the callers (harness.ci.site) find and load the records, the alert state and the
acknowledgements; the renderer (harness.render.dashboard) draws what this module returns.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from harness.analyze import acks as ackmod
from harness.analyze import spoiled
from harness.analyze.verdict import DECLINED, ArmVerdict, judge
from harness.core.runs import RecordData, as_record
from harness.core.schema import Record, Run

MS_PER_TOKEN = "ms_per_token"
STATE_VERSION = 1


# --- what the nightly keeps of a host's changes (harness.ci.history writes them) --------------

class Acknowledged(msgspec.Struct, kw_only=True, omit_defaults=True):
    """An acknowledgement that covers an alert filed before it (benchmarks/acknowledgements.toml)."""
    series: list[str] = []       # the alert's series it covers
    line: str | None = None      # "Acknowledged <date> by <who>: <reason>", as added to the Markdown
    reason: str | None = None
    by: str | None = None
    commits: str | None = None   # the acknowledgement's commits, as written
    at: str | None = None        # when the alert was marked (ISO 8601)


class Alert(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One alert as the state file keeps it: one change (commit range and direction) and every
    series it moved."""
    id: str
    series: list[str]
    direction: str
    last_before: str
    first_after: str
    title: str
    at: str                      # filed (ISO 8601)
    acknowledged: Acknowledged | None = None

    @property
    def updated(self) -> str:
        """Filed, or acknowledged since: feed readers show the entry again."""
        ack = self.acknowledged.at if self.acknowledged and self.acknowledged.at else ""
        return max(self.at, ack)

    @property
    def feed_title(self) -> str:
        """The title, "acknowledged: " ahead of it once an acknowledgement covers it."""
        return ("acknowledged: " if self.acknowledged and self.acknowledged.line else "") + self.title


class AlertState(msgspec.Struct):
    """alerts/<machine>/state.json: every alert ever filed for the host."""
    version: int = STATE_VERSION
    alerts: list[Alert] = []

    def find(self, alert_id: str) -> Alert | None:
        return next((a for a in self.alerts if a.id == alert_id), None)


class NightStep(msgspec.Struct, kw_only=True):
    """A step of the nightly's last night, as its changes.json lists it (harness.ci.history.Found)."""
    series: str
    last_before: str
    first_after: str
    direction: str
    ratio: float = 1.0           # after / before
    arm: str | None = None
    figure: str | None = None    # the figure id
    alert_id: str | None = None
    acknowledged: str | None = None   # the acknowledgement's reason


@dataclass(frozen=True)
class Commit:
    """One measured commit of a host: its record and where that record's page is."""

    sha: str                     # the full (or as long as known) commit id
    when: str                    # the record's creation time (ISO 8601): the series' order
    record: str                  # the record's file name
    page: str                    # the record's rendered page, relative to the site's root
    verdicts: tuple[ArmVerdict, ...]


@dataclass(frozen=True)
class SeriesPoint:
    """One commit of one arm's series."""

    commit: str
    when: str
    ms_per_token: float          # median over the runs a verdict may use (analyze.spoiled.usable)
    runs: int                    # how many runs that median is of
    verdict: ArmVerdict          # the judgement of this arm in this commit's record
    page: str                    # the commit's record page (relative to the site's root)

    @property
    def declined(self) -> bool:
        """The arm decoded classic on this commit: its point is classic decode's, not a speculative one."""
        return self.verdict.outcome == DECLINED

    @property
    def contended(self) -> bool:
        return "contended" in self.verdict.marks


@dataclass(frozen=True)
class Change:
    """A change point the nightly found or alerted, with what became of it."""

    series: str                  # asv's series name
    arm: str
    figure: str                  # the benchmark's figure id ("ms_per_token", "phase_ms_per_round:verify")
    direction: str               # "regression" or "improvement"
    last_before: str
    first_after: str
    title: str
    change: float | None = None  # after / before - 1, where the nightly stored it
    alert_id: str | None = None  # None: never alerted (acknowledged before it was found)
    alert_file: str | None = None  # the alert's Markdown, relative to the site's root
    at: str | None = None        # when alerted
    acknowledged: str | None = None   # the acknowledgement's reason; None: not acknowledged

    @property
    def figure_name(self) -> str:
        """The figure as the acknowledgements file names it: "ms/token", "phase ms/round: verify"."""
        if self.figure.startswith("phase_ms_per_round:"):
            return "phase ms/round: " + self.figure.split(":", 1)[1]
        return {v: k for k, v in ackmod.FIGURE_IDS.items()}.get(self.figure, self.figure)


@dataclass(frozen=True)
class ArmSeries:
    """One arm on one host: its points, oldest first, and the latest commit's judgement."""

    host: str
    arm: str
    points: tuple[SeriesPoint, ...]
    changes: tuple[Change, ...] = ()   # those of this arm's ms/token series

    @property
    def latest(self) -> ArmVerdict:
        return self.points[-1].verdict

    @property
    def declined(self) -> bool:
        return self.points[-1].declined


@dataclass(frozen=True)
class HostView:
    """One host (asv machine): its arms, its commits (newest first) and its changes."""

    name: str
    slug: str                    # the host's file name on the site
    arms: tuple[ArmSeries, ...]
    commits: tuple[Commit, ...]
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True)
class SiteData:
    hosts: tuple[HostView, ...]
    asv_index: str = "../index.html"   # asv's own dashboard, relative to the harness pages
    asv_benchmark: str | None = None   # asv's ms/token benchmark name, for links to its graph
    errors: tuple[str, ...] = field(default=())   # records that could not be read, one line each


def slug(name: str) -> str:
    """A file name for a host or arm: letters, digits, '.', '_' and '-' only."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-") or "host"


def commit_of(record: Record) -> str | None:
    """The measured commit, from the record's host section (harness.collect.provenance's repo)."""
    commit = record.host.repo.commit
    return None if commit == "unknown" else commit


def commit_view(record: RecordData, name: str, page: str, sha: str | None = None) -> Commit:
    """A loaded record as one commit of a host (judged once, here)."""
    typed = as_record(record)
    return Commit(sha=sha or commit_of(typed) or "unknown", when=typed.created,
                  record=name, page=page, verdicts=tuple(judge(record).arms))


def _ms_per_token(runs: list[Run], arm: str) -> list[float]:
    """The arm's ms/token of the runs a verdict may use (analyze.spoiled.usable), as its median's."""
    return [x for r in runs if r.arm == arm and spoiled.usable(r) and (x := r.ms_per_token) is not None]


def host_series(host: str, records: Sequence[tuple[Commit, RecordData]],
                changes: tuple[Change, ...] = ()) -> HostView:
    """Every arm's series over a host's records. One record per commit (the newest where a
    commit has several); points oldest first by the record's creation time."""
    newest: dict[str, tuple[Commit, RecordData]] = {}
    for c, data in records:
        if c.sha not in newest or c.when > newest[c.sha][0].when:
            newest[c.sha] = (c, data)
    ordered = sorted(newest.values(), key=lambda cd: cd[0].when)
    by_arm: dict[str, list[SeriesPoint]] = {}
    for c, data in ordered:
        runs = as_record(data).runs
        for v in c.verdicts:
            xs = _ms_per_token(runs, v.arm)
            if xs:
                by_arm.setdefault(v.arm, []).append(SeriesPoint(c.sha, c.when, statistics.median(xs), len(xs), v,
                                                                c.page))
    commits = tuple(c for c, _ in reversed(ordered))
    # The arms of the latest commit first, in its record's order; then the others, latest first.
    rank = {v.arm: i for i, v in enumerate(commits[0].verdicts)} if commits else {}
    names = sorted(by_arm, key=lambda a: (rank.get(a, len(rank)), "" if a in rank else _neg(by_arm[a][-1].when)))
    arms = tuple(ArmSeries(host, a, tuple(by_arm[a]), tuple(ch for ch in changes if ch.arm == a
                                                            and ch.figure == MS_PER_TOKEN)) for a in names)
    return HostView(host, slug(host), arms, commits, tuple(changes))


def _neg(when: str) -> str:
    """A sort key that puts later ISO times first."""
    return "".join(chr(0x10FFFF - ord(ch)) for ch in when)


_SERIES = re.compile(r"^(?P<bench>[^(]+)\((?P<params>.*)\)$")


def parse_series(name: str) -> tuple[str, str, str]:
    """(benchmark, arm, figure id) of an asv series name such as
    "bench_x.Decode.track_ms_per_token('block3 [not shipping: X]')"."""
    m = _SERIES.match(name)
    bench, params = (m.group("bench"), m.group("params")) if m else (name, "")
    values = re.findall(r"'((?:[^'\\]|\\.)*)'", params)
    fm = re.search(r"\.track_(\w+)$", bench)
    fid = fm.group(1) if fm else bench
    if fid == "phase_ms_per_round" and len(values) > 1:
        fid = f"{fid}:{values[1]}"
    arm = values[0].split(" [", 1)[0] if values else ""
    return bench, arm, fid


def changes_of(state_data: AlertState | Mapping[str, Any], steps_data: Sequence[NightStep | Mapping[str, Any]],
               acks: list[ackmod.Ack], ranges: dict[tuple[str, str], list[str]],
               alert_page: dict[str, str]) -> list[Change]:
    """The nightly's changes of one host: every alert ever filed (state.json) and every step of
    its last night (changes.json, acknowledged ones included), one entry per series and range.
    An acknowledgement covers a change when it names one of the range's commits (`ranges`:
    (last_before, first_after) -> the commits after last_before up to first_after) and matches
    the figure and arm, whenever it was written."""
    state = state_data if isinstance(state_data, AlertState) else msgspec.convert(state_data, AlertState)
    steps = [st if isinstance(st, NightStep) else msgspec.convert(st, NightStep) for st in steps_data]
    out: dict[tuple[str, str, str], Change] = {}
    for a in state.alerts:
        for s in a.series:
            bench, arm, fid = parse_series(s)
            out[(s, a.last_before, a.first_after)] = Change(
                s, arm, fid, a.direction, a.last_before, a.first_after, a.title,
                alert_id=a.id, alert_file=alert_page.get(a.id), at=a.at,
                acknowledged=a.acknowledged.reason if a.acknowledged is not None else None)
    for st in steps:
        key = (st.series, st.last_before, st.first_after)
        old = out.get(key)
        if old is not None:
            out[key] = replace(old, change=st.ratio - 1.0)
            continue
        bench, arm, fid = parse_series(st.series)
        out[key] = Change(st.series, st.arm or arm, st.figure or fid, st.direction,
                          st.last_before, st.first_after, f"{st.direction}: {arm} {fid}",
                          change=st.ratio - 1.0, alert_id=st.alert_id,
                          alert_file=alert_page.get(st.alert_id or ""), acknowledged=st.acknowledged)
    done = []
    for ch in out.values():
        bench, _, _ = parse_series(ch.series)
        commits = ranges.get((ch.last_before, ch.first_after)) or [ch.first_after]
        ack = ackmod.find(acks, commits, ackmod.figure_names(ch.figure, bench) + [ch.series], ch.arm)
        if ack is not None and ch.acknowledged is None:
            ch = replace(ch, acknowledged=ack.reason)
        done.append(ch)
    return sorted(done, key=lambda c: (c.at or "", c.first_after), reverse=True)
