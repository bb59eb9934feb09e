"""One harness session per commit, and the figures the asv benchmarks read from its record.

asv installs each commit into its environment and runs the repository's thin benchmarks/
package (`from harness.asvbench import *`) against it; the suite file is the working tree's,
named in asv.conf.json (key "harness_suite"). `run_session` is every benchmark's
`setup_cache`: asv calls it once per commit and environment, it runs `python -m harness run`
in that environment, so the commit's own engine and harness do the measuring with their
protocol (interleaved arms, cooldowns, quiet wait, load recorded), and returns plain numbers
(asv pickles the return value; a loaded model must never be in it).

Each figure is a list of samples, one per measured run (the timed and exact ones leave out runs
set aside for their host: analyze.spoiled.usable). The benchmarks return them as
{"samples": [...], "number": 1}: asv's runner parses that shape as repeated measurements
(asv/runner.py, "special parsing for timing benchmark results"), computes median, 99% CI and
quartiles from them, and with --record-samples (`asv continuous` records them by default)
stores them, which `asv compare` needs for its Mann-Whitney test.

Environment knobs (all optional):
  HARNESS_ASV_SUITE     the suite file (default: asv.conf.json's "harness_suite")
  HARNESS_ASV_RECORDS   where session records go (default $ASV_CONF_DIR/.asv/records)
  HARNESS_BASELINES     the arms' own baselines (default $ASV_CONF_DIR/.asv/baselines.json)
  HARNESS_ASV_REPETITIONS  measured runs per arm in each session, in place of the suite's
  HARNESS_ASV_RECORD    a finished harness record of this commit: its runs become the
                        figures and no session runs (`harness pr-check` measures both commits
                        run by run first, then stores each side through
                        `asv run --python=same --set-commit-hash`, so asv keeps every sample)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.analyze import spoiled
from harness.analyze.memory import run_memory
from harness.collect.record import read_record
from harness.core import counters, declare
from harness.core.declare import EngineDecl
from harness.core.errors import UserError
from harness.core.redact import is_secret_name
from harness.core.runs import as_runs
from harness.core.schema import Run

try:
    from asv_runner.benchmarks.mark import SkipNotImplemented
except ImportError:  # outside an asv environment (tests): the same base class
    SkipNotImplemented = NotImplementedError

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

SUITE_ENV = "HARNESS_ASV_SUITE"
RECORDS_ENV = "HARNESS_ASV_RECORDS"
BASELINES_ENV = "HARNESS_BASELINES"
REPETITIONS_ENV = "HARNESS_ASV_REPETITIONS"
RECORD_ENV = "HARNESS_ASV_RECORD"
SESSION_TIMEOUT_S = 3000

# Bump a figure's number when what it measures changes (asv then shows old and new results
# as not comparable instead of drawing one line through both). The suite digest is added.
FIGURE_VERSIONS = {
    "ms_per_token": 1,
    "identity_mismatches": 1,
    "memory_mib": 1,
    "ms_per_round": 1,
    "phase_ms_per_round": 1,
    "rejection_rate": 1,
    "round_cost_classic_steps": 1,
    "counter_per_round": 1,
}
FIGURES = tuple(FIGURE_VERSIONS)


@dataclass(frozen=True)
class ArmSpec:
    name: str        # the arm's name in the suite (and in the harness record)
    label: str       # the asv parameter value: the name, plus the overrides it runs under
    block: int
    overrides: tuple[str, ...]
    phases: tuple[str, ...] = ()   # the round phases its engine declares, in round order
    counters: tuple[str, ...] = ()   # the work counters its engine declares beside the standard ones


def suite_path() -> Path:
    """$HARNESS_ASV_SUITE, else the suite asv.conf.json names (harness.ci.asvtool.configured_suite)."""
    given = os.environ.get(SUITE_ENV)
    if given:
        return Path(given).resolve()
    from harness.ci.asvtool import CONFIG_NAME, configured_suite, load_config
    return configured_suite(load_config(_conf_dir() / CONFIG_NAME))


def load_suite_file(path: Path | None = None) -> dict[str, Any]:
    p = path or suite_path()
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise RuntimeError(f"{p}: cannot read the asv suite file: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise RuntimeError(f"{p}: not valid TOML: {e}") from None


def override_names(env: dict[str, Any], prefixes: list[str], ignore: list[str]) -> list[str]:
    """"NAME" for a flag set to 1 or a secret (the label becomes an asv benchmark name, kept in
    results, the dashboard and PR comments), "NAME=value" otherwise, for every override-prefixed
    variable."""
    out = []
    for k, v in sorted(env.items()):
        if any(k.startswith(p) for p in prefixes) and k not in ignore:
            out.append(k if str(v) == "1" or is_secret_name(k) else f"{k}={v}")
    return out


def engine_of(suite: dict[str, Any], arm: dict[str, Any]) -> EngineDecl:
    """The declaration of the engine an arm of the raw suite runs: its `[engines.NAME]` table,
    else the built-in one (imports no engine), else an engine that declares nothing."""
    name = str(arm.get("engine", declare.default_engine()))
    table = (suite.get("engines") or {}).get(name)
    if isinstance(table, dict):
        return EngineDecl.from_dict({"name": name, **table})
    return declare.builtin(name) or EngineDecl(name=name)


def arm_specs(suite: dict[str, Any], environ: dict[str, str] | None = None) -> list[ArmSpec]:
    """The suite's arms with their dashboard labels. An override is a variable under the suite's
    own prefixes or the arm's engine's declared ones; inherited ones (say, a profile variable
    exported in the shell) apply to every arm and are named too."""
    environ = dict(os.environ if environ is None else environ)
    ignore = list(suite.get("override_ignore", []))
    specs = []
    for a in suite.get("arms", []):
        decl = engine_of(suite, a)
        prefixes = list(dict.fromkeys([*suite.get("override_prefixes", []), *decl.override_prefixes]))
        inherited = {k: v for k, v in environ.items() if any(k.startswith(p) for p in prefixes)}
        env = {**inherited, **{k: str(v) for k, v in (a.get("env") or {}).items()}}
        names = override_names(env, prefixes, ignore)
        label = a["name"] + (f" [not shipping: {', '.join(names)}]" if names else "")
        specs.append(ArmSpec(a["name"], label, int(a.get("block", 1)), tuple(names), decl.phases,
                             tuple(decl.counters)))
    return specs


def declared_phases(arms: list[ArmSpec]) -> list[str]:
    """Every phase a speculative arm's engine declares, first-seen order: the dashboard's phase
    parameter (asv fixes parameters before any session runs, so only declared phases chart)."""
    return list(dict.fromkeys(p for a in arms if a.block > 1 for p in a.phases))


# The standard counters charted per arm (positions are said per forward in the report instead).
CHARTED_COUNTERS = (counters.HOST_SYNCS, counters.TARGET_FORWARDS, counters.DRAFTER_FORWARDS)


def declared_counters(arms: list[ArmSpec]) -> list[str]:
    """The dashboard's counter parameter: the standard charted ones, then every arm's engine's own."""
    return list(dict.fromkeys([*CHARTED_COUNTERS, *(c for a in arms for c in a.counters)]))


def suite_digest(suite: dict[str, Any]) -> str:
    """Hash of what a figure's meaning depends on (not repetitions or cooldowns: those change
    how many samples and how much noise, not what is measured)."""
    keys = ("max_tokens", "temp", "seed", "ignore_eos", "pairings", "arms", "prompts")
    return hashlib.sha256(json.dumps({k: suite.get(k) for k in keys}, sort_keys=True,
                                     default=str).encode()).hexdigest()[:10]


def figure_version(figure: str, suite: dict[str, Any]) -> str:
    return f"{FIGURE_VERSIONS[figure]}-{suite_digest(suite)}"


# --- the session ---------------------------------------------------------------------

def _conf_dir() -> Path:
    """The directory of asv.conf.json: $ASV_CONF_DIR (asv sets it in every environment, the
    existing one of --python=same too), else the nearest one above the working directory."""
    if os.environ.get("ASV_CONF_DIR"):
        return Path(os.environ["ASV_CONF_DIR"])
    from harness.ci.asvtool import CONFIG_NAME
    here = Path.cwd().resolve()
    return next((d for d in (here, *here.parents) if (d / CONFIG_NAME).is_file()), here)


def records_dir() -> Path:
    return Path(os.environ.get(RECORDS_ENV) or _conf_dir() / ".asv" / "records")


def baselines_path() -> Path:
    return Path(os.environ.get(BASELINES_ENV) or _conf_dir() / ".asv" / "baselines.json")


def _tail(path: Path, n: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return "(no output)"


def record_name(commit: str | None, env_name: str | None) -> str:
    env = re.sub(r"[^A-Za-z0-9._-]+", "-", env_name or "env")[-40:]
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return f"{(commit or 'checkout')[:12]}-{env}-{stamp}-{os.getpid()}.json"


def with_repetitions(text: str, n: int) -> str:
    """The suite's TOML text with its top-level `repetitions` set to n."""
    line = f"repetitions = {n}"
    new, count = re.subn(r"(?m)^repetitions\s*=\s*\d+", line, text, count=1)
    return new if count else f"{line}\n{text}"


def _figures_of(record: Path, rc: int | str) -> SessionFigures:
    try:
        data = read_record(record)   # any schema version, migrated; a journal merged
    except UserError as e:
        raise RuntimeError(str(e)) from None
    figs = figures_from_record(data, arm_specs(load_suite_file(suite_path())))
    figs.record, figs.exit_status = str(record), rc
    print(f"harness session: {record} (exit {rc})")
    return figs


def run_session() -> SessionFigures:
    """asv's setup_cache: one `harness run` of the suite in this environment -> figures."""
    given = os.environ.get(RECORD_ENV, "").strip()
    if given:
        return _figures_of(Path(given), "measured by pr-check")
    suite = suite_path()
    out = records_dir()
    out.mkdir(parents=True, exist_ok=True)
    record = out / record_name(os.environ.get("ASV_COMMIT"), os.environ.get("ASV_ENV_NAME"))
    log = record.with_suffix(".log")
    reps = os.environ.get(REPETITIONS_ENV, "").strip()
    if reps:
        if not reps.isdigit() or int(reps) < 1:
            raise RuntimeError(f"{REPETITIONS_ENV}={reps!r}: expected a positive integer")
        # The copy sits beside the original: the suite's relative prompt files still resolve.
        copy = suite.with_name(f".{suite.stem}.reps{reps}.{os.getpid()}.toml")
        copy.write_text(with_repetitions(suite.read_text(encoding="utf-8"), int(reps)), encoding="utf-8")
        suite = copy
    argv = [sys.executable, "-m", "harness", "run", str(suite), "--record", str(record),
            "--baselines", str(baselines_path())]
    # An empty working directory: `python -m` puts it first on sys.path, and a checkout there
    # would shadow the commit installed in this environment.
    with tempfile.TemporaryDirectory(prefix="harness-asv-") as cwd, open(log, "w") as logf:
        try:
            rc: int | str = subprocess.run(argv, cwd=cwd, stdout=logf, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, timeout=SESSION_TIMEOUT_S).returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
        finally:
            if reps:
                suite.unlink(missing_ok=True)
    if not record.exists():
        raise RuntimeError(f"the harness session wrote no record (exit {rc}): {' '.join(argv)}\n"
                           f"{_tail(log)}")
    return _figures_of(record, rc)


# asv reads setup_cache's own `timeout`; mypy has no type for an attribute set on a function.
run_session.timeout = SESSION_TIMEOUT_S + 300  # type: ignore[attr-defined]


# --- figures from a record -----------------------------------------------------------

@dataclass
class SessionFigures:
    """What one session's record gives the benchmarks (asv pickles it: plain values only).
    A figure that does not apply (rounds of classic decode, identity without a baseline) is in
    `skip`; an arm whose runs failed, or were all set aside for their host, is in `errors` and
    every figure of it fails."""
    figures: dict[str, dict[str, list[float]]]   # figure -> arm label (or "label|phase") -> samples
    skip: dict[str, dict[str, str]]              # figure -> label or key -> why it does not apply
    errors: dict[str, str]                       # label -> why every figure of the arm fails
    marks: dict[str, dict[str, int]]             # label -> the runs' marks, counted
    labels: dict[str, list[str]]                 # label -> the runs' labels (an override's note)
    record: str | None = None                    # the session's record, once run
    exit_status: int | str | None = None         # `harness run`'s, or what measured it


def _reported(x: float | None, what: str) -> float:
    # A measured ok run has its timings (core.results.complete_timings): missing is a broken record.
    if x is None:
        raise RuntimeError(f"a measured run of this record has no {what}")
    return float(x)


def _spec_runs(runs: list[Run]) -> list[Run]:
    """Runs that really decoded speculatively and have rounds to divide by."""
    return [r for r in runs if r.diagnostics.mode == "speculative" and (r.diagnostics.rounds or 0) > 0]


def figures_from_record(record: dict[str, Any], arms: list[ArmSpec]) -> SessionFigures:
    """The figures of a (migrated) record's measured runs, one sample per run."""
    measured = [r for r in as_runs(record.get("runs", [])) if not r.warmup]
    figs: dict[str, dict[str, list[float]]] = {f: {} for f in FIGURES}
    figs["phase_ms_per_round"] = {}
    charted = declared_counters(arms)
    out = SessionFigures(figures=figs, skip={f: {} for f in FIGURES}, errors={}, marks={}, labels={})
    classic_arm = next((a for a in arms if a.block == 1), None)
    by_arm = {a.name: sorted([r for r in measured if r.arm == a.name],
                             key=lambda r: (r.repetition or 0, r.prompt or ""))
              for a in arms}
    classic_mpt: dict[tuple[str | None, int | None], float | None] = {}   # (prompt, repetition): ms_per_token
    if classic_arm is not None:
        classic_mpt = {(r.prompt, r.repetition): r.ms_per_token
                       for r in by_arm[classic_arm.name] if spoiled.usable(r)}
    for a in arms:
        runs = by_arm[a.name]
        lab = a.label
        out.marks[lab] = dict(Counter(mk for r in runs for mk in r.marks))
        out.labels[lab] = sorted({r.label or "unlabelled" for r in runs})
        failed = [r for r in runs if not r.is_ok]
        if not runs:
            out.errors[lab] = "no measured runs of this arm in the record"
            continue
        if failed:
            out.errors[lab] = (f"{len(failed)} of {len(runs)} runs failed on this commit: "
                               f"{failed[0].error or 'no error message'}")
            continue
        timed = spoiled.usable_runs(runs)
        if not timed:
            out.errors[lab] = f"every one of its {len(runs)} runs was set aside for its host (docs/lab-hosts.md)"
            continue
        figs["ms_per_token"][lab] = [_reported(r.ms_per_token, "ms_per_token") for r in timed]
        mems = [run_memory(r.diagnostics) for r in runs]
        if all(m is not None for m in mems):
            figs["memory_mib"][lab] = [m[0] / 2**20 for m in mems if m is not None]
        else:
            out.skip["memory_mib"][lab] = "the engine reports no diagnostics.peak_memory_bytes"
        idents = [r.identity.status if r.identity else None for r in runs]
        if all(s in ("identical", "differs") for s in idents):
            figs["identity_mismatches"][lab] = [1.0 if s == "differs" else 0.0 for s in idents]
        else:
            out.skip["identity_mismatches"][lab] = ("no baseline for this arm in the baselines file: "
                                                    "record one with `harness baseline record`")
        _round_figures(a, timed, classic_mpt if classic_arm is not None else None, out)
        _counter_figures(lab, timed, charted, out)
    return out


def _round_figures(a: ArmSpec, runs: list[Run],
                   classic_mpt: dict[tuple[str | None, int | None], float | None] | None,
                   out: SessionFigures) -> None:
    """The per-round figures of one arm whose runs all succeeded: ms/round, rejection rate, each
    phase per round, and one round in classic steps (classic_mpt None: no classic arm ran)."""
    lab, figs, skip = a.label, out.figures, out.skip
    spec = _spec_runs(runs)
    if a.block == 1 or not spec:
        why = ("classic decode has no rounds" if a.block == 1 else
               "the exactness gate declined on this host, so the arm decoded classic")
        for f in ("ms_per_round", "rejection_rate", "round_cost_classic_steps", "phase_ms_per_round"):
            skip[f][lab] = why
        return
    if len(spec) < len(runs):
        out.errors[lab] = (f"only {len(spec)} of {len(runs)} runs decoded speculatively "
                           "(the gate decided differently between runs)")
        return
    diags = [r.diagnostics for r in spec]
    rounds = [float(d.rounds or 0) for d in diags]    # > 0: _spec_runs
    figs["ms_per_round"][lab] = [_reported(d.decode_ms, "diagnostics.decode_ms") / n for d, n in zip(diags, rounds)]
    accept = [d.acceptance_rate for d in diags]
    if all(x is not None for x in accept):
        figs["rejection_rate"][lab] = [1.0 - float(x) for x in accept if x is not None]
    else:
        skip["rejection_rate"][lab] = "the engine reported neither acceptance_rate nor proposed/accepted counts"
    # A phase the engine did not report in every run is skipped, never read as 0.0 (which
    # a comparison would call "unchanged").
    reported = [d.phase_ms for d in diags]
    for p in dict.fromkeys([*a.phases, *(k for ph in reported for k in ph)]):
        key = f"{lab}|{p}"
        if all(p in ph for ph in reported):
            figs["phase_ms_per_round"][key] = [float(ph[p]) / n for ph, n in zip(reported, rounds)]
        else:
            skip["phase_ms_per_round"][key] = (f"the engine reported no {p!r} phase in "
                                               f"{sum(p not in ph for ph in reported)} of {len(spec)} runs")
    # One round in classic steps: this run's ms per round over the classic run of the same
    # prompt and repetition (adjacent in time, so they share the machine's state).
    cost = []
    for r, ms in zip(spec, figs["ms_per_round"][lab]):
        c = (classic_mpt or {}).get((r.prompt, r.repetition))
        if c:
            cost.append(ms / float(c))
    if classic_mpt is None or len(cost) < len(spec):
        skip["round_cost_classic_steps"][lab] = "no classic run to divide by in this session"
    else:
        figs["round_cost_classic_steps"][lab] = cost


def _counter_figures(lab: str, runs: list[Run], charted: list[str], out: SessionFigures) -> None:
    """Each work counter per round (classic decode: per token), one sample per run; n/a where a
    run did not report it."""
    diags = [r.diagnostics for r in runs]
    units = [(d.rounds or 0) if d.mode == "speculative" else (d.generated_tokens or 0) for d in diags]
    for name in charted:
        key = f"{lab}|{name}"
        counted = [(d.counters or {}).get(name) for d in diags]
        if all(u > 0 and c is not None for c, u in zip(counted, units)):
            out.figures["counter_per_round"][key] = [float(c or 0) / u for c, u in zip(counted, units)]
        else:
            out.skip["counter_per_round"][key] = f"the engine reported no {name!r} counter in every run"


def samples_for(cache: SessionFigures, figure: str, key: str) -> dict[str, Any]:
    """asv's repeated-measurement shape for one figure and arm. An arm that failed raises (asv:
    failed on this commit); a figure that does not apply is skipped (asv: n/a)."""
    label = key.split("|", 1)[0]
    if label in cache.errors:
        raise RuntimeError(f"{label}: {cache.errors[label]}")
    skipped = cache.skip.get(figure, {})
    why = skipped.get(label) or skipped.get(key)
    if why:
        print(f"asv: skipped: {label}: {why}")
        raise SkipNotImplemented(why)
    xs = cache.figures[figure].get(key)
    if not xs:
        raise RuntimeError(f"{figure}: no samples for {key}")
    return {"samples": xs, "number": 1}


SUITE = load_suite_file()
ARMS = arm_specs(SUITE)
LABELS = [a.label for a in ARMS]
SPEC_LABELS = [a.label for a in ARMS if a.block > 1]
PHASES = declared_phases(ARMS)
COUNTERS = declared_counters(ARMS)
