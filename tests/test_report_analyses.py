"""The report's analyses beside the verdicts (harness.analyze.runnotes, overridepairs): typed
results the renderer only formats, computed from the record alone."""

from __future__ import annotations

import copy
from pathlib import Path

from harness.analyze import runnotes
from harness.analyze.facts import Facts
from harness.analyze.overridepairs import env_diff, one_override_pairs
from harness.ci.reportfiles import inputs_for
from harness.collect.record import read_record
from harness.collect.recordcheck import SET_ASIDE, SET_ASIDE_PREFIX
from harness.core.runs import as_record
from harness.core.schema import Identity

REPORTS = Path(__file__).resolve().parents[1] / "reports"
DEFAULT = REPORTS / "20261207-035522-default-linux-cpu.json"


def load_record(path: str) -> dict:
    """A record as its file gives it (migrated and checked), for a test to change before Facts."""
    return read_record(Path(path))


def _facts(data: dict, path: Path = DEFAULT) -> Facts:
    return Facts(str(path), as_record(data), inputs_for(data))


def test_one_override_pairs_are_typed_and_pair_only_one_variable_apart() -> None:
    fx = _facts(load_record(str(DEFAULT)))
    pairs = one_override_pairs(fx)
    assert {(p.a, p.b) for p in pairs} == {("block3", "block3-inexact")}
    assert [p.prompt for p in pairs] == fx.prompts
    for p in pairs:
        assert p.diff == "SPECDEC_ALLOW_INEXACT=1" and p.gate == ("declined", "overridden")
        assert p.lo is not None and p.hi is not None and p.lo <= p.ratio <= p.hi
        assert p.resolved == (p.lo > 1 or p.hi < 1)
    assert env_diff({"A": "1", "B": "2"}, {"B": "3"}) == ["without A", "B=3"]


def test_one_override_pairs_give_no_interval_from_too_few_runs() -> None:
    path = REPORTS / "20261205-032242-mtp-quant-ab-h200.json"
    pairs = one_override_pairs(_facts(load_record(str(path)), path))
    assert pairs and all(p.lo is None and p.hi is None and not p.resolved for p in pairs)


def test_left_out_groups_warmups_first_then_failures_by_error() -> None:
    data = copy.deepcopy(load_record(str(DEFAULT)))
    measured = [r for r in data["runs"] if not r.get("warmup")]
    a, b, c = measured[0], measured[1], measured[2]
    a.update(status="failed", error="boom")
    b.update(status="failed", error=SET_ASIDE_PREFIX + "no token", marks=["failed", SET_ASIDE])
    c.update(status="failed", error="boom", arm=a["arm"], prompt=a["prompt"])
    groups = runnotes.left_out(_facts(data))
    kinds = [g.kind for g in groups]
    assert kinds == sorted(kinds, key=lambda k: k != runnotes.WARMUP)
    failed = [g for g in groups if g.kind == runnotes.FAILED]
    boom = next(g for g in failed if g.error == "boom")
    assert boom.runs == (a["index"], c["index"]) and not boom.set_aside
    assert any(g.set_aside and g.runs == (b["index"],) for g in failed)
    assert [(s.index, s.why) for s in runnotes.set_aside(_facts(data))] == [(b["index"], "no token")]


def test_flagged_keeps_each_groups_first_quiet_wait_limit() -> None:
    data = copy.deepcopy(load_record(str(DEFAULT)))
    for r in data["runs"]:
        r["marks"] = [m for m in r.get("marks") or [] if m != "contended"]
    r1, r2 = [r for r in data["runs"] if not r.get("warmup")
              and (r["arm"], r["prompt"]) == ("classic", data["suite"]["prompts"][0]["name"])][:2]
    for r, limit in ((r1, 7.5), (r2, 99.0)):
        r["marks"] = ["quiet_wait_timeout"]
        r.setdefault("load", {}).setdefault("quiet_wait", {})["timeout_s"] = limit
    [g] = runnotes.flagged(_facts(data))
    assert g.kind == runnotes.QUIET_TIMEOUT and g.runs == (r1["index"], r2["index"]) and g.quiet_timeout_s == 7.5


def test_incomplete_says_whether_every_planned_run_is_there() -> None:
    data = copy.deepcopy(load_record(str(DEFAULT)))
    assert runnotes.incomplete(_facts(data)) is None
    data["complete"], data["planned_runs"] = False, len(data["runs"])
    assert runnotes.incomplete(_facts(data)) == runnotes.Incomplete(len(data["runs"]), len(data["runs"]))
    data["planned_runs"] = len(data["runs"]) + 5
    assert not runnotes.incomplete(_facts(data)).runs_all_there


def test_arm_lists_follow_the_suites_order() -> None:
    fx = _facts(load_record(str(DEFAULT)))
    assert runnotes.declined_arms(fx) == ["block2", "block3", "block4"]
    assert runnotes.not_shipping_arms(fx) == ["block2", "block3", "block4", "block3-inexact"]
    assert runnotes.overridden_arms(fx) == ["block3-inexact"]


def test_classic_checks_compare_the_first_run_with_its_targets_classic_run() -> None:
    from harness.analyze.outputs import classic_checks, first_differing
    data = copy.deepcopy(load_record(str(DEFAULT)))
    fx = _facts(data)
    checks = classic_checks(fx)
    assert checks and all(c.classic_arm == "classic" for c in checks.values())
    assert all(fx.arms[arm].block > 1 for arm, _ in checks)
    # A declined arm decoded classic: its tokens are classic's.
    declined = [c for (arm, _), c in checks.items() if not c.engaged]
    assert declined and all(c.result.status == "identical" for c in declined)
    run = fx.groups[("block2", fx.prompts[0])][1]
    run.identity = Identity(status="differs", first_token=4)
    assert first_differing(fx, "block2", fx.prompts[0]) == Identity(status="differs", first_token=4)
    assert first_differing(fx, "block2", fx.prompts[1]) is None


def test_acceptance_pairs_only_arms_of_one_pairing_and_block_that_speculated() -> None:
    from harness.analyze.outputs import acceptance
    path = REPORTS / "20261205-084154-mtp-study-linux-cpu.json"
    fx = _facts(load_record(str(path)), path)
    a = acceptance(fx)
    spec = [u.arm for u in a.unpaired]
    assert spec == [x for x in fx.arm_order if fx.arms[x].block > 1 and fx.engaged(x)]
    for r in a.paired:
        assert (fx.arms[r.a].pairing, fx.arms[r.a].block) == (fx.arms[r.b].pairing, fx.arms[r.b].block)


def test_compare_records_groups_components_and_counts_detectable_range() -> None:
    from harness.analyze.recordpair import by_verdict, compare_records, detectable_range
    a = REPORTS / "20261205-021945-random-8b-spec-cudnn-on-h200.json"
    b = REPORTS / "20261205-022112-random-8b-spec-h200.json"
    rp = compare_records(_facts(load_record(str(a)), a), _facts(load_record(str(b)), b))
    assert not rp.cross
    assert all(c.component != "ms/token" for cs in rp.components for c in cs)
    assert sum(map(len, rp.components)) == len(rp.component_changes)
    assert sum(map(len, by_verdict(rp.changes).values())) == len(rp.changes)
    rng = detectable_range(rp.changes)
    assert len(rng) <= 2 and rng == sorted(rng)
