"""Phase roles: the analyses find the drafting and verify phases through the engine's declaration
(suite.engines[NAME].roles), never by specdec's names.

The frozen report fixture (specdec's phases, a profile-mode arm and its unprofiled twin) is
renamed throughout to an engine whose phases are "propose" and "score": with those declared as
its roles, its round split, profile and cost sections are the fixture's, word for word but for
the names; with no roles declared, the report keeps every section that needs none and says
which figures it leaves out.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from harness_helpers import REPO, declared_engine_suite, md_section, write_record

from harness.analyze import costreport, rounds
from harness.ci import reportfiles as report_cli
from harness.cli.report import backfill
from harness.core import declare
from harness.core.errors import UserError
from harness.core.runs import as_record
from harness.core.schema import load_record
from harness.render import reportcontext as rp

RECORD = REPO / "tests" / "fixtures" / "report" / "record.json"
NO_USER_TEMPLATES = REPO / "tests" / "fixtures" / "report" / "no-such-templates"
RENAME = {"draft_block": "propose", "verify_forward": "score"}
BACKFILL = backfill()   # what the schema-1 fixture lacks (host spec, tensor tables), as `harness report` reads it


@pytest.fixture(autouse=True)
def _at_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)    # the fixture's model directories are relative to the repository


def migrated() -> dict[str, Any]:
    """The fixture as the current schema reads it: suite.engines states each declaration."""
    return load_record(json.loads(RECORD.read_text()), str(RECORD))


def renamed(rec: dict[str, Any], text: str | None = None) -> Any:
    """A record (or a report's text) with specdec's phase names replaced everywhere."""
    out = json.dumps(rec) if text is None else text
    for old, new in RENAME.items():
        out = out.replace(old, new)
    return json.loads(out) if text is None else out


def render(tmp: Path, rec: dict[str, Any]) -> str:
    # The same file name in its own folder: the report names the record it reads.
    tmp.mkdir()
    return rp.render(report_cli.context_for(write_record(tmp, "r.json", rec), None, BACKFILL), "record",
                     user_dir=NO_USER_TEMPLATES).replace(str(tmp), "TMP")


def without_roles(rec: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(rec)
    for name, d in out["suite"]["engines"].items():
        d.pop("roles", None)
        d["adapter"] = "command"       # an engine that never declared roles (no built-in's to fall back on)
        d["name"] = name
    return out


def test_the_fixture_declares_specdecs_roles() -> None:
    rec = migrated()
    for a in rec["suite"]["arms"]:
        decl = declare.of_record(rec, a["name"])
        assert decl.phase_for(declare.ROLE_DRAFT) == "draft_block"
        assert decl.phase_for(declare.ROLE_VERIFY) == "verify_forward"


def test_other_phase_names_with_declared_roles_report_the_same_numbers(tmp_path: Path) -> None:
    rec = migrated()
    other = renamed(rec)
    assert {e["roles"]["draft"] for e in other["suite"]["engines"].values()} == {"propose"}
    assert "draft_block" not in json.dumps(other)
    base, got = render(tmp_path / "a", rec), render(tmp_path / "b", other)
    assert got == renamed(rec, base)
    # What the literal names used to give, now found through the roles: the drafter step, the
    # what-if table and its model in the engine's own names.
    prof = md_section(got, "Appendix")
    assert "forwards per round inside propose, synced" in prof
    cost = md_section(got, "Cost model")
    assert "What-if" in cost and "its propose + score (" in cost
    assert "draft_block" not in got and "verify_forward" not in got


def test_the_analyses_read_the_declared_phases(tmp_path: Path) -> None:
    rec, other = migrated(), renamed(migrated())
    [p], [q] = rounds.profile_comparisons(rec), rounds.profile_comparisons(other)
    assert (q.draft_phase, q.verify_phase) == ("propose", "score")
    assert q.drafter_step_ms == p.drafter_step_ms is not None
    assert q.drafter_steps_per_round == p.drafter_steps_per_round


def test_an_engine_without_roles_keeps_what_needs_none_and_says_what_it_leaves_out(tmp_path: Path) -> None:
    rec = without_roles(renamed(migrated()))
    md = render(tmp_path / "c", rec)
    [p] = rounds.profile_comparisons(rec)
    assert p.draft_phase is None and p.drafter_step_ms is None
    # The round split, profile table, bytes, bandwidth and break-even stay.
    split = md_section(md, "Round split")
    assert "`propose`" in split and "verify forward (T=3)" in split
    cost = md_section(md, "Cost model")
    assert "tensor set" in cost and "effective GB/s" in cost and "Break-even per arm" in cost
    # The drafter step and the what-if are left out, and the report says why.
    assert "What-if" not in cost and "drafter (profiled step)" not in cost
    assert "Drafter step, profiled:" not in md
    assert "No drafter step: the engine of block3-profile declares no drafting phase (`roles`" in md
    assert "declares no draft and no verify phase (`roles` in its declaration)" in md


def test_only_the_drafting_role_missing_leaves_out_the_what_if_only(tmp_path: Path) -> None:
    rec = renamed(migrated())
    for d in rec["suite"]["engines"].values():
        del d["roles"]["verify"]
    md = render(tmp_path / "d", rec)
    assert "Drafter step, profiled:" in md and "inside propose" in md
    assert "What-if" not in md_section(md, "Cost model")
    assert "declares no verify phase (`roles` in its declaration)" in md


def test_no_roles_cost_section_is_typed() -> None:
    rec = without_roles(migrated())
    from harness.analyze.facts import Facts
    fx = Facts(str(RECORD), as_record(rec), report_cli.inputs_for(rec, BACKFILL))
    c = costreport.build(fx.record, fx.runs, fx.classic_ref(), fx.splits, fx.profiles, fx.host_spec, fx.models)
    assert c.available and c.no_what_if == costreport.NO_ROLES
    assert c.missing_roles == ("draft", "verify") and c.what_if == [] and c.model is None
    assert c.break_even and c.target is not None


def test_a_builtin_declaration_recorded_before_roles_reads_its_adapters_roles() -> None:
    rec = migrated()
    for d in rec["suite"]["engines"].values():
        d.pop("roles", None)
    arms = {a.get("engine", declare.default_engine()): a["name"] for a in rec["suite"]["arms"]}
    builtin = declare.of_record(rec, arms[declare.default_engine()])
    assert builtin.roles == declare.builtin(declare.default_engine()).roles   # type: ignore[union-attr]
    assert declare.of_record(rec, arms["command"]).roles == {}     # a command engine states its own


def test_roles_round_trip_through_the_record() -> None:
    d = declare.EngineDecl(name="mine", phases=("propose", "score"), roles={"draft": "propose"})
    assert declare.EngineDecl.from_dict(d.to_dict()) == d
    assert "roles" not in declare.EngineDecl(name="bare").to_dict()


@pytest.mark.parametrize(("roles", "key", "what"), [
    ({"draft": "nope"}, "draft", "'nope' is not a declared phase"),
    ({"drafting": "propose"}, "drafting", "unknown role 'drafting'"),
    ({"draft": "propose", "verify": "propose"}, "", "one phase plays two roles"),
])
def test_bad_roles_are_named(roles: dict[str, str], key: str, what: str) -> None:
    got = declare.roles_problem(roles, ("propose", "score"))
    assert got is not None and got[0] == key and what in got[1]
    assert declare.roles_problem({"draft": "propose", "verify": "score"}, ("propose", "score")) is None


SUITE = declared_engine_suite("roles", 'phases = ["propose", "score"]\nroles = %s')


def test_a_suite_declares_roles(tmp_path: Path) -> None:
    from harness.collect.suite import load_suite
    (tmp_path / "t").mkdir()
    p = tmp_path / "suite.toml"
    p.write_text(SUITE % '{ draft = "propose", verify = "score" }')
    decl = load_suite(p).engines["mine"]
    assert decl.roles == {"draft": "propose", "verify": "score"}
    assert decl.to_dict()["roles"] == {"draft": "propose", "verify": "score"}
    p.write_text(SUITE % '{ draft = "draft_block" }')
    with pytest.raises(UserError, match=r"engines\.mine\.roles\.draft.*not a declared phase"):
        load_suite(p)
