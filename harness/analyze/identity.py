"""Identity: a run's output against its arm's own baseline, and what a baseline session
stores; pure (the baselines file is read and written by harness.collect.baselines).

The reference for byte identity is the arm's own earlier output on the same host, keyed by
(pairing, arm, prompt, max_tokens, temp, seed). Classic decode is only a reference where
the gate passed without override; on hosts where the verify block is not byte-identical
to the single-token chain, comparing with classic fails for reasons that are not the
drafter's, so that comparison is information only.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import msgspec
from msgspec import UNSET, UnsetType

from harness.core.baselinefile import BaselineEntry, BaselineOutput
from harness.core.schema import Identity, Record, Run
from harness.core.suitespec import Arm, Settings

CONTEXT_BYTES = 24

Status = Literal["identical", "differs", "no_baseline", "no_output", "not_compared"]


def identity_key(pairing: str, arm: str, prompt: str, max_tokens: int, temp: float, seed: int) -> str:
    return f"{pairing}|{arm}|{prompt}|max_tokens={max_tokens}|temp={float(temp):g}|seed={seed}"


def run_key(run: Run, settings: Settings) -> str:
    return identity_key(str(run.pairing), str(run.arm), str(run.prompt), settings.max_tokens,
                        settings.temp, settings.seed)


class Baselines(Protocol):
    """Where a run's baseline is looked up by its identity key (harness.collect.baselines.BaselineStore)."""

    def get(self, key: str) -> BaselineEntry | None: ...


@dataclass(frozen=True)
class Reference:
    """The output a run is compared with: a baseline's, or another run's."""

    token_ids: list[int]
    text: str | None = None
    recorded: str | None = None       # when the baseline was recorded (a run: None)

    @classmethod
    def of_run(cls, run: Run) -> Reference:
        return cls(list(run.token_ids or []), run.text)

    @classmethod
    def of_baseline(cls, entry: BaselineOutput) -> Reference:
        return cls(entry.token_ids, entry.text, entry.recorded)


class Comparison(msgspec.Struct, kw_only=True):
    """One output against its reference, in the shape a run's `identity` field stores it
    (schema.Identity reads it back). An unset field is absent from that JSON; a set None is null:
    a difference always names both tokens and when the baseline was recorded, and says the byte
    offset only where both outputs have text."""

    status: Status
    reason: str | UnsetType = UNSET                 # not_compared: why
    first_token: int | UnsetType = UNSET            # differs: the first differing token's index
    ours_token: int | None | UnsetType = UNSET      # the ids there (None: past that output's end)
    baseline_token: int | None | UnsetType = UNSET
    baseline_recorded: str | None | UnsetType = UNSET
    byte_offset: int | None | UnsetType = UNSET     # the first differing byte of the texts
    ours: str | UnsetType = UNSET                   # CONTEXT_BYTES either side of that byte
    baseline: str | UnsetType = UNSET

    def stored(self) -> dict[str, Any]:
        """The JSON object a record keeps."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


# --- comparing -----------------------------------------------------------------------

def first_token_difference(ours: list[int], base: list[int]) -> int | None:
    """Index of the first differing token; a strict prefix differs at the shorter length."""
    for i, (a, b) in enumerate(zip(ours, base)):
        if a != b:
            return i
    return None if len(ours) == len(base) else min(len(ours), len(base))


def first_byte_difference(ours: bytes, base: bytes) -> int | None:
    for i, (a, b) in enumerate(zip(ours, base)):
        if a != b:
            return i
    return None if len(ours) == len(base) else min(len(ours), len(base))


def _context(b: bytes, offset: int) -> str:
    lo = max(0, offset - CONTEXT_BYTES)
    return b[lo:offset + CONTEXT_BYTES].decode("utf-8", "replace")


def compare_output(ours_ids: list[int] | None, ours_text: str | None, base: Reference | None) -> Comparison:
    """identical | differs (first token index, byte offset, context from both) | no_baseline."""
    if base is None:
        return Comparison(status="no_baseline")
    if ours_ids is None:
        return Comparison(status="no_output")
    ti = first_token_difference(list(ours_ids), list(base.token_ids))
    if ti is None:
        return Comparison(status="identical")
    out = Comparison(status="differs", first_token=ti,
                     ours_token=ours_ids[ti] if ti < len(ours_ids) else None,
                     baseline_token=base.token_ids[ti] if ti < len(base.token_ids) else None,
                     baseline_recorded=base.recorded)
    if ours_text is not None and base.text is not None:
        ob, bb = ours_text.encode("utf-8"), base.text.encode("utf-8")
        out.byte_offset = bo = first_byte_difference(ob, bb)
        if bo is not None:
            out.ours, out.baseline = _context(ob, bo), _context(bb, bo)
    return out


def _settings(settings: Settings | Mapping[str, Any]) -> Settings:
    return settings if isinstance(settings, Settings) else msgspec.convert(settings, Settings)


def annotate_identity(run: Run, store: Baselines, settings: Settings | Mapping[str, Any]) -> Run:
    """Fill a run's identity field against its own baseline (settings: the suite's)."""
    if not run.is_ok:
        cmp = Comparison(status="not_compared", reason="run failed")
    else:
        entry = store.get(run_key(run, _settings(settings)))
        cmp = compare_output(run.token_ids, run.text, None if entry is None else Reference.of_baseline(entry))
    run.identity = msgspec.convert(cmp.stored(), Identity)
    return run


def describe(identity: Identity | Comparison | None) -> str:
    """A run's identity in words: its status, and where a difference is."""
    if identity is None:
        return "-"
    if identity.status != "differs":
        return identity.status
    s = f"differs at token {identity.first_token}"
    if isinstance(identity.byte_offset, int):
        s += f", byte {identity.byte_offset}: ours {identity.ours!r} vs baseline {identity.baseline!r}"
    return s


# --- recording ------------------------------------------------------------------------

@dataclass(frozen=True)
class BaselineOutcome:
    """What a baseline session does with one identity key."""

    key: str
    status: str      # stored | updated | unchanged | inconclusive | exists_differs
    detail: str = ""
    # The entry to store at `key` (stored, updated); None where the file keeps what it has.
    entry: BaselineEntry | None = None


def _entry(record: Record, first: Run, recorded: str) -> BaselineEntry:
    settings = record.suite.settings
    sha = first.text_sha256 or (hashlib.sha256(first.text.encode()).hexdigest() if first.text is not None else None)
    return BaselineEntry(pairing=first.pairing, arm=first.arm, prompt=first.prompt,
                         max_tokens=settings.max_tokens, temp=settings.temp, seed=settings.seed,
                         token_ids=list(first.token_ids or []), text=first.text, text_sha256=sha,
                         recorded=recorded, session_id=record.session_id, engine=msgspec.to_builtins(first.engine_info),
                         label=first.label, target=first.result_arm.target, drafter=first.result_arm.drafter)


def record_baselines(record: Record, entries: Mapping[str, BaselineEntry], recorded: str,
                     update: bool = False) -> list[BaselineOutcome]:
    """From a baseline session (each arm run twice), one output per key against the baselines
    already there (`entries`), stamped `recorded`; the caller stores each outcome's entry.

    Two runs that disagree make the key INCONCLUSIVE and nothing is stored. An existing,
    different baseline is replaced only with update=True, and the old one goes to history.
    """
    groups: dict[str, list[Run]] = {}
    for r in record.runs:
        if not r.warmup:
            groups.setdefault(run_key(r, record.suite.settings), []).append(r)
    outcomes: list[BaselineOutcome] = []
    for key, runs in groups.items():
        ok = [r for r in runs if r.measured_ok and r.token_ids is not None]
        if len(ok) < 2:
            outcomes.append(BaselineOutcome(key, "inconclusive",
                                            f"{len(ok)} usable run(s) of {len(runs)}; need 2 that agree"))
            continue
        first = ok[0]
        disagree = [r for r in ok[1:] if r.token_ids != first.token_ids]
        if disagree:
            i = first_token_difference(disagree[0].token_ids or [], first.token_ids or [])
            outcomes.append(BaselineOutcome(key, "inconclusive",
                                            f"INCONCLUSIVE: the runs disagree at token {i}"))
            continue
        entry = _entry(record, first, recorded)
        old = entries.get(key)
        if old is None:
            outcomes.append(BaselineOutcome(key, "stored", entry=entry))
        elif old.token_ids == entry.token_ids:
            outcomes.append(BaselineOutcome(key, "unchanged", f"matches the baseline of {old.recorded}"))
        elif not update:
            d = compare_output(entry.token_ids, entry.text, Reference.of_baseline(old))
            outcomes.append(BaselineOutcome(key, "exists_differs",
                                            f"kept the baseline of {old.recorded}; new output {describe(d)}; "
                                            "pass --update to replace it (the old one is kept in history)"))
        else:
            entry.history = [*old.history, old.output()]
            outcomes.append(BaselineOutcome(key, "updated", f"previous baseline of {old.recorded} kept in history",
                                            entry=entry))
    return outcomes


# --- information only: speculative arms against classic -------------------------------

@dataclass(frozen=True)
class ClassicComparison:
    """A speculative arm's output against the classic arm's on the same prompt."""

    comparison: Comparison
    classic_arm: str


def classic_comparisons(suite_arms: Sequence[Arm], runs: Sequence[Run]) -> dict[tuple[str, str], ClassicComparison]:
    """(arm, prompt) -> comparison with the classic arm of the same pairing and engine, over a
    record's arms and runs.

    Only for arms whose every run passed the gate without override; elsewhere classic decode
    is not a valid reference (see the module docstring).
    """
    arms = {a.name: a for a in suite_arms}
    ok = [r for r in runs if r.measured_ok and r.token_ids is not None]
    classic_out: dict[tuple[str, str, str], Run] = {}
    for r in ok:
        a = arms.get(str(r.arm))
        if a is not None and a.block == 1:
            classic_out.setdefault((a.pairing, a.engine, str(r.prompt)), r)
            classic_out.setdefault((a.pairing, "*", str(r.prompt)), r)
    out: dict[tuple[str, str], ClassicComparison] = {}
    for r in ok:
        a, key = arms.get(str(r.arm)), (str(r.arm), str(r.prompt))
        if a is None or a.block == 1 or key in out:
            continue
        mine = [x for x in ok if (x.arm, x.prompt) == (r.arm, r.prompt)]
        if not all(x.shipping and x.gate.outcome == "passed" for x in mine):
            continue
        ref = classic_out.get((a.pairing, a.engine, key[1])) or classic_out.get((a.pairing, "*", key[1]))
        if ref is None:
            continue
        out[key] = ClassicComparison(compare_output(r.token_ids, r.text, Reference.of_run(ref)), str(ref.arm))
    return out


# --- identity against another commit's output ---------------------------------------------

@dataclass
class IdentityRow:
    arm: str
    prompt: str
    status: str          # identical | differs | unknown | nondeterministic
    detail: str = ""


def _outputs(runs: list[Run]) -> dict[tuple[str, str], list[Run]]:
    out: dict[tuple[str, str], list[Run]] = {}
    for r in runs:
        if r.is_ok and r.token_ids is not None:   # warm-ups too: any output compares
            out.setdefault((str(r.arm), str(r.prompt)), []).append(r)
    return out


def identity_rows(base_runs: list[Run], head_runs: list[Run]) -> list[IdentityRow]:
    """Each arm and prompt's head outputs against base's; each side's runs (its records')."""
    base, head = _outputs(base_runs), _outputs(head_runs)
    rows = []
    for key in sorted(set(base) | set(head)):
        arm, prompt = key
        if key not in base or key not in head:
            rows.append(IdentityRow(arm, prompt, "unknown",
                                    f"no successful run at {'base' if key not in base else 'head'}"))
            continue
        distinct_head = {r.text_sha256 for r in head[key]}
        distinct_base = {r.text_sha256 for r in base[key]}
        ref = Reference.of_run(base[key][0])
        if len(distinct_base) > 1:
            rows.append(IdentityRow(arm, prompt, "nondeterministic",
                                    f"{len(distinct_base)} different outputs within base's own runs"))
            continue
        diffs = [compare_output(r.token_ids, r.text, ref) for r in head[key]]
        bad = [d for d in diffs if d.status != "identical"]
        if bad:
            rows.append(IdentityRow(arm, prompt, "differs",
                                    f"{len(bad)} of {len(diffs)} head runs: {describe(bad[0])}"))
        elif len(distinct_head) > 1:
            rows.append(IdentityRow(arm, prompt, "nondeterministic", "head's runs disagree"))
        else:
            rows.append(IdentityRow(arm, prompt, "identical", f"{len(diffs)} head runs vs base"))
    return rows
