"""Two commits measured run by run: `harness compare-commits BASE HEAD` (and pr-check's engine).

Each commit is exported from git into its own directory and served by one persistent worker
(harness.collect.worker). The suite's plan runs once per side, run by run: every planned run is made on
both sides back to back, the side that goes first alternating (ABBA: base head, head base, ...),
so each pair shares the machine's state and neither side always goes first. Cooldown, quiet
wait, contention watch and thermal checks are the runner's own, shared by both sides.

Each side gets an ordinary harness record (so reports, identity and asv read it as usual).
Each figure is judged on the per-pair ratios (harness.analyze.paired); with a budget, rounds are added
under the sequential rule (harness.analyze.sequential, in the session of harness.collect.sampling)
until every gated figure resolves its threshold.
Gated figures are ms/token of every arm; the rest (ms/round, each phase per round) are shown
as diagnostics, judged the same way, and do not decide the check.

Exit status: 0 pass (every gated figure unchanged or improved, identity held, nothing newly
failing); 1 fail (a gated figure worse, a run failing at head only, or an output differing
from base's); 3 inconclusive (otherwise: some gated figure could not resolve its threshold on
this host); 2 a problem to fix.
"""

from __future__ import annotations

import datetime as _dt
import math
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import msgspec

from harness.analyze import acks as ackmod
from harness.analyze import comparisons, contended, counters, envdiff, paired, sequential, spoiled
from harness.analyze.checknotes import CheckDuty, CheckNotes
from harness.analyze.design import Design, share_text
from harness.analyze.identity import annotate_identity, identity_rows
from harness.analyze.labels import annotate_label
from harness.ci.build import export_commit, rev_parse, side_trees
from harness.collect import runner, sampling
from harness.collect.baselines import BaselineStore
from harness.collect.engines import RunRequest
from harness.collect.plan import build_plan
from harness.collect.record import Record
from harness.collect.worker import Worker
from harness.core import interrupt
from harness.core import recordsections as rs
from harness.core.errors import UserError
from harness.core.runs import as_runs
from harness.core.schema import Run, RunDiagnostics

PASS, FAIL, INCONCLUSIVE = 0, 1, 3
EXIT_WORDS = {PASS: "pass", FAIL: "FAIL", INCONCLUSIVE: "inconclusive"}


# --- the comparison --------------------------------------------------------------------

@dataclass
class Figure:
    arm: str
    figure: str
    gated: bool
    result: paired.Paired
    base_median: float | None = None
    head_median: float | None = None
    ack: str | None = None          # the reason, when an acknowledgement covers this change

    @property
    def failing(self) -> bool:
        """Worse, and nobody said it was meant."""
        return self.result.verdict == "worse" and self.ack is None


@dataclass
class Comparison:
    base: str
    head: str
    design: Design
    figures: list[Figure]
    identity: list[Any]
    failures: dict[str, dict[str, int]]      # side -> arm -> failed measured runs
    records: dict[str, str]                  # side -> record path
    outcome: dict[str, Any]
    duration_s: float
    notes: CheckNotes = field(default_factory=CheckNotes)
    labels: dict[str, list[str]] = field(default_factory=dict)

    @property
    def gated(self) -> list[Figure]:
        return [f for f in self.figures if f.gated]

    @property
    def newly_failing(self) -> list[str]:
        base, head = self.failures.get("base", {}), self.failures.get("head", {})
        return sorted(a for a, n in head.items() if n and not base.get(a))

    @property
    def exit_status(self) -> int:
        bad_ident = [r for r in self.identity if r.status in ("differs", "nondeterministic")]
        if any(f.failing for f in self.gated) or self.newly_failing or bad_ident:
            return FAIL
        if not self.gated or any(f.result.verdict == "inconclusive" for f in self.gated):
            return INCONCLUSIVE
        return PASS

    def headline(self) -> str:
        """One sentence, the verdict first; inconclusive says what this host could not see."""
        st = self.exit_status
        t = self.design.threshold
        if st == FAIL:
            parts = [f"{f.arm} {f.figure} {paired.ratio_text(f.result)}" for f in self.gated if f.failing]
            parts += [f"{a}: runs fail at head only" for a in self.newly_failing]
            nid = sum(r.status in ("differs", "nondeterministic") for r in self.identity)
            if nid:
                parts.append(f"{nid} arm/prompt output(s) no longer byte-identical to base")
            return "FAIL: " + "; ".join(parts)
        if st == INCONCLUSIVE:
            if not self.gated:
                return "inconclusive: no figure could be compared (every run failed on one side?)"
            if said := [f for f in self.gated if f.result.contended]:   # contention said first
                return f"inconclusive: {said[0].arm} {said[0].figure} {contended.reading_text(said[0].result)}"
            worst = max((f for f in self.gated if f.result.verdict == "inconclusive"),
                        key=lambda f: f.result.detectable if f.result.detectable is not None else float("inf"))
            det = worst.result.detectable
            if det is not None and math.isfinite(det) and det <= t:
                # It could see the threshold; its interval still reaches past it.
                return (f"inconclusive: {worst.arm} {worst.figure} reads {paired.ratio_text(worst.result)}, "
                        f"an interval that reaches beyond ±{share_text(t)}")
            # One decimal: a 2.1% rounded to "2%" would read as no worse than a 2% threshold.
            what = f"changes under {det:.1%}" if det is not None and math.isfinite(det) else "any change"
            return (f"inconclusive: this host could not see {what} in {worst.arm} {worst.figure} "
                    f"(threshold {share_text(t)})")
        dets = [f.result.detectable for f in self.gated if f.result.detectable is not None]
        rng = f"; smallest detectable {min(dets):.1%} to {max(dets):.1%}" if dets else ""
        acked = [f for f in self.gated if f.result.verdict == "worse" and f.ack]
        if acked:
            return (f"pass: every gated figure unchanged within ±{share_text(t)} or improved, but for "
                    f"{len(acked)} acknowledged change(s): "
                    + "; ".join(f"{f.arm} {f.figure} {paired.ratio_text(f.result)} ({f.ack})" for f in acked) + rng)
        return f"pass: every gated figure unchanged within ±{share_text(t)} or improved{rng}"

    def apply_acks(self, acks: list[Any], commits: list[str]) -> None:
        """Mark each worse figure an acknowledgement covers (one of `commits`, BASE..HEAD)."""
        for f in self.figures:
            if f.result.verdict == "worse":
                a = ackmod.find(acks, commits, ackmod.figure_names(f.figure), f.arm)
                f.ack = a.reason if a else None


def _failed_by_arm(record: Record) -> dict[str, int]:
    return dict(Counter(r.arm or "?" for r in as_runs(record.runs) if not r.warmup and not r.is_ok))


def judge(base_runs: Sequence[Run | dict[str, Any]], head_runs: Sequence[Run | dict[str, Any]], arms: list[str],
          design: Design, gated_only: bool = False, share: float = contended.CONTENDED_SHARE) -> list[Figure]:
    """Every paired figure of the two sides (gated first, in suite arm order); one whose pairs'
    runs are contended past `share` is no clean verdict (analyze.contended.unclean)."""
    import statistics
    base, head = as_runs(base_runs), as_runs(head_runs)   # once: pairs, contention, exact figures
    pairs = comparisons.pair_sessions(base, head)
    table, probes = pairs.table, pairs.probes
    order = {a: i for i, a in enumerate(arms)}
    items = sorted(table.items(), key=lambda kv: (kv[0][1] != comparisons.MS_PER_TOKEN,
                                                  order.get(kv[0][0], 99), kv[0][1]))
    gated = [(k, v) for k, v in items if k[1] == comparisons.MS_PER_TOKEN]
    # The gated figures together (Benjamini-Hochberg over them); diagnostics one by one.
    results = dict(zip([k for k, _ in gated], paired.judge_family([v for _, v in gated], design,
                                                                  [probes.get(k) for k, _ in gated],
                                                                  [pairs.blocks.get(k) for k, _ in gated])))
    out = []
    for (arm, fig), (xs, ys) in items:
        is_gated = fig == comparisons.MS_PER_TOKEN
        if gated_only and not is_gated:
            continue
        r = results[(arm, fig)] if is_gated else paired.analyze(xs, ys, design, probes.get((arm, fig)),
                                                                  pairs.blocks.get((arm, fig)))
        r = contended.unclean(r, *contended.pair_counts(base, head, arm), share)
        out.append(Figure(arm, fig, is_gated, r, statistics.median(xs) if xs else None,
                          statistics.median(ys) if ys else None))
    if not gated_only:
        # The probe itself, shown: what it read on each side is what the verdicts subtracted.
        for arm in sorted({a for a, f in probes if f == comparisons.MS_PER_TOKEN}, key=lambda a: order.get(a, 99)):
            xs, ys = probes[(arm, comparisons.MS_PER_TOKEN)]
            out.append(Figure(arm, comparisons.PROBE, False,
                              paired.analyze(xs, ys, design, None, pairs.blocks.get((arm, comparisons.MS_PER_TOKEN))),
                              statistics.median(xs), statistics.median(ys)))
        out += exact_figures(base, head, arms) + counter_figures(base, head, arms)
    return out


ExactFigure = tuple[str, Callable[[RunDiagnostics], float | None], int]   # name, value of diagnostics, worse sign
EXACT_FIGURES: tuple[ExactFigure, ...] = (
    ("rejection rate (exact)",
     lambda d: 1.0 - d.accepted / d.proposed if d.proposed and d.accepted is not None else None, 1),
    ("tokens/round (exact)", lambda d: d.emitted_per_verify, -1))


def exact_figures(base_runs: list[Run], head_runs: list[Run], arms: list[str]) -> list[Figure]:
    """Rejection rate and tokens per round of each speculative arm, at temperature 0 the same in
    every run of the same code: any difference between the sides is a change (worse or
    improved), with no statistics, over the runs a verdict may use. Runs that differ within one
    side make the figure nondeterministic here, shown and not gated."""
    out = []
    for arm in arms:
        for name, value, worse_sign in EXACT_FIGURES:
            sides, counted = [], 0
            for runs in (base_runs, head_runs):
                ok = [r for r in runs if r.arm == arm and spoiled.usable(r) and r.result_arm.temp in (0, 0.0, None)]
                xs = [value(r.diagnostics) for r in ok]
                sides.append({round(float(x), 12) for x in xs if x is not None})
                counted = len(xs)          # the head side's measured runs, the last assigned
            b, h = sides
            if not b or not h:
                continue
            if len(b) > 1 or len(h) > 1:
                res = paired.Paired(0, None, None, None, None, "inconclusive",
                                    "nondeterministic: runs of one side differ (not exact here; not gated)")
                out.append(Figure(arm, name, False, res, min(b), min(h)))
                continue
            bv, hv = b.pop(), h.pop()
            ratio = hv / bv if bv else (1.0 if hv == bv else math.inf)
            verdict = "unchanged" if hv == bv else ("worse" if (hv - bv) * worse_sign > 0 else "improved")
            res = paired.Paired(counted, ratio, None, None, None,
                                verdict, "exact at temperature 0: any change is a change")
            out.append(Figure(arm, name, True, res, bv, hv))
    return out


def counter_figures(base_runs: list[Run], head_runs: list[Run], arms: list[str]) -> list[Figure]:
    """Each work counter of each arm per round, exact (harness.analyze.counters)."""
    return [Figure(c.arm, c.figure, c.gated, paired.Paired(c.runs, c.ratio, None, None, None, c.verdict, c.note),
                   c.base, c.head) for c in counters.compare(base_runs, head_runs, arms)]


def compare_commits(repo: Path, base: str, head: str, suite: Any, work: Path, store: Any = None,
                    console: Any = None, command: list[str] | None = None,
                    host: dict[str, Any] | None = None) -> Comparison:
    """Measure BASE and HEAD run by run under the suite's settings; records go under work/."""

    t0 = time.monotonic()
    base_sha, head_sha = rev_parse(repo, base), rev_parse(repo, head)
    s = suite.settings
    store = store if store is not None else BaselineStore.load(work / "no-baselines.json")
    design = Design.for_settings(s, len(suite.arms))
    say = (lambda line: console.print(f"harness: {line}", highlight=False, soft_wrap=True)) if console else None
    if host is None:   # each side's record says where and with what harness it was measured
        from harness.collect.host.info import collect_host
        host = collect_host(str(repo))
    session = _PairedSession(repo, suite, work, store, design, base_sha, head_sha,
                             command or ["harness", "compare-commits", base, head], host,
                             say, names={"base": base, "head": head})

    def warm_up() -> None:   # both sides load and compile before the budget's clock starts
        session.warm_up()
        refuse_if_nothing_ran(session, suite, warmup=True)

    try:
        outcome = sampling.sample(sampling.Settings(s.repetitions, s.max_repetitions, s.budget_s, design.looks),
                                  warm_up, session.do_round,
                                  lambda times, sizes: session.look(console, t0, times, sizes),
                                  sequential.run, session.close)
    except KeyboardInterrupt:
        raise CheckInterrupted(f"the runs so far are kept in {work / 'records'} (complete: false); "
                               "a check does not resume: run it again") from None
    refuse_if_nothing_ran(session, suite, warmup=False)
    return _conclude(session, design, outcome, s.budget_s, time.monotonic() - t0)


def refuse_if_nothing_ran(session: Any, suite: Any, warmup: bool) -> None:
    """One line (exit 2) when every run of this kind (warm-ups, else measured runs) failed on both
    sides: the suite or the engine command is broken for both commits, so there is nothing to
    judge, and measuring on would spend the whole budget to say "inconclusive"."""
    runs = [r for side in ("base", "head") for r in as_runs(session.record(side).runs) if r.warmup == warmup]
    if runs and not any(r.is_ok for r in runs):
        first = runs[0].error or "no error recorded"
        what = "warm-up" if warmup else "measured"
        raise UserError(f"every {what} run failed on both sides (the first: {first}); check the suite "
                        f"({suite.path}) and its engine command; the records are kept in "
                        f"{Path(session.record('base').path).parent}")


def side_host(host: dict[str, Any], sha: str, name: str) -> dict[str, Any]:
    """The host section of one side's record: the host as collected, its repository section
    saying the commit measured (an exported tree: clean, named as the check was given it)."""
    if not host:
        return host
    got = host.get("repo")
    repo = got if isinstance(got, dict) else {}
    return {**host, "repo": {**repo, "commit": sha, "short_commit": sha[:8], "branch": name,
                             "dirty": False, "source": "exported commit"}}


class CheckInterrupted(KeyboardInterrupt):
    """Ctrl-C during a check, after both workers were ended and both records written; its text
    says where the runs are, for the command's one line."""


@dataclass
class _Side:   # one commit of the check: its record, and the worker that runs it
    sha: str
    record: Record
    worker: Worker


class _PairedSession:
    """Two sides (base, head), each an exported tree, a persistent worker and a record; runs made
    pair by pair, the side that goes first alternating (ABBA)."""

    def __init__(self, repo: Path, suite: Any, work: Path, store: Any, design: Design,
                 base_sha: str, head_sha: str, command: list[str], host: dict[str, Any], say: Any = None,
                 names: dict[str, str] | None = None):

        self.suite, self.store, self.design = suite, store, design
        self.arms = [a.name for a in suite.arms]
        suite_dict = suite.to_dict()
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        self.sides: dict[str, _Side] = {}
        # Each commit exported (and built, once, where its engine declares a build); refused
        # here, before any worker starts, when both would run one executable.
        trees = side_trees(repo, suite, work, {"base": base_sha, "head": head_sha}, export_commit, say)
        self.builds = {side: info.to_dict() for side, (_, info) in trees.items() if info is not None}
        for side, sha in (("base", base_sha), ("head", head_sha)):
            root, info = trees[side]
            rec = Record.create(work / "records" / f"{sha[:12]}-{side}-{stamp}.json", suite_dict,
                                side_host(host, sha, (names or {}).get(side, sha[:8])), command,
                                len(build_plan(suite)), purpose="compare-commits", side=side, commit=sha,
                                paired_with=rs.PairedWith(base=base_sha, head=head_sha),
                                build=None if info is None else msgspec.convert(info, rs.Build, from_attributes=True))
            self.sides[side] = _Side(sha, rec, Worker(side, root, suite_dict, work / "logs"))
        self.pacer, self.ui, self.pair_no = runner.Pacer(), runner.NullUI(), 0
        self.generation_started = time.monotonic()

    def record(self, side: str) -> Record:
        return self.sides[side].record

    def run_on(self, side: str, p: Any) -> None:
        interrupt.check()   # a signal dropped inside a fork's hooks still stops (core/interrupt.py)
        sd = self.sides[side]
        run = runner.run_one(p, self.suite, sd.worker, self.ui, None, self.pacer)
        run.side, run.worker_generation = side, sd.worker.generation
        sd.record.add_run(annotate_identity(annotate_label(run), self.store, self.suite.settings))
        interrupt.check()

    def warm_up(self) -> None:
        for p in build_plan(self.suite, 0):
            for side in ("base", "head"):
                self.run_on(side, p)
        self.generation_started = time.monotonic()

    def restart(self, before_round: int) -> None:
        """Both workers anew (suite `restart_s`): stopped, started, and warmed up by the suite's
        warm-up plan, the two sides at once (nothing is measured, and a restart costs one side's
        load and warm-up, not two). Those runs are discarded (the record's plan indices are the
        measured runs'); each record's `restarts` keeps their time."""
        t0 = time.monotonic()
        plan = build_plan(self.suite, 0)

        def warm(side: str) -> float:
            w, t = self.sides[side].worker, time.monotonic()
            w.stop()
            # Any failure here, as in a measured run (runner._attempt): the measured runs then fail
            # (recorded) or start the worker again; the check goes on.
            try:
                w.start()   # now, not in the first measured run (a suite may have no warm-ups)
                for p in plan:
                    w.run(RunRequest(arm=self.suite.arm(p.arm), pairing=self.suite.pairing(p.pairing),
                                     prompt=self.suite.prompt(p.prompt), settings=self.suite.settings))
            except Exception:  # noqa: BLE001 - recorded by the measured runs that follow
                pass
            return time.monotonic() - t

        pool = ThreadPoolExecutor(max_workers=2)
        try:
            walls = dict(zip(("base", "head"), pool.map(warm, ("base", "head"))))
        finally:
            # On Ctrl-C, not waiting for the warm-ups: close() then stops the workers, which ends them.
            pool.shutdown(wait=False, cancel_futures=True)
        for side, sd in self.sides.items():
            sd.record.data.restarts = [*(sd.record.data.restarts or []), rs.Restart(
                generation=sd.worker.generation, before_round=before_round,
                warmup_wall_s=round(walls[side], 3), wall_s=round(time.monotonic() - t0, 3))]
        self.generation_started = time.monotonic()

    def do_round(self, i: int) -> None:
        every = self.suite.settings.restart_s
        # A generation measures one round at least (the warm-ups' generation too).
        if every is not None and i > 0 and time.monotonic() - self.generation_started >= every:
            self.restart(i)
        plan = build_plan(self.suite, i + 1)
        for p in plan:
            done = [p.index in self.record(side).done_indices() for side in ("base", "head")]
            if all(done):
                continue
            order = ("base", "head") if self.pair_no % 2 == 0 else ("head", "base")
            self.pair_no += 1
            for side in order:
                if p.index not in self.record(side).done_indices():
                    self.run_on(side, p)
        for sd in self.sides.values():
            sd.record.data.planned_runs = len(plan)
            sd.record.data.planned_repetitions = i + 1

    def look(self, console: Any, t0: float, times: tuple[float, ...], sizes: tuple[float, ...]) -> dict[str, paired.Paired]:
        design = self.design.at_looks(times, sizes)
        base, head = as_runs(self.record("base").runs), as_runs(self.record("head").runs)
        figs = judge(base, head, self.arms, design, gated_only=True, share=self.suite.settings.watch.contended_share)
        # More work counted at HEAD fails the check whatever the timings: this look is the last.
        figs = [f for f in counter_figures(base, head, self.arms) if f.failing] or figs
        if console is not None:
            console.print(f"look {design.look} of at most {design.looks} (tested at {share_text(design.alpha_per_test)} a figure) after "
                          f"{figs[0].result.n if figs else 0} pairs, {time.monotonic() - t0:.0f} s: "
                          + "; ".join(f"{f.arm} {paired.ratio_text(f.result)} {f.result.verdict} "
                                      f"(detectable {paired.detectable_text(f.result)})" for f in figs),
                          highlight=False, soft_wrap=True)
        return {f"{f.arm} {f.figure}": f.result for f in figs}

    def close(self, interrupted: bool = False) -> None:
        """Both workers ended (at once on Ctrl-C: a run in flight is not waited for) and both
        records written."""
        self.pacer.close()
        for sd in self.sides.values():
            sd.worker.close(grace_s=0.0 if interrupted else 5.0)
            sd.record.finish(sd.record.data.planned_runs or 0, interrupted)


def _conclude(session: _PairedSession, design: Design, outcome: sequential.Outcome, budget_s: float | None,
              duration_s: float) -> Comparison:
    """The verdict on every figure, the identity rows and the duty, written into both records.
    The final verdict is the last look's, at that look's boundary (the same pairs)."""
    design = design.at_looks(*outcome.schedule()) if outcome.looks else replace(design, look=1)

    base_rec, head_rec = session.record("base"), session.record("head")
    labels: dict[str, set[str]] = {}
    for r in as_runs([*base_rec.runs, *head_rec.runs]):
        if not r.warmup and r.arm:
            labels.setdefault(r.arm, set()).add(r.label or "unlabelled")
    out = Comparison(base=session.sides["base"].sha, head=session.sides["head"].sha, design=design,
                     figures=judge(base_rec.runs, head_rec.runs, session.arms, design,
                                   share=session.suite.settings.watch.contended_share),
                     identity=identity_rows(base_rec.runs, head_rec.runs),
                     failures={"base": _failed_by_arm(base_rec), "head": _failed_by_arm(head_rec)},
                     records={"base": str(base_rec.path), "head": str(head_rec.path)},
                     outcome=outcome.summary(design.to_dict(), budget_s),
                     duration_s=duration_s,
                     labels={a: sorted(v) for a, v in labels.items()})
    sides = session.sides
    measured = sum(sd.record.data.duty.measured_run_s for sd in sides.values() if sd.record.data.duty is not None)
    restarts = base_rec.data.restarts or []   # both sides restart together: one list's time
    out.notes = CheckNotes(
        duty={side: msgspec.to_builtins(sd.record.data.duty) for side, sd in sides.items()},
        check_duty=CheckDuty(measured_run_s=round(measured, 3), wall_s=round(duration_s, 3),
                             duty_cycle=round(measured / duration_s, 4) if duration_s > 0 else None,
                             restarts=len(restarts),
                             restart_wall_s=round(sum(r.wall_s for r in restarts), 3)),
        worker_restarts={side: sd.worker.restarts for side, sd in sides.items()},
        generations={side: sd.worker.generation for side, sd in sides.items()},
        restart_s=session.suite.settings.restart_s, builds=session.builds,
        environment=envdiff.env_diff(base_rec.data, head_rec.data),
        environment_compared=envdiff.compared(base_rec.data, head_rec.data),
        contention=contended.sides_info({"head": head_rec.runs, "base": base_rec.runs}, session.suite.settings))
    for sd in sides.values():
        sd.record.data.comparison = rs.Comparison(headline=out.headline(), exit_status=out.exit_status,
                                               sequential=msgspec.convert(out.outcome, rs.Sequential))
        sd.record.write()
    return out

