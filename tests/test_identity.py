"""Identity against each arm's own baseline: exact first token and byte offset, INCONCLUSIVE
baselines, never overwriting silently, and the classic comparison as information only."""

from __future__ import annotations

from pathlib import Path

import msgspec
from harness_helpers import command_arm, last_json, load, run_cli, write_suite

from harness.analyze.identity import (
    Reference,
    classic_comparisons,
    compare_output,
    first_byte_difference,
    first_token_difference,
    identity_key,
    record_baselines,
)
from harness.collect.baselines import BaselineStore
from harness.core.schema import Record


def _store(outcomes: list, store: BaselineStore) -> list:
    """The baseline command's step: each outcome's entry put in the store."""
    for o in outcomes:
        if o.entry is not None:
            store.put(o.key, o.entry)
    return outcomes


def _record_into(record: Record, store: BaselineStore, update: bool = False) -> list:
    return _store(record_baselines(record, store.entries, "2026-12-07T00:00:00", update=update), store)


def test_first_difference_token_and_byte_offset() -> None:
    # "héllo " is 7 bytes (é is two), so the first differing byte of the last word is 7.
    base = Reference([1, 2, 3, 4], "héllo world")
    d = compare_output([1, 2, 3, 5], "héllo wörld", base)
    assert d.status == "differs" and d.first_token == 3
    assert d.byte_offset == 8                         # 'w' at 7 matches, then ö (c3 b6) vs o
    assert d.ours == "héllo wörld" and d.baseline == "héllo world"
    assert d.ours_token == 5 and d.baseline_token == 4
    # As a run's identity field keeps it: both tokens and the baseline's date even where null.
    assert d.stored() == {"status": "differs", "first_token": 3, "ours_token": 5, "baseline_token": 4,
                          "baseline_recorded": None, "byte_offset": 8, "ours": "héllo wörld",
                          "baseline": "héllo world"}
    assert compare_output([1, 2], None, Reference([1, 3], "ab")).stored() == {
        "status": "differs", "first_token": 1, "ours_token": 2, "baseline_token": 3, "baseline_recorded": None}
    assert first_byte_difference("héllo a".encode(), "héllo b".encode()) == 7


def test_prefix_and_identical_and_missing() -> None:
    assert first_token_difference([1, 2], [1, 2, 3]) == 2
    assert first_token_difference([1, 2], [1, 2]) is None
    assert compare_output([1, 2], "ab", Reference([1, 2], "ab")).stored() == {"status": "identical"}
    assert compare_output([1], "a", None).stored() == {"status": "no_baseline"}
    assert compare_output(None, None, Reference([1])).stored() == {"status": "no_output"}


def _record(outputs: dict[str, list[list[int]]]) -> Record:
    runs = []
    for arm, outs in outputs.items():
        for i, ids in enumerate(outs):
            runs.append({"index": len(runs), "arm": arm, "pairing": "fx", "prompt": "p1", "repetition": i,
                         "warmup": False, "status": "ok", "token_ids": ids, "text": "".join(map(chr, ids)),
                         "shipping": True, "gate": {"outcome": "passed"}})
    arms = [{"name": a, "pairing": "fx", "engine": "command", "block": 1 if a == "classic" else 3,
             "env": {}, "timeout_s": 60.0}
            for a in outputs]
    suite = {"name": "s", "settings": {"max_tokens": 3, "temp": 0.0, "seed": 0}, "arms": arms,
             "pairings": [{"name": "fx", "target": "t"}], "prompts": [{"name": "p1", "text": "x"}]}
    return msgspec.convert({"schema_version": 5, "kind": "harness.record", "session_id": "s", "created": "c",
                            "suite": suite, "runs": runs}, Record)


def test_disagreeing_runs_are_inconclusive_and_not_stored(tmp_path: Path) -> None:
    store = BaselineStore.load(tmp_path / "b.json")
    out = _record_into(_record({"a": [[97, 98, 99], [97, 98, 100]]}), store)
    assert out[0].status == "inconclusive" and "INCONCLUSIVE" in out[0].detail and "token 2" in out[0].detail
    assert store.entries == {}


def test_never_overwrite_silently_and_update_keeps_history(tmp_path: Path) -> None:
    store = BaselineStore.load(tmp_path / "b.json")
    key = identity_key("fx", "a", "p1", 3, 0.0, 0)
    assert _record_into(_record({"a": [[97, 98, 99]] * 2}), store)[0].status == "stored"
    store.save()
    store = BaselineStore.load(tmp_path / "b.json")
    assert _record_into(_record({"a": [[97, 98, 99]] * 2}), store)[0].status == "unchanged"
    o = _record_into(_record({"a": [[97, 120, 99]] * 2}), store)[0]
    assert o.status == "exists_differs" and "--update" in o.detail
    assert store.get(key).token_ids == [97, 98, 99]
    o = _record_into(_record({"a": [[97, 120, 99]] * 2}), store, update=True)[0]
    assert o.status == "updated"
    assert store.get(key).token_ids == [97, 120, 99]
    assert store.get(key).history[0].token_ids == [97, 98, 99]
    store.save()
    assert load(tmp_path / "b.json")["entries"][key]["history"][0]["token_ids"] == [97, 98, 99]


def test_classic_comparison_only_where_gate_passed_without_override() -> None:
    rec = _record({"classic": [[97, 98]], "b3": [[97, 99]], "b3x": [[97, 98]]})
    for r in rec.runs:
        if r.arm == "b3x":
            r.shipping, r.gate.outcome = False, "overridden"
    cmp = classic_comparisons(rec.suite.arms, rec.runs)
    assert cmp[("b3", "p1")].comparison.status == "differs" and cmp[("b3", "p1")].comparison.first_token == 1
    assert cmp[("b3", "p1")].classic_arm == "classic"
    assert ("b3x", "p1") not in cmp


def test_cli_baseline_then_check_finds_the_exact_difference(tmp_path: Path) -> None:
    suite = write_suite(tmp_path, [command_arm("classic"), command_arm("b3", 3)], max_tokens=12)
    b = tmp_path / "base.json"
    r = run_cli("baseline", "record", str(suite), "--baselines", str(b), "--record", str(tmp_path / "r1.json"),
                "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert {o["status"] for o in last_json(r.stdout)["outcomes"]} == {"stored"}
    assert len(load(b)["entries"]) == 2

    r = run_cli("check", str(suite), "--baselines", str(b), "--record", str(tmp_path / "r2.json"), cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr

    r = run_cli("check", str(suite), "--baselines", str(b), "--record", str(tmp_path / "r3.json"),
                cwd=tmp_path, FAKE_PERTURB_AT="5")
    assert r.returncode == 1
    idents = [run["identity"] for run in load(tmp_path / "r3.json")["runs"]]
    assert all(i["status"] == "differs" and i["first_token"] == 5 and i["byte_offset"] == 5 for i in idents)
    assert "differs at token 5, byte 5" in r.stdout

    # A plain run compares too; the baseline file is not changed by run or check.
    before = b.read_text()
    r = run_cli("run", str(suite), "--baselines", str(b), "--record", str(tmp_path / "r4.json"), "--json", cwd=tmp_path)
    assert r.returncode == 0 and last_json(r.stdout)["identity_differs"] == 0
    assert b.read_text() == before

    # Recording again with different output refuses without --update, keeps the old one.
    r = run_cli("baseline", "record", str(suite), "--baselines", str(b), "--record", str(tmp_path / "r5.json"),
                "--json", cwd=tmp_path, FAKE_PERTURB_AT="5")
    assert r.returncode == 1 and {o["status"] for o in last_json(r.stdout)["outcomes"]} == {"exists_differs"}
    assert b.read_text() == before
    r = run_cli("baseline", "record", str(suite), "--update", "--baselines", str(b), "--record",
                str(tmp_path / "r6.json"), cwd=tmp_path, FAKE_PERTURB_AT="5")
    assert r.returncode == 0
    assert all(len(e["history"]) == 1 for e in load(b)["entries"].values())


def test_recording_baselines_is_pure_and_stamps_what_it_is_given(tmp_path: Path) -> None:
    # The analysis touches neither the entries it reads nor any file: the caller stores.
    entries: dict = {}
    out = record_baselines(_record({"a": [[97, 98, 99]] * 2}), entries, "STAMP")
    assert entries == {} and not list(tmp_path.iterdir())
    assert out[0].status == "stored" and out[0].entry.recorded == "STAMP"
    assert record_baselines(_record({"a": [[97, 98]] * 2}), {out[0].key: out[0].entry}, "S2")[0].entry is None
