"""What the harness's dashboard shows, as typed data: per host and arm, ms/token per commit
with the judgement of that commit's record (harness.analyze.verdict), and the nightly's change
points and alerts with the acknowledgements that cover them.

Pure: the callers (harness.ci.site) find and load the records, the alert state and the
acknowledgements; the renderer (harness.render.dashboard) draws what this module returns.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field, replace
from typing import Any

from harness.analyze import acks as ackmod
from harness.analyze import spoiled
from harness.analyze.verdict import DECLINED, ArmVerdict, judge
from harness.core.runs import as_runs
from harness.core.schema import Run

MS_PER_TOKEN = "ms_per_token"


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


def commit_of(record: dict[str, Any]) -> str | None:
    return ((record.get("host") or {}).get("repo") or {}).get("commit")


def commit_view(record: dict[str, Any], name: str, page: str, sha: str | None = None) -> Commit:
    """A loaded record as one commit of a host (judged once, here)."""
    return Commit(sha=sha or commit_of(record) or "unknown", when=str(record.get("created") or ""),
                  record=name, page=page, verdicts=tuple(judge(record).arms))


def _ms_per_token(runs: list[Run], arm: str) -> list[float]:
    """The arm's ms/token of the runs a verdict may use (analyze.spoiled.usable), as its median's."""
    return [x for r in runs if r.arm == arm and spoiled.usable(r) and (x := r.ms_per_token) is not None]


def host_series(host: str, records: list[tuple[Commit, dict[str, Any]]],
                changes: tuple[Change, ...] = ()) -> HostView:
    """Every arm's series over a host's records. One record per commit (the newest where a
    commit has several); points oldest first by the record's creation time."""
    newest: dict[str, tuple[Commit, dict[str, Any]]] = {}
    for c, data in records:
        if c.sha not in newest or c.when > newest[c.sha][0].when:
            newest[c.sha] = (c, data)
    ordered = sorted(newest.values(), key=lambda cd: cd[0].when)
    by_arm: dict[str, list[SeriesPoint]] = {}
    for c, data in ordered:
        runs = as_runs(data.get("runs", []))
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


def _marked(alert: dict[str, Any]) -> str | None:
    """The reason of the acknowledgement the nightly marked a filed alert with, if any."""
    mark = alert.get("acknowledged")
    return mark.get("reason") if isinstance(mark, dict) else None


def changes_of(state: dict[str, Any], steps: list[dict[str, Any]], acks: list[ackmod.Ack],
               ranges: dict[tuple[str, str], list[str]], alert_page: dict[str, str]) -> list[Change]:
    """The nightly's changes of one host: every alert ever filed (state.json) and every step of
    its last night (changes.json, acknowledged ones included), one entry per series and range.
    An acknowledgement covers a change when it names one of the range's commits (`ranges`:
    (last_before, first_after) -> the commits after last_before up to first_after) and matches
    the figure and arm, whenever it was written."""
    out: dict[tuple[str, str, str], Change] = {}
    for a in state.get("alerts", []):
        for s in a.get("series", []):
            bench, arm, fid = parse_series(s)
            out[(s, a["last_before"], a["first_after"])] = Change(
                s, arm, fid, a["direction"], a["last_before"], a["first_after"], a.get("title", ""),
                alert_id=a["id"], alert_file=alert_page.get(a["id"]), at=a.get("at"), acknowledged=_marked(a))
    for st in steps:
        key = (st["series"], st["last_before"], st["first_after"])
        old = out.get(key)
        if old is not None:
            out[key] = replace(old, change=st.get("ratio", 1.0) - 1.0)
            continue
        bench, arm, fid = parse_series(st["series"])
        out[key] = Change(st["series"], st.get("arm") or arm, st.get("figure") or fid, st["direction"],
                          st["last_before"], st["first_after"], f"{st['direction']}: {arm} {fid}",
                          change=st.get("ratio", 1.0) - 1.0, alert_id=st.get("alert_id"),
                          alert_file=alert_page.get(st.get("alert_id") or ""),
                          acknowledged=st.get("acknowledged"))
    done = []
    for ch in out.values():
        bench, _, _ = parse_series(ch.series)
        commits = ranges.get((ch.last_before, ch.first_after)) or [ch.first_after]
        ack = ackmod.find(acks, commits, ackmod.figure_names(ch.figure, bench) + [ch.series], ch.arm)
        if ack is not None and ch.acknowledged is None:
            ch = replace(ch, acknowledged=ack.reason)
        done.append(ch)
    return sorted(done, key=lambda c: (c.at or "", c.first_after), reverse=True)
