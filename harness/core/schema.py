"""The typed, versioned shapes the harness reads and writes: engine result, run, record, baselines.

msgspec, because a record is rewritten after every run (its encoder and typed conversion are
C code), it decodes strictly with a message naming the field ("Expected `int`, got `str` - at
`$.diagnostics.rounds`"), and it generates JSON Schema (`harness schema --write` publishes
schema/*.schema.json, which docs/engine-contract.md describes).

Producers build these types (the adapters, test fixtures); `load_record` is the one door every
record comes in through: it migrates older schema versions step by step (1 -> 2 -> 3 -> 4 -> 5) and checks
the typed shape. Readers then see dicts of that shape; the analyses that read runs as `Run`s
convert them once at their entry (harness.core.runs.as_runs).

The format's history, one line per version, is docs/schema-history.md.

Meanings fixed here (they disagreed between producers in schema_version 1):
- `diagnostics.rounds` counts speculative rounds (target verify forwards); classic decode has
  no rounds and says 0 (its unit is the token: `generated_tokens`).
- `rounds_log[].proposed` is how many tokens the drafter proposed that round; `drafted` (the
  proposed ids) is optional and lets two arms' rounds be compared proposal by proposal.
- `arm.drafter_quantization` describes the drafter's weights ({"quantized", "bits", ...}) or
  is null when the engine does not say.
- `diagnostics.phase_ms` is the engine's own phases, its own names, in its own order; a phase
  it does not report is absent (never 0.0).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from harness.core import migrate_v5, suitespec
from harness.core import recordsections as rs
from harness.core.errors import UserError
from harness.core.hostinfo import HostInfo, RunLoad
from harness.core.results import complete_timings, missing_minimum

SCHEMA_VERSION = 5
RECORD_KIND = "harness.record"
BASELINES_KIND = "harness.baselines"
SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schema"

GateOutcome = Literal["passed", "declined", "overridden", "not_applicable", "unknown"]
Mode = Literal["classic", "speculative"]


class _S(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Unknown fields are ignored (an engine may say more than the contract), never an error.
    Encoded, a field at its default is left out: absent means "not reported", as in version 1."""


# --- what an engine reports ----------------------------------------------------------------

class RoundEntry(_S, kw_only=True):
    """One speculative round: where it started in the generated text and what happened."""
    offset: int                       # generated-token offset where the round starts
    accepted: int                     # drafted tokens the target accepted
    proposed: int | None = None       # drafted tokens proposed (filled from `drafted` if absent)
    drafted: list[int] | None = None  # the proposed ids, when the engine logs them
    # Shape costs: this round's verify forward (ms), the target's KV length before it (its shape is
    # T = proposed + 1 positions after it), and whether that shape was new to the engine's loaded target.
    verify_ms: float | None = None
    kv_len: int | None = None
    first_use: bool | None = None

    def __post_init__(self) -> None:
        if self.proposed is None:
            if self.drafted is None:
                raise ValueError("a rounds_log entry needs `proposed` (a count) or `drafted` (the ids)")
            self.proposed = len(self.drafted)


class Gate(_S, kw_only=True):
    """Did the engine decide to decode speculatively, and why. `unknown`: the engine did not say."""
    outcome: GateOutcome = "unknown"
    engaged: bool | None = None       # speculative decoding ran (null: not reported)
    reading: str = ""                 # the probe's reading, quoted in labels
    message: str = ""
    differing_bytes: list[int] = []
    logit_bytes: int | None = None
    block: int | None = None
    probe_ms: float | None = None


class EngineInfo(_S, kw_only=True):
    name: str = "unknown"
    version: str = "unknown"
    device: str | None = None         # e.g. "Device(gpu, 0)", "cpu"
    numerics: str | None = None       # the library deciding device numerics: "Metal", "CUDA", "OpenBLAS 0.3.26"
    blas: str | None = None           # CPU BLAS, for an engine that runs on the CPU
    attention: dict[str, Any] | None = None   # an attention path the engine chose (e.g. cuDNN on/off)
    mlx: str | None = None
    mlx_lm: str | None = None


class ArmInfo(_S, kw_only=True):
    """How the engine says it ran (which may differ from what was asked: the gate can decline)."""
    mode: Mode | None = None
    requested_mode: Mode | None = None
    block: int | None = None
    temp: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    ignore_eos: bool | None = None
    target: str | None = None
    drafter: str | None = None
    drafter_quantization: dict[str, Any] | None = None
    # "draft-model" (an independent model) or "mtp" (a head on the target's hidden states), and
    # what an MTP head reads from the target: role ("lm_head", "embedding") -> tensor prefix.
    drafter_kind: str | None = None
    drafter_borrows: dict[str, str] | None = None


class DrafterPhase(_S, kw_only=True):
    forwards: int = 0
    ms: dict[str, float] = {}


class RunDiagnostics(_S, kw_only=True):
    """The engine's diagnostics as a run keeps them: all but ms_per_token, which the run keeps
    once, at its top level (`Run.ms_per_token`, the figure every analysis reads)."""
    mode: Mode | None = None
    block_size: int | None = None
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    prefill_ms: float | None = None
    probe_ms: float | None = None
    decode_ms: float | None = None              # first decode step to last token, prefill excluded
    decode_tokens_per_s: float | None = None
    # The round split: the engine's own phase names in its own order, totals over decode.
    phase_ms: dict[str, float] = {}
    closure_error_ms: float | None = None       # decode_ms - sum(phase_ms)
    rounds: int | None = None                   # speculative rounds; 0 in classic decode
    proposed: int | None = None
    accepted: int | None = None
    acceptance_rate: float | None = None
    per_step_tested: int | None = None          # positions tested up to and including the first miss
    per_step_acceptance: float | None = None
    emitted_per_verify: float | None = None
    zero_accept_rounds: int | None = None
    partial_accept_rounds: int | None = None
    full_accept_rounds: int | None = None
    proposed_by_position: list[int] | None = None
    accepted_by_position: list[int] | None = None
    acceptance_by_position: list[float | None] | None = None
    first_miss_histogram: list[int] | None = None   # [i]: first miss at draft i; last: no miss
    profile: bool | None = None                 # the engine ran in its profile mode
    profile_syncs: int | None = None
    profile_sync_ms: float | None = None
    attribution: str | None = None
    phase_notes: dict[str, str] | None = None   # phase or drafter stage -> what its time includes
    timing: str | None = None
    # Device memory over the generation (MLX: its peak counter, reset when the generation starts):
    # the peak, what was already in use at the reset (every model the process holds), and the
    # weights this generation used. analyze.summary.arm_memory combines them.
    peak_memory_bytes: int | None = None
    resident_memory_bytes: int | None = None
    model_memory_bytes: int | None = None
    rounds_log: list[RoundEntry] | None = None
    # Work counted over the decode, name -> count: harness.core.counters' standard names (host
    # syncs, target and drafter forwards and their positions) and the engine's declared ones.
    counters: dict[str, int] | None = None
    # Drafter forwards by phase ("draft_block", "accept_hook", ...): {"forwards": n, "ms": {stage:
    # ms}}; stages only in profile mode, where each is synced and so its own (an MTP head: ids
    # upload, layers, LM head, sample, readback).
    drafter_split: dict[str, DrafterPhase] | None = None


class Diagnostics(RunDiagnostics, kw_only=True):
    """Counters and timings as the engine reports them. Minimal: a token count (or token_ids)
    and one of decode_ms, ms_per_token, decode_tokens_per_s; everything else is optional and
    unlocks an analysis."""
    ms_per_token: float | None = None


class EngineResult(_S, kw_only=True):
    """What an engine reports for one generation (the command adapter reads it from the last
    stdout line). See docs/engine-contract.md."""
    token_ids: list[int] | None = None
    text: str | None = None
    text_sha256: str | None = None
    arm: ArmInfo = msgspec.field(default_factory=ArmInfo)
    gate: Gate = msgspec.field(default_factory=Gate)
    overrides: dict[str, str] = {}              # the engine's own view of the overrides in force
    engine: EngineInfo = msgspec.field(default_factory=EngineInfo)
    diagnostics: Diagnostics = msgspec.field(default_factory=Diagnostics)


class ResultError(ValueError):
    """An engine's output does not meet the contract; the message says what is missing."""


def decode_engine_result(data: bytes | str | dict[str, Any]) -> EngineResult:
    """Strictly decode one engine result (JSON text or a parsed object) and fill its timings."""
    try:
        if isinstance(data, dict):
            res = msgspec.convert(data, EngineResult)
        else:
            res = msgspec.json.decode(data, type=EngineResult)
    except msgspec.ValidationError as e:
        raise ResultError(f"result JSON does not match the engine contract: {e}") from None
    except msgspec.DecodeError as e:
        raise ResultError(f"not a JSON object: {e}") from None
    missing = missing_minimum(res)
    if missing:
        raise ResultError("result JSON lacks " + " and ".join(missing))
    return complete_timings(res)


def to_builtins(obj: Any) -> Any:
    return msgspec.to_builtins(obj)


# --- run, record, baselines ----------------------------------------------------------------

class Identity(_S, kw_only=True):
    status: Literal["identical", "differs", "no_baseline", "no_output", "not_compared"]
    reason: str | None = None
    first_token: int | None = None
    byte_offset: int | None = None
    ours: str | None = None
    baseline: str | None = None


class Run(_S, kw_only=True):
    """One run as the record keeps it; the engine's parts are copied from its EngineResult
    (its diagnostics but ms_per_token, which is the run's own field here)."""
    index: int
    status: Literal["ok", "failed"]
    arm: str | None = None            # the plan's names (every run the runner makes has them)
    pairing: str | None = None
    prompt: str | None = None
    repetition: int | None = None
    warmup: bool = False
    engine: str | None = None
    block: int | None = None
    error: str | None = None
    stderr_tail: str | None = None
    started: str | None = None
    wall_s: float | None = None
    cooldown_s: float | None = None
    quiet_wait_s: float | None = None   # the wait for a quiet host beyond the cooldown (not the exactness gate)
    decode_tokens_per_s: float | None = None
    ms_per_token: float | None = None
    prefill_ms: float | None = None
    generated_tokens: int | None = None
    token_ids: list[int] | None = None
    text: str | None = None
    text_sha256: str | None = None
    dispatch_measurement_ms: float | None = None   # the dispatch measurement after the run (suite `dispatch_measurement`)
    side: str | None = None           # compare-commits: "base" or "head"
    # compare-commits: which of its side's worker processes made the run (1, 2, ...: suite `restart_s`)
    worker_generation: int | None = None
    overrides: dict[str, str] = {}
    shipping: bool | None = None
    label: str | None = None
    # A failed run has no engine parts: {} (every field of these is optional).
    gate: Gate = msgspec.field(default_factory=Gate)
    engine_info: EngineInfo = msgspec.field(default_factory=EngineInfo)
    result_arm: ArmInfo = msgspec.field(default_factory=ArmInfo)
    diagnostics: RunDiagnostics = msgspec.field(default_factory=RunDiagnostics)
    load: RunLoad = msgspec.field(default_factory=RunLoad)
    marks: list[str] = []
    identity: Identity | None = None

    @property
    def is_ok(self) -> bool:
        """The run finished ok (a warm-up too): harness.core.runs says who reads this alone."""
        return self.status == "ok"

    @property
    def measured_ok(self) -> bool:
        """The run is measured (not a warm-up) and finished ok."""
        return not self.warmup and self.status == "ok"


class SuiteSection(_S, kw_only=True):
    """The suite as the session ran it: the suite file's own types (harness.core.suitespec), so a
    record's suite is checked as a suite file is; settings resolved (a host's cooldown rule)."""
    name: str
    path: str = ""
    sha256: str = ""
    settings: suitespec.Settings
    pairings: list[suitespec.Pairing]
    arms: list[suitespec.Arm]
    prompts: list[suitespec.Prompt]
    # What each engine declared (phases, overrides, profile variable, numerics); see harness.core.declare.
    engines: dict[str, dict[str, Any]] = {}


class Record(_S, kw_only=True):
    """One session's record, in the order the harness writes its keys. A field at its default is
    left out when written: None for the keys a record may lack (older records, other purposes)."""
    schema_version: Literal[5]
    kind: Literal["harness.record"]
    session_id: str
    created: str
    finished: str | None | UnsetType = UNSET   # null until it finishes complete (UNSET: a record without it)
    complete: bool | None = None      # every planned run landed (None: a record without the key)
    command: list[str] = []
    planned_runs: int | None = None
    resumes: list[rs.Resume] | None = None
    purpose: str | None = None        # "run", "check", "baseline" or "compare-commits"
    quick: bool | None = None         # a --quick session
    update: bool | None = None        # a baseline session that replaces differing baselines
    baselines: str | None = None      # the baselines file the session compared with (or wrote)
    side: Literal["base", "head"] | None = None   # compare-commits: this side, its commit, the pair, its build
    commit: str | None = None
    paired_with: rs.PairedWith | None = None
    build: rs.Build | None = None
    suite: SuiteSection
    host: HostInfo = msgspec.field(default_factory=HostInfo)
    models: dict[str, dict[str, rs.ModelFiles]] = {}   # {pairing: {"target"/"drafter": ...}}
    runs: list[Run]
    # Wall time: runs there when it began (>0: old records), one segment per process that wrote, their sum.
    session_wall_from_run: int | None = None
    session_segments_s: list[float] | None = None
    session_wall_s: float | None = None
    planned_repetitions: int | None = None   # the minimum, then each added round
    sequential: rs.Sequential | None = None     # harness run: each speculative arm vs classic, paired
    scaling: rs.Scaling | None = None
    restarts: list[rs.Restart] | None = None    # compare-commits: each worker restart
    duty: rs.Duty | None = None                 # written by finish()
    baselines_stored: rs.BaselinesStored | None = None
    comparison: rs.Comparison | None = None     # compare-commits: the verdict over both sides


class BaselineEntry(_S, kw_only=True):
    """One arm's own output on this host, the reference for byte identity (harness.analyze.identity)."""
    token_ids: list[int]
    text: str | None = None
    text_sha256: str | None = None
    pairing: str | None = None
    arm: str | None = None
    prompt: str | None = None
    max_tokens: int | None = None
    temp: float | None = None
    seed: int | None = None
    recorded: str | None = None
    session_id: str | None = None
    engine: dict[str, Any] = {}
    label: str | None = None
    target: str | None = None
    drafter: str | None = None
    history: list[dict[str, Any]] = []


class Baselines(_S, kw_only=True):
    schema_version: Literal[1]
    kind: Literal["harness.baselines"]
    entries: dict[str, BaselineEntry]


# --- migration and the one door records come in through ------------------------------------

def migrate_v1(data: dict[str, Any]) -> dict[str, Any]:
    """schema_version 1 -> 2: the same facts under the meanings above; nothing renders differently.

    v1 engines were read with fixed assumptions (the default engine's profile variable, its
    five phases and its prefixes); the suite's `engines` section states them so v2 readers agree."""
    from harness.core import declare
    out = copy.deepcopy(data)
    for r in out.get("runs") or []:
        ra = r.get("result_arm")
        if isinstance(ra, dict) and "drafter_quantized" in ra:
            q = ra.pop("drafter_quantized")
            ra.setdefault("drafter_quantization", None if q is None else {"quantized": bool(q)})
        d = r.get("diagnostics")
        if not isinstance(d, dict):
            continue
        if d.get("mode") == "classic" and d.get("rounds"):
            d["rounds"] = 0       # the v1 mlx-lm adapter counted classic tokens as rounds
        for e in d.get("rounds_log") or []:
            if isinstance(e, dict) and "proposed" not in e and isinstance(e.get("drafted"), list):
                e["proposed"] = len(e["drafted"])
    host = out.get("host")
    if isinstance(host, dict) and "harness" not in host and isinstance(host.get("repo"), dict):
        # v1's harness lived in the measured checkout: its commit and tree state were the repo's.
        repo = host["repo"]
        host["harness"] = {"version": "unknown", "location": "the measured checkout",
                           "commit": repo.get("commit", "unknown"), "dirty": repo.get("dirty", "unknown")}
    suite = out.get("suite")
    if isinstance(suite, dict) and "engines" not in suite:
        names = {a.get("engine", declare.default_engine()) for a in suite.get("arms") or [] if isinstance(a, dict)}
        suite["engines"] = {n: declare.v1_declaration(n).to_dict() for n in sorted(names)}
    out["schema_version"] = 2
    return out


def migrate_v2(data: dict[str, Any]) -> dict[str, Any]:
    """schema_version 2 -> 3: `gate_wait_s` is `quiet_wait_s` (the wait for a quiet host)."""
    out = copy.deepcopy(data)
    for r in out.get("runs") or []:
        if isinstance(r, dict) and "gate_wait_s" in r:
            r["quiet_wait_s"] = r.pop("gate_wait_s")
    out["schema_version"] = 3
    return out


def migrate_v3(data: dict[str, Any]) -> dict[str, Any]:
    """schema_version 3 -> 4: nothing to convert; `models` stays absent (not read at the time)."""
    return {**data, "schema_version": 4}


def migrate_v4(data: dict[str, Any]) -> dict[str, Any]:
    """schema_version 4 -> 5: a run's ms_per_token is kept once, at its top level; the copy in
    its diagnostics goes (the top level takes it where it has none). Keys renamed: a run's
    dispatch_probe_ms, load.quiet_gate and mark quiet_gate_timeout, and more (migrate_v5)."""
    def moved(r: Any) -> Any:
        if not isinstance(r, dict):
            return r
        r = migrate_v5.run(r)
        d = r.get("diagnostics")
        if not isinstance(d, dict) or "ms_per_token" not in d:
            return r
        # Copies of what changes only: every record of version 4 comes through here.
        out = {**r, "diagnostics": {k: v for k, v in d.items() if k != "ms_per_token"}}
        if out.get("ms_per_token") is None and d["ms_per_token"] is not None:
            out["ms_per_token"] = d["ms_per_token"]
        return out
    out = {**data, "schema_version": 5}
    if isinstance(out.get("runs"), list):
        out["runs"] = [moved(r) for r in out["runs"]]
    return migrate_v5.record(out)


MIGRATIONS = {1: migrate_v1, 2: migrate_v2, 3: migrate_v3, 4: migrate_v4}


def section(d: dict[str, Any], name: str) -> dict[str, Any]:
    """A record's named sub-dict (a host's "gpu", a run's "engine"), {} where it is absent or not a dict:
    older records and foreign engines leave sections out."""
    v = d.get(name)
    return v if isinstance(v, dict) else {}


def load_record(data: Any, where: str) -> dict[str, Any]:
    """Any record version -> the current shape, checked; one-line UserError when it cannot be."""
    if not isinstance(data, dict) or data.get("kind") != RECORD_KIND:
        got = data.get("kind") if isinstance(data, dict) else None
        raise UserError(f"{where}: not a {RECORD_KIND} file (kind is {got!r})")
    check_version(data, where)
    record: dict[str, Any] = data
    while record.get("schema_version") in MIGRATIONS:
        record = MIGRATIONS[record["schema_version"]](record)
    check(record, Record, where)
    return record


def check_version(data: dict[str, Any], where: str) -> None:
    """One line when a record's schema_version is neither current nor migratable."""
    v = data.get("schema_version")
    if v != SCHEMA_VERSION and v not in MIGRATIONS:
        raise UserError(f"{where}: schema_version {v!r}; this harness reads schema_version "
                        f"{', '.join(map(str, sorted(MIGRATIONS)))} and {SCHEMA_VERSION} "
                        "(a newer harness wrote it? upgrade this one)")


def check(data: Any, typ: type, where: str) -> None:
    """Raise a one-line UserError naming the field when data does not have typ's shape."""
    try:
        msgspec.convert(data, typ)
    except msgspec.ValidationError as e:
        raise UserError(f"{where}: not a valid {typ.__name__}: {e}; "
                        "was it edited by hand or written by another tool?") from None


# --- published JSON Schema -----------------------------------------------------------------

PUBLISHED = {"engine-result.schema.json": EngineResult, "record.schema.json": Record,
             "baselines.schema.json": Baselines}


def json_schemas() -> dict[str, str]:
    """File name -> the JSON Schema text for it, as committed under schema/."""
    out = {}
    for name, typ in PUBLISHED.items():
        sch = msgspec.json.schema(typ)
        sch["$id"] = name
        sch["title"] = f"{typ.__name__} (harness schema_version {SCHEMA_VERSION})"
        out[name] = json.dumps(sch, indent=2, sort_keys=True) + "\n"
    return out


def stale_schemas(directory: Path = SCHEMA_DIR) -> list[str]:
    """Files under directory that differ from what this code generates (missing counts)."""
    return [n for n, text in json_schemas().items()
            if not (directory / n).is_file() or (directory / n).read_text(encoding="utf-8") != text]


def write_schemas(directory: Path = SCHEMA_DIR) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for n, text in json_schemas().items():
        (directory / n).write_text(text, encoding="utf-8")
        out.append(directory / n)
    return out
