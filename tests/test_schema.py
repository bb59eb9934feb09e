"""The typed schema: engine results decode strictly, v1 records migrate, schema files are current,
engines declare their own phases/overrides/profile variable, and the command adapter's contract."""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
from harness_helpers import REPO, write_suite

from harness.analyze import rounds
from harness.analyze.labels import label_run
from harness.ci import reportfiles as report_cli
from harness.cli.report import backfill
from harness.collect.engines import CommandAdapter, EngineFailure, RunRequest
from harness.collect.record import read_record
from harness.collect.suite import load_suite
from harness.core import declare, migrations, schema
from harness.core.runs import as_runs
from harness.render import reportcontext as rp

V1 = REPO / "tests" / "fixtures" / "report" / "record.json"


# --- engine result decoding ------------------------------------------------------------------

def test_minimal_result_decodes_and_timings_are_completed() -> None:
    r = schema.decode_engine_result('{"token_ids": [1, 2, 3, 4], "diagnostics": {"decode_ms": 40.0}}')
    d = r.diagnostics
    assert d.generated_tokens == 4 and d.ms_per_token == 10.0 and d.decode_tokens_per_s == 100.0
    assert r.gate.outcome == "unknown" and r.gate.engaged is None     # not reported: unknown
    r = schema.decode_engine_result({"diagnostics": {"generated_tokens": 8, "decode_tokens_per_s": 50.0}})
    assert r.diagnostics.decode_ms == pytest.approx(160.0) and r.diagnostics.ms_per_token == 20.0


@pytest.mark.parametrize("text, needle", [
    ('{"diagnostics": {"decode_ms": 40.0}}', "lacks token_ids or diagnostics.generated_tokens"),
    ('{"token_ids": [1]}', "lacks a decode timing"),
    ('{}', "token_ids or diagnostics.generated_tokens and a decode timing"),
    ('{"token_ids": [1], "diagnostics": {"decode_ms": "fast"}}', "`$.diagnostics.decode_ms`"),
    ('{"token_ids": [1], "diagnostics": {"decode_ms": 1}, "gate": {"outcome": "maybe"}}', "`$.gate.outcome`"),
    ('{"token_ids": [1], "diagnostics": {"decode_ms": 1, "rounds_log": [{"offset": 0, "accepted": 1}]}}',
     "needs `proposed`"),
    ('{"token_ids": [1,', "not a JSON object"),
])
def test_malformed_results_name_what_is_wrong(text: str, needle: str) -> None:
    with pytest.raises(schema.ResultError) as e:
        schema.decode_engine_result(text)
    assert needle in str(e.value) and "\n" not in str(e.value)


def test_acceptance_comes_from_counts_when_the_engine_gives_counts_only() -> None:
    r = schema.decode_engine_result({"token_ids": [1, 2], "diagnostics": {"decode_ms": 4.0, "proposed": 8, "accepted": 6}})
    assert r.diagnostics.acceptance_rate == 0.75
    r = schema.decode_engine_result({"token_ids": [1, 2], "diagnostics": {"decode_ms": 4.0, "proposed": 8}})
    assert r.diagnostics.acceptance_rate is None   # no count of accepted: unknown, not 0


@pytest.mark.parametrize("given, mode", [
    ({"arm": {"mode": "speculative"}}, "speculative"),              # "what actually ran"
    ({"gate": {"outcome": "passed", "engaged": True}}, "speculative"),
    ({"gate": {"outcome": "declined", "engaged": False}}, "classic"),
    ({"arm": {"mode": "classic"}, "gate": {"engaged": True}}, "classic"),   # arm.mode first
    ({"arm": {"mode": "speculative"}, "diagnostics": {"mode": "classic"}}, "classic"),   # the engine's own diagnostics win
    ({}, None),                                                     # nothing said: unknown
])
def test_the_mode_comes_from_whichever_field_says_what_ran(given: dict, mode: str | None) -> None:
    # An engine that gave arm.mode and gate.engaged but not diagnostics.mode once read as
    # "declined (classic decode)" everywhere, its rounds and gate notwithstanding.
    data = {"token_ids": [1, 2], **given}
    data["diagnostics"] = {"decode_ms": 4.0, **given.get("diagnostics", {})}
    assert schema.decode_engine_result(data).diagnostics.mode == mode


def test_round_log_proposed_is_filled_from_drafted_ids() -> None:
    r = schema.decode_engine_result({"token_ids": [1], "diagnostics": {"decode_ms": 1.0, "rounds_log": [
        {"offset": 0, "drafted": [5, 6], "accepted": 1}, {"offset": 2, "proposed": 2, "accepted": 0}]}})
    assert [(e.proposed, e.drafted) for e in r.diagnostics.rounds_log] == [(2, [5, 6]), (2, None)]


# --- records: migration and the published schema ---------------------------------------------

def test_v1_record_migrates_to_v2_with_one_meaning_per_field(tmp_path: Path) -> None:
    v1 = json.loads(V1.read_text())
    assert v1["schema_version"] == 1
    run = copy.deepcopy(next(r for r in v1["runs"] if r["diagnostics"].get("mode") == "classic"))
    run.update(index=len(v1["runs"]), engine="mlx-lm")
    run["diagnostics"]["rounds"] = 8                      # the v1 mlx-lm adapter's classic count
    run["result_arm"] = {"drafter_quantized": None}
    v1["runs"].append(run)
    p = tmp_path / "v1.json"
    p.write_text(json.dumps(v1))
    v2 = read_record(p)
    assert v2["schema_version"] == 5   # migrated 1 -> 2 -> 3 -> 4 -> 5
    assert "models" not in v2        # not read at the time: the report reads the directories
    assert all("gate_wait_s" not in r for r in v2["runs"])
    assert v2["runs"][-1]["diagnostics"]["rounds"] == 0
    assert v2["runs"][-1]["result_arm"] == {"drafter_quantization": None}
    logs = [e for r in v2["runs"] for e in r["diagnostics"].get("rounds_log") or []]
    assert logs and all(e["proposed"] == len(e["drafted"]) for e in logs)
    # v1 read every engine with specdec's assumptions; the migrated suite says so explicitly.
    engines = v2["suite"]["engines"]
    assert {a["engine"] for a in v2["suite"]["arms"]} <= set(engines)
    assert all(e["profile_var"] == "SPECDEC_PROFILE" for e in engines.values())
    assert json.loads(V1.read_text())["schema_version"] == 1     # the file itself is untouched


@pytest.mark.parametrize("path", sorted((REPO / "reports").glob("*.json")), ids=lambda p: p.name)
def test_every_committed_record_renders_through_the_migration(path: Path, monkeypatch) -> None:
    # Byte-for-byte equality with the pre-schema renderer is held by tests/test_report.py's goldens
    # (v1 fixtures); here every committed record, of any version this harness reads, must load,
    # migrate where older, and render.
    monkeypatch.chdir(REPO)
    rel = str(path.relative_to(REPO))
    assert json.loads(path.read_text())["schema_version"] in (*migrations.MIGRATIONS, schema.SCHEMA_VERSION)
    md = rp.render(report_cli.context_for(rel, backfill=backfill()), "record",
                   user_dir=REPO / "tests" / "fixtures" / "report" / "no-such-templates")
    assert "\n| arm | tok/s | spread | vs classic (paired) |" in md     # the arms and their verdicts
    for r in read_record(Path(rel))["runs"]:
        assert r.get("label") is None or r["label"].split(";")[0] in md


def test_published_schema_files_are_current(tmp_path: Path) -> None:
    stale = schema.stale_schemas()
    assert stale == [], f"stale {stale}: run `harness schema --write` and commit schema/"
    schema.write_schemas(tmp_path)
    assert schema.stale_schemas(tmp_path) == []
    sch = json.loads((tmp_path / "engine-result.schema.json").read_text())
    # Changing a type shows up: a doctored copy is reported stale.
    (tmp_path / "engine-result.schema.json").write_text(json.dumps({**sch, "title": "old"}))
    assert schema.stale_schemas(tmp_path) == ["engine-result.schema.json"]
    diag = sch["$defs"]["Diagnostics"]["properties"]
    assert "phase_ms" in diag and "rounds_log" in diag and not sch["$defs"]["Diagnostics"].get("required")


# --- engine declarations ---------------------------------------------------------------------

def _declared_suite(tmp: Path, arms: list[dict[str, Any]], engines_toml: str, **kw: Any) -> Path:
    p = write_suite(tmp, arms, **kw)
    p.write_text(p.read_text() + engines_toml)
    return p


def _engine_script(tmp: Path, body: str) -> list[str]:
    f = tmp / "engine.py"
    f.write_text("import json, os, sys\n" + body)
    return [sys.executable, str(f)]


MYENG = """
[engines.myeng]
phases = ["fetch", "verify", "host_readback"]
override_prefixes = ["MYENG_"]
profile_var = "MYENG_PROFILE"
numerics = "Metal"
[engines.myeng.overrides]
MYENG_LOOSE = "accepts drafts without the exactness check"
[[engines.myeng.prompts.code]]
name = "hello"
text = "fn main() {"
"""


def test_a_command_engine_declares_phases_prefixes_and_prompts(tmp_path: Path) -> None:
    arm = {"name": "a", "pairing": "fx", "engine": "myeng", "block": 3, "command": ["true"]}
    s = load_suite(_declared_suite(tmp_path, [arm], MYENG, prompts=[{"category": "code"}]))
    d = s.engine(s.arm("a"))
    assert d.phases == ("fetch", "verify", "host_readback") and d.profile_var == "MYENG_PROFILE"
    assert s.arm("a").adapter == "command" and s.arm("a").override_prefixes == ("MYENG_",)
    assert [p.name for p in s.prompts] == ["code/hello"]
    rec_suite = s.to_dict()
    assert rec_suite["settings"]["override_prefixes"] == ["MYENG_"]
    assert rec_suite["engines"]["myeng"]["overrides"] == {"MYENG_LOOSE": "accepts drafts without the exactness check"}


@pytest.mark.parametrize("extra, needle", [
    ("\n[engines.myeng]\nphasez = []\n", "engines.myeng.phasez: unknown field"),
    ("\n[engines.myeng]\nphases = [\"a\", \"a\"]\n", "engines.myeng.phases: a phase is named twice"),
    ("\n[engines.command]\nphases = []\n", "engines.command: 'command' is a built-in engine"),
])
def test_bad_declarations_are_one_line(tmp_path: Path, extra: str, needle: str) -> None:
    from harness.core.errors import UserError
    arm = {"name": "a", "pairing": "fx", "engine": "command", "command": ["true"]}
    with pytest.raises(UserError, match=needle.replace("[", r"\[").replace("(", r"\(")):
        load_suite(_declared_suite(tmp_path, [arm], extra))


def test_unknown_engine_names_the_declaration_table(tmp_path: Path) -> None:
    from harness.core.errors import UserError
    arm = {"name": "a", "pairing": "fx", "engine": "nope", "command": ["true"]}
    with pytest.raises(UserError, match=r"\[engines.nope\]"):
        load_suite(write_suite(tmp_path, [arm]))


def _diag(phases: dict[str, float], decode: float = 100.0) -> dict[str, Any]:
    return {"mode": "speculative", "block_size": 3, "rounds": 10, "generated_tokens": 20,
            "decode_ms": decode, "phase_ms": phases}


def test_open_phase_names_keep_an_extra_phase_and_never_invent_zero() -> None:
    decl = declare.EngineDecl(name="myeng", phases=("fetch", "verify"))
    runs = as_runs([{"index": 0, "status": "ok", "diagnostics": _diag({"verify": 60.0, "fetch": 30.0, "host_readback": 10.0})},
                    {"index": 1, "status": "ok", "diagnostics": _diag({"verify": 70.0, "fetch": 30.0})}])
    split = rounds.round_split("a", "p", runs, decl)
    assert split is not None
    assert [c.name for c in split.components] == ["fetch", "verify", "host_readback"]  # declared, then extra
    extra = split.component("host_readback")
    assert extra.per_run == [1.0]                      # one run reported it; the other is n/a, not 0
    assert extra.per_unit_ms == 1.0 and extra.share == pytest.approx(0.1)


def test_profile_variable_is_the_engines_own() -> None:
    rec = {"suite": {"name": "t", "settings": {}, "pairings": [{"name": "x", "target": "t"}],
                     "prompts": [{"name": "p", "text": "p"}],
                     "arms": [{"name": "a", "engine": "myeng", "pairing": "x", "block": 3, "env": {"MYENG_PROFILE": "1"}, "timeout_s": 60.0},
                              {"name": "b", "engine": "myeng", "pairing": "x", "block": 3, "env": {}, "timeout_s": 60.0},
                              {"name": "c", "engine": "command", "pairing": "x", "block": 3, "env": {}, "timeout_s": 60.0}],
                     "engines": {"myeng": {"name": "myeng", "profile_var": "MYENG_PROFILE"}}}}
    assert rounds.unprofiled_twin(rec, "a") == "b"
    assert rounds.profiled_arm(rec, "a", {"MYENG_PROFILE": "1"})
    assert not rounds.profiled_arm(rec, "c", {"SPECDEC_PROFILE": "1"})   # no profile mode declared
    assert declare.of_record(rec, "c").override_prefixes == ()


def test_only_the_specdec_adapter_imports_specdec() -> None:
    hits = []
    for f in (REPO / "harness").rglob("*.py"):
        text = f.read_text()
        if "import specdec" in text or "from specdec" in text:
            hits.append(f.relative_to(REPO).as_posix())
    assert hits == ["harness/collect/adapters/specdec.py"]
    # Not even by name: the harness knows an engine only through its declaration.
    named = sorted(f.relative_to(REPO).as_posix() for f in (REPO / "harness").rglob("*")
                   if f.is_file() and "__pycache__" not in f.parts and b"specdec" in f.read_bytes())
    assert named == ["harness/collect/adapters/specdec.py"]


# --- the command adapter's contract ----------------------------------------------------------

def _run_command(tmp: Path, body: str, block: int = 3, env: dict[str, str] | None = None,
                 extra: str = "", engine: str = "command"):
    arm = {"name": "a", "pairing": "fx", "engine": engine, "block": block,
           "command": _engine_script(tmp, body), **({"env": env} if env else {})}
    s = load_suite(_declared_suite(tmp, [arm], extra))
    req = RunRequest(arm=s.arm("a"), pairing=s.pairing("fx"), prompt=s.prompts[0], settings=s.settings)
    return CommandAdapter().run(req)


def test_tokens_and_timings_only_is_labeled_gate_unknown(tmp_path: Path) -> None:
    out = _run_command(tmp_path, 'print("log line")\nprint(json.dumps({"token_ids": [1, 2], '
                                 '"diagnostics": {"decode_ms": 20.0}}))\n')
    assert out.result.diagnostics.ms_per_token == 10.0
    lab = label_run(out.overrides, out.result.gate)
    assert not lab.shipping and "gate outcome unknown" in lab.text


def test_an_engine_reporting_gate_and_overrides_is_labeled_like_specdec(tmp_path: Path) -> None:
    gate = {"outcome": "overridden", "engaged": True, "reading": "12 of 4096 logit bytes differ"}
    body = (f'print(json.dumps({{"token_ids": [1], "gate": {gate!r}, '
            f'"overrides": {{"MYENG_LOOSE": os.environ["MYENG_LOOSE"]}}, "diagnostics": {{"decode_ms": 5.0}}}}))\n')
    out = _run_command(tmp_path, body, env={"MYENG_LOOSE": "1"}, extra=MYENG, engine="myeng")
    got = label_run(out.overrides, out.result.gate)
    # The same facts from specdec (its result JSON shape) give the same label.
    want = label_run({"MYENG_LOOSE": "1"}, schema.Gate(outcome="overridden", engaged=True, reading=gate["reading"],
                                                       logit_bytes=4096))
    assert got == want and "MYENG_LOOSE=1" in got.text and "the gate was overridden" in got.text
    shipping = repr({"outcome": "passed", "engaged": True})
    out = _run_command(tmp_path, f'print(json.dumps({{"token_ids": [1], "gate": {shipping}, '
                                 '"diagnostics": {"decode_ms": 5.0}}))\n', extra=MYENG, engine="myeng")
    assert label_run(out.overrides, out.result.gate).text == "shipping configuration"


@pytest.mark.parametrize("body, needle", [
    ('print(json.dumps({"token_ids": [1]}))\n', "result JSON lacks a decode timing"),
    ('print("done in 3 s")\n', "no result JSON on the last stdout line (it reads 'done in 3 s')"),
    ('print(json.dumps({"token_ids": "abc", "diagnostics": {"decode_ms": 1}}))\n', "`$.token_ids`"),
])
def test_malformed_command_output_is_one_clear_failure(tmp_path: Path, body: str, needle: str) -> None:
    with pytest.raises(EngineFailure) as e:
        _run_command(tmp_path, body)
    assert needle in e.value.error and "docs/engine-contract.md" in e.value.error
    assert "\n" not in e.value.error


def test_inherited_variables_count_only_under_declared_prefixes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPECDEC_PROFILE", "1")
    monkeypatch.setenv("MYENG_FAST", "1")
    body = 'print(json.dumps({"token_ids": [1], "diagnostics": {"decode_ms": 5.0}}))\n'
    assert _run_command(tmp_path, body).overrides == {}                       # declares nothing
    assert _run_command(tmp_path, body, extra=MYENG, engine="myeng").overrides == {"MYENG_FAST": "1"}


def test_report_does_not_recommend_specdec_for_another_engine(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(REPO)
    rec = json.loads(V1.read_text())
    rec = schema.load_record(rec, "fixture")
    for e in rec["suite"]["engines"].values():
        e["tools"] = {}
    p = tmp_path / "r.json"
    p.write_text(json.dumps(rec))
    md = rp.render(report_cli.context_for(str(p), backfill=backfill()), "record", user_dir=tmp_path / "none")
    assert "python -m specdec" not in md
    assert "python -m specdec scaling" in rp.render(report_cli.context_for(str(V1.relative_to(REPO)), backfill=backfill()), "record",
                                                    user_dir=tmp_path / "none")


def test_a_v2_record_reads_with_its_quiet_wait_renamed(tmp_path: Path) -> None:
    # schema_version 2 called the wait for a quiet host gate_wait_s; version 3 reads it as quiet_wait_s
    # and keeps every other field as it was. A v2 record: a v1 fixture taken one step only.
    v1 = json.loads((REPO / "tests" / "fixtures" / "report" / "record-after.json").read_text())
    rec = migrations.migrate_v1(v1)
    assert rec["schema_version"] == 2
    waits = [r.get("gate_wait_s") for r in rec["runs"]]
    assert any(w for w in waits)
    p = tmp_path / "v2.json"
    p.write_text(json.dumps(rec))
    v3 = read_record(p)
    assert v3["schema_version"] == 5
    assert [r.get("quiet_wait_s") for r in v3["runs"]] == waits
    assert all("gate_wait_s" not in r for r in v3["runs"])
    assert [r["ms_per_token"] for r in v3["runs"]] == [r["ms_per_token"] for r in rec["runs"]]


def test_a_v4_record_keeps_ms_per_token_once_at_the_run_s_top_level(tmp_path: Path) -> None:
    # Version 4 copied the engine's ms_per_token into the run beside its diagnostics' own;
    # version 5 keeps the run's figure only, taking the diagnostics' where the run had none.
    v4 = json.loads((REPO / "tests" / "fixtures" / "default-suite-linux-cpu.json").read_text())
    assert v4["schema_version"] == 4
    ok = [r for r in v4["runs"] if r["status"] == "ok"]
    assert ok and all(r["ms_per_token"] == r["diagnostics"]["ms_per_token"] for r in ok)
    before = [r.get("ms_per_token") for r in v4["runs"]]
    del ok[0]["ms_per_token"]               # a hand-made run with the diagnostics' copy only
    p = tmp_path / "v4.json"
    p.write_text(json.dumps(v4))
    v5 = read_record(p)
    assert v5["schema_version"] == 5
    assert all("ms_per_token" not in (r.get("diagnostics") or {}) for r in v5["runs"])
    assert [r.get("ms_per_token") for r in v5["runs"]] == before
    published = json.loads(schema.json_schemas()["record.schema.json"])["$defs"]
    assert "ms_per_token" in published["Run"]["properties"]
    assert "ms_per_token" not in published["RunDiagnostics"]["properties"]


def test_a_v4_record_s_renamed_keys_load_under_version_5_s_names(tmp_path: Path) -> None:
    # Version 5 renamed keys whose words meant two things (host profile vs profile mode, quiet
    # gate vs exactness gate, dispatch probe vs exactness probe); a version-4 record reads into them.
    v4 = json.loads((REPO / "tests" / "fixtures" / "default-suite-linux-cpu.json").read_text())
    assert v4["schema_version"] == 4 and "profile" in v4["host"] and "dispatch_probe" in v4["suite"]["settings"]
    run = next(r for r in v4["runs"] if r["status"] == "ok")
    assert "quiet_gate" in run["load"] and "dispatch_probe_ms" in run
    run["marks"] = ["contended", "quiet_gate_timeout"]
    fig = next(iter(v4["sequential"]["looks"][0]["figures"].values()))
    fig["dispatch_probe"] = {"used": True}
    p = tmp_path / "v4.json"
    p.write_text(json.dumps(v4))
    v5 = read_record(p)
    assert v5["host"]["spec"] == v4["host"]["profile"] and "profile" not in v5["host"]
    assert v5["suite"]["settings"]["dispatch_measurement"] == v4["suite"]["settings"]["dispatch_probe"]
    got = v5["runs"][v4["runs"].index(run)]
    assert got["load"]["quiet_wait"] == run["load"]["quiet_gate"] and "quiet_gate" not in got["load"]
    assert got["dispatch_measurement_ms"] == run["dispatch_probe_ms"] and "dispatch_probe_ms" not in got
    assert got["marks"] == ["contended", "quiet_wait_timeout"]
    got_fig = next(iter(v5["sequential"]["looks"][0]["figures"].values()))
    assert got_fig == {**{k: v for k, v in fig.items() if k != "dispatch_probe"}, "dispatch_measurement": {"used": True}}
