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
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import msgspec

from harness.core.runs import as_runs, measured_ok
from harness.core.schema import Identity, Run

CONTEXT_BYTES = 24


def identity_key(pairing: str, arm: str, prompt: str, max_tokens: int, temp: float, seed: int) -> str:
    return f"{pairing}|{arm}|{prompt}|max_tokens={max_tokens}|temp={float(temp):g}|seed={seed}"


def run_key(run: dict[str, Any], settings: dict[str, Any]) -> str:
    return identity_key(run["pairing"], run["arm"], run["prompt"], settings["max_tokens"],
                        settings["temp"], settings["seed"])


class Baselines(Protocol):
    """Where a run's baseline is looked up by its identity key (harness.collect.baselines.BaselineStore)."""

    def get(self, key: str) -> dict[str, Any] | None: ...


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


def compare_output(ours_ids: list[int] | None, ours_text: str | None,
                   base: dict[str, Any] | None) -> dict[str, Any]:
    """identical | differs (first token index, byte offset, context from both) | no_baseline."""
    if base is None:
        return {"status": "no_baseline"}
    if ours_ids is None:
        return {"status": "no_output"}
    ti = first_token_difference(list(ours_ids), list(base["token_ids"]))
    if ti is None:
        return {"status": "identical"}
    out: dict[str, Any] = {"status": "differs", "first_token": ti,
                           "ours_token": ours_ids[ti] if ti < len(ours_ids) else None,
                           "baseline_token": base["token_ids"][ti] if ti < len(base["token_ids"]) else None,
                           "baseline_recorded": base.get("recorded")}
    if ours_text is not None and base.get("text") is not None:
        ob, bb = ours_text.encode("utf-8"), base["text"].encode("utf-8")
        bo = first_byte_difference(ob, bb)
        out["byte_offset"] = bo
        if bo is not None:
            out["ours"] = _context(ob, bo)
            out["baseline"] = _context(bb, bo)
    return out


def annotate_identity(run: Run, store: Baselines, settings: Any) -> Run:
    """Fill a run's identity field against its own baseline (settings: the suite's)."""
    if not run.is_ok:
        run.identity = Identity(status="not_compared", reason="run failed")
    else:
        key = identity_key(run.pairing or "", run.arm or "", run.prompt or "", settings.max_tokens, settings.temp, settings.seed)
        run.identity = msgspec.convert(compare_output(run.token_ids, run.text, store.get(key)), Identity)
    return run


def describe(identity: dict[str, Any]) -> str:
    st: str = identity.get("status", "-")
    if st != "differs":
        return st
    s = f"differs at token {identity['first_token']}"
    if identity.get("byte_offset") is not None:
        s += f", byte {identity['byte_offset']}: ours {identity.get('ours')!r} vs baseline {identity.get('baseline')!r}"
    return s


# --- recording ------------------------------------------------------------------------

@dataclass(frozen=True)
class BaselineOutcome:
    """What a baseline session does with one identity key."""

    key: str
    status: str      # stored | updated | unchanged | inconclusive | exists_differs
    detail: str = ""
    # The entry to store at `key` (stored, updated); None where the file keeps what it has.
    entry: dict[str, Any] | None = None


def record_baselines(record: dict[str, Any], entries: Mapping[str, dict[str, Any]], recorded: str,
                     update: bool = False) -> list[BaselineOutcome]:
    """From a baseline session (each arm run twice), one output per key against the baselines
    already there (`entries`), stamped `recorded`; the caller stores each outcome's entry.

    Two runs that disagree make the key INCONCLUSIVE and nothing is stored. An existing,
    different baseline is replaced only with update=True, and the old one goes to history.
    """
    settings = record["suite"]["settings"]
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in record["runs"]:
        if not r.get("warmup"):
            groups.setdefault(run_key(r, settings), []).append(r)
    outcomes: list[BaselineOutcome] = []
    for key, runs in groups.items():
        ok = [r for r in runs if measured_ok(r) and r.get("token_ids") is not None]
        if len(ok) < 2:
            outcomes.append(BaselineOutcome(key, "inconclusive",
                                            f"{len(ok)} usable run(s) of {len(runs)}; need 2 that agree"))
            continue
        first = ok[0]
        disagree = [r for r in ok[1:] if r["token_ids"] != first["token_ids"]]
        if disagree:
            i = first_token_difference(disagree[0]["token_ids"], first["token_ids"])
            outcomes.append(BaselineOutcome(key, "inconclusive",
                                            f"INCONCLUSIVE: the runs disagree at token {i}"))
            continue
        entry = {
            "pairing": first["pairing"], "arm": first["arm"], "prompt": first["prompt"],
            "max_tokens": settings["max_tokens"], "temp": settings["temp"], "seed": settings["seed"],
            "token_ids": first["token_ids"], "text": first.get("text"),
            "text_sha256": first.get("text_sha256") or (
                hashlib.sha256(first["text"].encode()).hexdigest() if first.get("text") is not None else None),
            "recorded": recorded, "session_id": record.get("session_id"),
            "engine": first.get("engine_info") or {}, "label": first.get("label"),
            "target": (first.get("result_arm") or {}).get("target"),
            "drafter": (first.get("result_arm") or {}).get("drafter"),
            "history": [],
        }
        old = entries.get(key)
        if old is None:
            outcomes.append(BaselineOutcome(key, "stored", entry=entry))
        elif old["token_ids"] == entry["token_ids"]:
            outcomes.append(BaselineOutcome(key, "unchanged", f"matches the baseline of {old.get('recorded')}"))
        elif not update:
            d = compare_output(entry["token_ids"], entry["text"], old)
            outcomes.append(BaselineOutcome(key, "exists_differs",
                                            f"kept the baseline of {old.get('recorded')}; new output {describe(d)}; "
                                            "pass --update to replace it (the old one is kept in history)"))
        else:
            hist = list(old.get("history") or [])
            hist.append({k: v for k, v in old.items() if k != "history"})
            entry["history"] = hist
            outcomes.append(BaselineOutcome(key, "updated", f"previous baseline of {old.get('recorded')} kept in history",
                                            entry=entry))
    return outcomes


# --- information only: speculative arms against classic -------------------------------

def classic_comparisons(record: dict[str, Any], runs: list[Run] | None = None) -> dict[tuple[str, str], dict[str, Any]]:
    """(arm, prompt) -> comparison with the classic arm of the same pairing and engine; runs:
    the record's runs typed, where the caller has them so.

    Only for arms whose every run passed the gate without override; elsewhere classic decode
    is not a valid reference (see the module docstring).
    """
    arms = {a["name"]: a for a in record["suite"]["arms"]}
    ok = [r for r in (as_runs(record["runs"]) if runs is None else runs)
          if r.measured_ok and r.token_ids is not None]
    classic_out: dict[tuple[str, str, str], Run] = {}
    for r in ok:
        a = arms.get(str(r.arm), {})
        if a.get("block") == 1:
            classic_out.setdefault((a["pairing"], a["engine"], str(r.prompt)), r)
            classic_out.setdefault((a["pairing"], "*", str(r.prompt)), r)
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for r in ok:
        a, key = arms.get(str(r.arm), {}), (str(r.arm), str(r.prompt))
        if a.get("block", 1) == 1 or key in out:
            continue
        mine = [x for x in ok if (x.arm, x.prompt) == (r.arm, r.prompt)]
        if not all(x.shipping and x.gate.outcome == "passed" for x in mine):
            continue
        ref = classic_out.get((a["pairing"], a["engine"], key[1])) or classic_out.get((a["pairing"], "*", key[1]))
        if ref is None:
            continue
        cmp = compare_output(r.token_ids, r.text, {"token_ids": ref.token_ids, "text": ref.text})
        cmp["classic_arm"] = ref.arm
        out[key] = cmp
    return out


# --- identity against another commit's output ---------------------------------------------

@dataclass
class IdentityRow:
    arm: str
    prompt: str
    status: str          # identical | differs | unknown | nondeterministic
    detail: str = ""


def _outputs(records: list[dict[str, Any]]) -> dict[tuple[str, str], list[Run]]:
    out: dict[tuple[str, str], list[Run]] = {}
    for rec in records:
        for r in as_runs(rec.get("runs", [])):
            if r.is_ok and r.token_ids is not None:   # warm-ups too: any output compares
                out.setdefault((str(r.arm), str(r.prompt)), []).append(r)
    return out


def identity_rows(records: dict[str, list[dict[str, Any]]]) -> list[IdentityRow]:
    """Each arm and prompt's head outputs against base's; records: each side's records."""
    base, head = _outputs(records.get("base", [])), _outputs(records.get("head", []))
    rows = []
    for key in sorted(set(base) | set(head)):
        arm, prompt = key
        if key not in base or key not in head:
            rows.append(IdentityRow(arm, prompt, "unknown",
                                    f"no successful run at {'base' if key not in base else 'head'}"))
            continue
        distinct_head = {r.text_sha256 for r in head[key]}
        distinct_base = {r.text_sha256 for r in base[key]}
        ref = base[key][0]
        if len(distinct_base) > 1:
            rows.append(IdentityRow(arm, prompt, "nondeterministic",
                                    f"{len(distinct_base)} different outputs within base's own runs"))
            continue
        diffs = [compare_output(r.token_ids, r.text, {"token_ids": ref.token_ids, "text": ref.text}) for r in head[key]]
        bad = [d for d in diffs if d["status"] != "identical"]
        if bad:
            rows.append(IdentityRow(arm, prompt, "differs",
                                    f"{len(bad)} of {len(diffs)} head runs: {describe(bad[0])}"))
        elif len(distinct_head) > 1:
            rows.append(IdentityRow(arm, prompt, "nondeterministic", "head's runs disagree"))
        else:
            rows.append(IdentityRow(arm, prompt, "identical", f"{len(diffs)} head runs vs base"))
    return rows
