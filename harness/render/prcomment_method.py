"""The PR comment's folded part: how the check judged (the method paragraph), the environment,
acknowledgements, byte identity, labels, load and time, and how to repeat the check. Read by
whoever asks why the headline says what it says; behind <details> so that it never pushes the
verdict off the first screen."""

from __future__ import annotations

from typing import Any

import msgspec

from harness.analyze import envdiff, estimators, paired
from harness.analyze.covariate import ProbeInfo
from harness.analyze.design import Design, share_text
from harness.analyze.estimators import GenerationsInfo
from harness.render.prinput import STATUS_WORDS, CheckMeta, ComparisonIn


class _Sampling(msgspec.Struct, kw_only=True):
    """What the method paragraph says of the sampling (ComparisonIn.outcome: the sequential
    outcome's summary; None where it lacks a field)."""
    rounds: int | None = None
    stopped_because: str | None = None


class _Build(msgspec.Struct, kw_only=True):
    """One side's build as the check's notes keep it (harness.ci.build.BuildInfo.to_dict)."""
    commit: str
    argv: list[list[str]]
    wall_s: float
    cached: bool


class _Records(msgspec.Struct, kw_only=True):
    """Each side's session record (ComparisonIn.records)."""
    base: str | None = None
    head: str | None = None


def _probe(block: dict[str, Any] | None) -> ProbeInfo | None:
    return msgspec.convert(block, ProbeInfo) if block else None


def _generations(block: dict[str, Any] | None) -> GenerationsInfo | None:
    return msgspec.convert(block, GenerationsInfo) if block else None


def looks_clause(d: Design) -> str:
    """How the level was spent over the looks, for the method paragraph."""
    if d.looks == 1:
        return "at one look"
    j = d.look or d.looks
    when = (f"{d.times[-1]:.0%} of the budget" if d.times and d.times[-1] < 1.0
            else "the end of sampling, spending what was left")
    return (f"over at most {d.looks} looks, spent by an O'Brien-Fleming-type boundary; this, the last look "
            f"taken, was look {j} at {when}")


def probe_sentence(c: ComparisonIn) -> str:
    """Say that the pairs were adjusted for the dispatch measurement, where any gated figure was, and
    warn where the probe itself moved: the same fixed work ran at different speeds on the sides."""
    gated = [(f, probe) for f in c.figures if f.gated and (probe := _probe(f.result.dispatch_measurement))]
    used = [f"{f.arm} {f.figure}" for f, probe in gated if probe.used]
    moved = [probe.probe_ratio for _, probe in gated
             if probe.why == "the probe itself moved" and probe.probe_ratio is not None]
    out = ""
    if used:
        out += (f"The suite times a fixed piece of MLX work after every run (the dispatch measurement, `dispatch_measurement = true`); "
                f"for {', '.join(used)} the part of each pair's log ratio the probe's own ratio predicts was taken "
                f"out first (docs/statistics.md, \"The dispatch measurement\"), each figure's note says how much. ")
    if moved:
        lo, hi = min(moved) - 1.0, max(moved) - 1.0
        said = f"{lo:+.0%}" if abs(hi - lo) < 0.005 else f"{lo:+.0%} to {hi:+.0%}"
        out += (f"**The dispatch measurement itself moved ({said}, head against base)**: the same fixed MLX work ran at "
                f"different speeds in the two sides' workers. Unless this change touches how MLX work is issued, "
                f"that is a per-process effect (two processes of one code can differ for their whole lives), "
                f"which the figures' ratios may carry too, in either direction; a check run again starts new "
                f"workers, and a suite's `restart_s` restarts them during a check so that the verdicts count it. ")
    return out


def generations_sentence(c: ComparisonIn) -> str:
    """Say that the suite restarted the workers during the check (`restart_s`), and which gated
    figures' worker generations differed (their intervals then rest on the generations)."""
    every = c.notes.restart_s
    gated = [(f, gens) for f in c.figures if f.gated and (gens := _generations(f.result.generations))]
    if not every or not gated:
        return ""
    counts = sorted({gens.count for _, gens in gated})
    said = str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"
    differ = [f"{f.arm} {f.figure} ({f.result.df} degrees of freedom)" if f.result.df != 1
              else f"{f.arm} {f.figure} (1 degree of freedom)" for f, gens in gated if gens.used]
    out = (f"Both sides' workers were restarted every {every:g} s during the check (`restart_s`), so the pairs came "
           f"from {said} worker generations, each a fresh pair of processes; a figure whose generations differ "
           f"(F test at {estimators.GENERATIONS_PRETEST:.0%}) is judged on the generations, on their number less one "
           f"degrees of freedom, so that a per-process effect widens its interval rather than reading as a change")
    return out + (f": {', '.join(differ)}. " if differ else "; none did. ")


def method_paragraph(c: ComparisonIn, meta: CheckMeta) -> str:
    d, st, host = c.design, c.exit_status, meta.host
    sampling = msgspec.convert(c.outcome, _Sampling)
    return (f"Host: {meta.machine} (chip {host.chip}, GPU generation "
            f"{host.gpu_generation}). Both commits ran run by run, alternating "
            f"which goes first (ABBA), {sampling.rounds} rounds; sampling stopped because "
            f"{sampling.stopped_because}. Each figure is judged on the per-pair ratios head/base: "
            f"from {estimators.MIN_ROBUST_PAIRS} pairs a robust (Huber) location of their logs, so that a few runs the "
            f"host disturbed weigh little, with the geometric mean guarding the tails on {paired.TAIL_SHARE:.0%} of "
            f"the level (a change that slows only some runs is worse too); under {estimators.MIN_ROBUST_PAIRS} pairs "
            f"the geometric mean alone. Both together are tested at {share_text(d.alpha_per_test)} (false-alarm level "
            f"{d.alpha * 100:g}% {looks_clause(d)}, split over {d.figures} gated figure(s)); across the gated figures the "
            f"false-discovery rate is controlled (Benjamini-Hochberg): a figure it selects out of R is judged, "
            f"and its interval drawn, at the level of R figures' share. \"smallest detectable\" is the "
            f"change this check catches with {d.power:.0%} power. Worse/improved needs a significant "
            f"change of at least {share_text(d.min_effect)}; unchanged needs the interval inside "
            f"±{share_text(d.threshold)} and a smallest detectable change below it; anything else is inconclusive. "
            f"{probe_sentence(c)}{generations_sentence(c)}Exit status {st} ({STATUS_WORDS.get(st, st)}).")


GATED_NOTE = ("Gated figures (decode ms/token of every arm; rejection rate and tokens per round of every "
              "speculative arm, and each work counter per round an engine reports (host syncs, forwards), "
              "exact at temperature 0: any change is a change, no statistics) decide the "
              "check; the diagnostics say where a change sits and do not.")


def environment(c: ComparisonIn) -> list[str]:
    """The environment sentence and, where the sides differ, the table of what differs."""
    diffs = c.notes.environment
    out = [envdiff.diff_sentence(diffs, c.notes.environment_compared)]
    if diffs:
        out += ["", "| field | base | head |", "|---|---|---|"]
        out += [f"| {x.what} | {x.a} | {x.b} |" for x in diffs]
    return out


def acknowledged(c: ComparisonIn) -> list[str]:
    acked = [f for f in c.figures if f.ack]
    if not acked:
        return []
    return ["", "Acknowledged (benchmarks/acknowledgements.toml covers a commit of this range: shown, "
                "not failed):", ""] + [f"- {f.arm} {f.figure} {paired.ratio_text(f.result)}: {f.ack}" for f in acked]


def identity(c: ComparisonIn) -> list[str]:
    if not c.identity:
        return []
    out = ["", "Byte identity against the base commit's output:", "",
           "| arm | prompt | identity | detail |", "|---|---|---|---|"]
    for r in c.identity:
        s = f"**{r.status}**" if r.status in ("differs", "nondeterministic") else r.status
        out.append(f"| {r.arm} | {r.prompt} | {s} | {r.detail} |")
    return out


def labels(c: ComparisonIn) -> list[str]:
    not_shipping = {a: [x for x in ls if not x.startswith("shipping")] for a, ls in c.labels.items()}
    said = [f"- {a}: {s}" for a, ls in sorted(not_shipping.items()) for s in ls]
    return ["", "Not shipping configurations:", "", *said] if said else []


def load_and_time(c: ComparisonIn, meta: CheckMeta) -> list[str]:
    out = []
    for side in ("base", "head"):
        n = meta.load.get(side)
        if n is not None:
            out.append(f"- {side}: {n.runs} measured runs, {n.failed} failed, {n.contended} contended, "
                       f"{n.quiet_wait_timeouts} quiet-wait timeouts")
    duty = c.notes.check_duty
    if duty is not None and duty.duty_cycle is not None:
        restarts = (f"; {duty.restarts} restarts of both workers took {duty.restart_wall_s:.0f} s"
                    if duty.restarts else "")
        out.append(f"- duty cycle {duty.duty_cycle:.0%}: {duty.measured_run_s:.0f} s of measured runs "
                   f"(both sides) in {duty.wall_s:.0f} s, exports and model loads included{restarts}")
    for side, block in c.notes.builds.items():
        # Each commit's engine was built in its own tree (harness.ci.build), or reused.
        b = msgspec.convert(block, _Build)
        how = f"built earlier in {b.wall_s:.1f} s, reused" if b.cached else f"built in {b.wall_s:.1f} s"
        out.append(f"- {side} {b.commit[:12]}: {how} (`{' && '.join(' '.join(a) for a in b.argv)}`)")
    return ["", "Load and time:", "", *out] if out else []


def details(c: ComparisonIn, meta: CheckMeta) -> list[str]:
    """The folded method, environment, labels, load and reproducing."""
    out = ["<details><summary>How this was judged: method, environment, labels, load, "
           "reproducing</summary>", "", method_paragraph(c, meta), "", GATED_NOTE, "", *environment(c)]
    out += acknowledged(c) + identity(c) + labels(c) + load_and_time(c, meta)
    records = msgspec.convert(c.records, _Records)
    out += ["", "Reproducing:", "", "```", meta.command, "```",
            f"Took {meta.duration_s:.0f} s. Session records: `{records.base}`, "
            f"`{records.head}`.", "", "</details>"]
    return out
