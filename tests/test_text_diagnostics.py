"""An engine that prints text: its suite's parse table (regular expressions or a function in its
tree) gives phases, identity, the gate and overrides, through the same decode and the same gate
as a JSON result; an engine's default command that arms inherit; the contract table's fields."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import msgspec
import pytest
from harness_helpers import REPO, cli_in_process, load

from harness.analyze.identity import classic_comparisons
from harness.analyze.labels import reasons
from harness.collect import textparse
from harness.collect.suite import load_suite, suite_from_record
from harness.core.errors import UserError
from harness.core.results import result_problem
from harness.core.runs import as_runs
from harness.core.schema import ArmInfo, ResultError, to_builtins
from harness.core.suitespec import Arm

SEEDLIKE = REPO / "tests" / "fixtures" / "seedlike_engine.py"

# The parse table docs/own-engine.md shows, for the seed's style of output.
PARSE = {
    "tokens": r"tokens: ([0-9 ]+)",
    "decode_ms": r"generated \d+ tokens in (-?[0-9.]+) ms",
    "prefill_ms": r"prefill ([0-9.]+) ms",
    "rounds": r"rounds=(\d+)", "proposed": r"proposed=(\d+)", "accepted": r"accepted=(\d+)",
    "gate_passed": r"exactness probe passed",
    "gate_overridden": r"exactness probe FAILED but",
    "gate_declined": r"exactness probe FAILED, decoding classic",
    "gate_reading": r"(?s)exactness probe [^:]*: (.*?logit bytes)",
    "overrides": r"override in force: (\S+)",
}
PHASES = {"verify": r"verify forward[^\n]*?([0-9.]+) ms", "draft_block": r"draft_block`\t([0-9.]+) ms",
          "accept_hook": r"accept hook\t([0-9.]+) ms", "finalize": r"verify finalize[^\n]*?([0-9.]+) ms"}
ARGV = ["{python}", str(SEEDLIKE), "--prompt-file", "{prompt_file}", "--max-tokens", "{max_tokens}",
        "--block", "{block}"]


def _toml(v: Any) -> str:
    if isinstance(v, str):
        return "'" + v + "'" if "'" not in v and "\n" not in v else json.dumps(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + " }"
    return json.dumps(v)


def seed_suite(tmp: Path, arms: list[dict[str, Any]] | None = None, parse: dict[str, Any] | None = None,
               phases: dict[str, str] | None = None, engine: dict[str, Any] | None = None,
               repetitions: int = 2) -> Path:
    """A suite of the seed-like engine: its argv declared once, on the engine, and its parse table."""
    for d in ("target", "drafter"):
        (tmp / d).mkdir(exist_ok=True)
    arms = arms if arms is not None else [{"name": "classic"}, {"name": "b3", "block": 3}]
    lines = ['name = "seed"', "max_tokens = 8", f"repetitions = {repetitions}", "warmups = 0", "cooldown_s = 0",
             "[quiet]", "enabled = false",
             "[[pairings]]", 'name = "p"', 'target = "target"', 'drafter = "drafter"',
             "[engines.mlxcel]", 'override_prefixes = ["MLXCEL_"]',
             'phases = ["verify", "draft_block", "accept_hook", "finalize"]']
    lines += [f"{k} = {_toml(v)}" for k, v in {"command": ARGV, **(engine or {})}.items()]
    lines.append("[engines.mlxcel.parse]")
    lines += [f"{k} = {_toml(v)}" for k, v in (PARSE if parse is None else parse).items()]
    ph = PHASES if phases is None else phases
    if ph:
        lines.append("[engines.mlxcel.parse.phases]")
        lines += [f"{k} = {_toml(v)}" for k, v in ph.items()]
    for a in arms:
        lines.append("[[arms]]")
        lines += [f"{k} = {_toml(v)}" for k, v in {"engine": "mlxcel", **a}.items()]
    lines += ["[[prompts]]", 'name = "p1"', 'text = "the quick brown fox"']
    path = tmp / "suite.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(tmp: Path, suite: Path, monkeypatch: Any, capsys: Any) -> tuple[subprocess.CompletedProcess, dict]:
    rec = tmp / "r.json"
    r = cli_in_process(["run", str(suite), "--record", str(rec)], tmp, monkeypatch, capsys)
    assert "Traceback" not in r.stdout + r.stderr, r.stderr[-2000:]
    return r, (load(rec) if rec.exists() else {})


def _refused(tmp: Path, suite: Path, monkeypatch: Any, capsys: Any) -> str:
    r = cli_in_process(["run", str(suite), "--record", str(tmp / "r.json")], tmp, monkeypatch, capsys)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert not (tmp / "r.json").exists()
    return lines[0]


# --- a session of the seed-like engine ----------------------------------------------------------

def test_seedlike_text_gives_phases_identity_gate_and_overrides(tmp_path: Path, monkeypatch, capsys) -> None:
    arms = [{"name": "classic"}, {"name": "b3", "block": 3},
            {"name": "b3-inexact", "block": 3, "env": {"MLXCEL_MTP_ALLOW_INEXACT": "1", "SEED_PROBE": "fail"}},
            {"name": "b3-declined", "block": 3, "env": {"SEED_PROBE": "fail"}}]
    r, rec = _run(tmp_path, seed_suite(tmp_path, arms, repetitions=1), monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = {x["arm"]: x for x in rec["runs"]}
    assert all(x["status"] == "ok" for x in rec["runs"])
    b3 = runs["b3"]
    assert b3["gate"]["outcome"] == "passed" and b3["shipping"] is True
    assert set(b3["diagnostics"]["phase_ms"]) == {"verify", "draft_block", "accept_hook", "finalize"}
    assert b3["diagnostics"]["prefill_ms"] == 41.2
    assert (b3["diagnostics"]["rounds"], b3["diagnostics"]["proposed"], b3["diagnostics"]["accepted"]) == (3, 6, 5)
    assert b3["token_ids"] == runs["classic"]["token_ids"] and len(b3["token_ids"]) == 8
    assert classic_comparisons(msgspec.convert(rec["suite"]["arms"], list[Arm]), as_runs(rec["runs"]))[("b3", "p1")].comparison.status == "identical"   # identity works
    assert runs["classic"]["gate"]["outcome"] == "not_applicable" and runs["classic"]["diagnostics"]["rounds"] == 0
    inexact = runs["b3-inexact"]
    assert inexact["gate"]["outcome"] == "overridden" and inexact["shipping"] is False
    assert inexact["overrides"]["MLXCEL_MTP_ALLOW_INEXACT"] == "1"
    assert ('probe reading: "verify block position 0 differs from the single-token chain in 165506 of '
            '496640 logit bytes"') in inexact["label"]
    declined = runs["b3-declined"]
    assert declined["gate"]["outcome"] == "declined" and declined["diagnostics"]["mode"] == "classic"
    assert "phase_ms" not in declined["diagnostics"]


def test_a_captured_value_no_engine_measures_fails_at_the_one_gate(tmp_path: Path, monkeypatch, capsys) -> None:
    """A negative decode time read from text is refused by result_problem, as from JSON."""
    arms = [{"name": "classic"}, {"name": "bad", "env": {"SEED_TOK_S": "-5"}}]
    r, rec = _run(tmp_path, seed_suite(tmp_path, arms), monkeypatch, capsys)
    assert r.returncode == 1
    bad = [x for x in rec["runs"] if x["arm"] == "bad"]
    assert bad and all(x["status"] == "failed" for x in bad)
    assert all(x["error"].startswith("engine result: diagnostics.decode_ms is -") for x in bad), bad[0]["error"]


@pytest.mark.parametrize("quiet,key", [("tokens", "parse.tokens"), ("phases", "parse.phases.verify"),
                                       ("counts", "parse.proposed"), ("probe", "parse: no gate pattern matched")])
def test_a_line_the_engine_did_not_print_fails_the_run_naming_the_key(quiet: str, key: str, tmp_path: Path,
                                                                      monkeypatch, capsys) -> None:
    arms = [{"name": "b3", "block": 3, "env": {"SEED_QUIET": quiet}}]
    r, rec = _run(tmp_path, seed_suite(tmp_path, arms), monkeypatch, capsys)
    assert r.returncode == 1
    errors = {x["error"] for x in rec["runs"]}
    assert len(errors) == 1 and key in errors.pop()


def test_function_form_reads_the_engine_output(tmp_path: Path, monkeypatch, capsys) -> None:
    (tmp_path / "seedparse.py").write_text(
        "import re\n"
        "def parse(stdout, stderr):\n"
        "    ids = [int(x) for x in re.search(r'tokens: ([0-9 ]+)', stdout).group(1).split()]\n"
        "    ms = float(re.search(r'in ([0-9.]+) ms', stdout).group(1))\n"
        "    if 'RAISE' in stderr: raise RuntimeError('no tokens line')\n"
        "    return {'token_ids': ids, 'gate': {'outcome': 'passed'}, 'diagnostics': {'decode_ms': ms}}\n")
    arms = [{"name": "classic"}, {"name": "bad", "env": {"MLXCEL_RAISE": "1"}}]
    r, rec = _run(tmp_path, seed_suite(tmp_path, arms, parse={"function": "seedparse:parse"}, phases={}),
                  monkeypatch, capsys)
    assert r.returncode == 1
    ok = [x for x in rec["runs"] if x["arm"] == "classic"]
    assert ok and all(x["status"] == "ok" and len(x["token_ids"]) == 8 for x in ok)
    assert ok[0]["gate"]["outcome"] == "passed" and ok[0]["decode_tokens_per_s"] == pytest.approx(39.37, rel=1e-3)
    bad = [x for x in rec["runs"] if x["arm"] == "bad"]
    assert bad[0]["error"].endswith(": parse.function seedparse:parse raised RuntimeError: no tokens line"), bad[0]
    assert rec["suite"]["engines"]["mlxcel"]["parse"] == {"function": "seedparse:parse"}


# --- each pattern key, the parser alone -----------------------------------------------------------

BASE = {"mode": "speculative", "block": 3}
OUT = ("tokens: 5 6 7\nprefill 2.5 ms\nprefill never\nMTPWALK rounds=2 proposed=4 accepted=1\n"
       "verify forward (T=3)\t9.50 ms\ngenerated 3 tokens in 30.00 ms: 100.00 tok/s, 10.0 ms/token\n")


def _parse(spec: dict[str, Any], stdout: str = OUT, stderr: str = "exactness probe passed", base=BASE):
    return textparse.compile_spec(spec, Path("."), "parse").result(stdout, stderr, msgspec.convert(base, ArmInfo))


MIN = {"tokens": r"tokens: ([0-9 ]+)", "decode_ms": r"in ([0-9.]+) ms"}


@pytest.mark.parametrize("key,rx,field,want", [
    ("decode_tokens_per_s", r"([0-9.]+) tok/s", "decode_tokens_per_s", 100.0),
    ("ms_per_token", r"([0-9.]+) ms/token", "ms_per_token", 10.0),
    ("prefill_ms", r"prefill ([0-9.]+) ms", "prefill_ms", 2.5),
    ("generated_tokens", r"generated (\d+) tokens", "generated_tokens", 3),
    ("prompt_tokens", r"generated (\d+)", "prompt_tokens", 3),
    ("proposed", r"proposed=(\d+)", "proposed", 4),
    ("accepted", r"accepted=(\d+)", "accepted", 1),
    ("rounds", r"rounds=(\d+)", "rounds", 2),
])
def test_each_number_key_fills_its_field(key: str, rx: str, field: str, want: float) -> None:
    res = _parse({**MIN, key: rx})
    assert getattr(res.diagnostics, field) == want


def test_tokens_decode_ms_phases_and_text() -> None:
    res = _parse({**MIN, "text": r"(generated \d+ tokens)", "phases": {"verify": PHASES["verify"]}})
    assert res.token_ids == [5, 6, 7] and res.diagnostics.decode_ms == 30.0
    assert res.diagnostics.phase_ms == {"verify": 9.5} and res.text == "generated 3 tokens"
    assert res.diagnostics.decode_tokens_per_s == 100.0   # derived, as from JSON


def test_tokens_may_be_a_bracketed_comma_list() -> None:
    assert _parse({**MIN, "tokens": "tokens: (.*)"}, stdout="tokens: [5, 6,7]\nin 3 ms").token_ids == [5, 6, 7]


@pytest.mark.parametrize("stderr,outcome,engaged", [
    ("exactness probe passed", "passed", True), ("probe FAILED, allowed", "overridden", True),
    ("probe FAILED", "declined", False)])
def test_gate_patterns_decide_the_outcome(stderr: str, outcome: str, engaged: bool) -> None:
    res = _parse({**MIN, "gate_passed": "probe passed", "gate_overridden": "FAILED, allowed",
                  "gate_declined": "FAILED", "gate_reading": r"probe (\w+)"}, stderr=stderr)
    assert (res.gate.outcome, res.gate.engaged) == (outcome, engaged)
    assert res.gate.reading == stderr.split("probe ")[1].split()[0].rstrip(",")
    assert res.diagnostics.mode == ("speculative" if engaged else "classic")


def test_no_gate_pattern_is_gate_unknown() -> None:
    assert _parse(MIN).gate.outcome == "unknown"


def test_overrides_are_every_name_value_match() -> None:
    res = _parse({**MIN, "overrides": r"set (\S+)"}, stderr="set A=1\nset B=x y\n")
    assert res.overrides == {"A": "1", "B": "x"}


@pytest.mark.parametrize("spec,stderr,says", [
    ({**MIN, "decode_ms": r"(MTP)WALK"}, "", "parse.decode_ms captured 'MTP', not a number"),
    ({**MIN, "rounds": r"(verify) forward"}, "", "parse.rounds captured 'verify', not a whole number"),
    ({**MIN, "prefill_ms": r"warmup ([0-9.]+) ms"}, "", "parse.prefill_ms matched nothing in stdout or stderr"),
    ({**MIN, "tokens": r"(generated)"}, "", "parse.tokens captured 'generated', not a list of token ids"),
    ({**MIN, "overrides": r"(proposed)"}, "", "parse.overrides matched 'proposed', not NAME=VALUE"),
    ({**MIN, "gate_passed": "nope"}, "", "parse: no gate pattern matched (parse.gate_passed)"),
    ({**MIN, "prefill_ms": r"prefill(?: never|([0-9.]+) ms)"}, "", "parse.prefill_ms captured '', not a number"),
])
def test_a_pattern_that_fails_names_its_key(spec: dict, stderr: str, says: str) -> None:
    with pytest.raises(ResultError) as e:
        _parse(spec, stderr=stderr)
    assert str(e.value) == says


def test_a_classic_run_may_lack_speculative_figures() -> None:
    res = _parse({**MIN, "rounds": r"rounds=(\d+)", "phases": {"x": r"x ([0-9.]+) ms"}},
                 stdout="tokens: 1\nin 3 ms", base={"block": 1})
    assert res.diagnostics.rounds == 0 and res.diagnostics.mode == "classic" and not res.diagnostics.phase_ms


def test_a_parsed_result_passes_the_same_gate_as_json() -> None:
    res = _parse({**MIN, "tokens": r"tokens: ([0-9 ]+)"}, stdout="tokens: 1 2\nin 0 ms")
    assert result_problem(to_builtins(res)) == "diagnostics.decode_ms is 0, a decode of at least one token takes time"


# --- the suite is refused, one line, when the table cannot work ----------------------------------

@pytest.mark.parametrize("parse,phases,says", [
    ({**PARSE, "decode_ms": "in ([0-9.]+ ms"}, None, "engines.mlxcel.parse.decode_ms: not a valid regular expression"),
    ({**PARSE, "decode_ms": r"in [0-9.]+ ms"}, None, "engines.mlxcel.parse.decode_ms: needs a capture group"),
    ({**PARSE, "decode_tokens": "x"}, None, "engines.mlxcel.parse.decode_tokens: unknown field"),
    (PARSE, {"verify": "verify forward"}, "engines.mlxcel.parse.phases.verify: needs a capture group"),
    ({"tokens": PARSE["tokens"]}, None, "engines.mlxcel.parse: needs a decode timing"),
    ({"decode_ms": PARSE["decode_ms"]}, None, "engines.mlxcel.parse: needs a token count"),
    ({"tokens": PARSE["tokens"], "decode_ms": PARSE["decode_ms"], "gate_reading": "(x)"}, None,
     "engines.mlxcel.parse.gate_reading: needs a gate pattern too"),
    ({"function": "no_such_module_here:parse"}, {}, "engines.mlxcel.parse.function: cannot import 'no_such_module_here'"),
    ({"function": "json:no_such_function"}, {}, "engines.mlxcel.parse.function: module 'json' has no function"),
    ({"function": "json"}, {}, "engines.mlxcel.parse.function: expected \"module:function\""),
    ({"function": "json:loads", "tokens": "(x)"}, {}, "engines.mlxcel.parse.function: give either"),
])
def test_a_parse_table_that_cannot_work_is_one_line_at_suite_read(parse, phases, says, tmp_path: Path,
                                                                   monkeypatch, capsys) -> None:
    line = _refused(tmp_path, seed_suite(tmp_path, parse=parse, phases=phases), monkeypatch, capsys)
    assert says in line, line


def test_tok_s_regex_beside_a_parse_table_is_refused(tmp_path: Path, monkeypatch, capsys) -> None:
    suite = seed_suite(tmp_path, [{"name": "a", "tok_s_regex": r"([0-9.]+) tok/s"}])
    assert "arms[0].tok_s_regex: engine 'mlxcel' declares a parse table" in _refused(tmp_path, suite, monkeypatch, capsys)


# --- an engine's default command ----------------------------------------------------------------

def test_arms_inherit_the_engine_command_and_their_own_wins(tmp_path: Path) -> None:
    own = ["{python}", str(SEEDLIKE), "--prompt-file", "{prompt_file}", "--max-tokens", "{max_tokens}"]
    suite = load_suite(seed_suite(tmp_path, [{"name": "a"}, {"name": "b", "command": own, "timeout_s": 5}],
                                  engine={"timeout_s": 30}))
    assert suite.arm("a").command == tuple(ARGV) and suite.arm("a").timeout_s == 30
    assert suite.arm("b").command == tuple(own) and suite.arm("b").timeout_s == 5
    d = suite.to_dict()
    assert d["engines"]["mlxcel"]["command"] == ARGV and d["engines"]["mlxcel"]["parse"]["tokens"] == PARSE["tokens"]
    back = suite_from_record(json.loads(json.dumps(d)), "r.json")   # resume and compare workers
    assert back.arm("a").command == tuple(ARGV) and back.arm("a").parser is not None
    assert back.engines["mlxcel"].command == tuple(ARGV)


@pytest.mark.parametrize("engine,says", [
    ({"command": ["{python}", "x.py", "{modle}"]}, "engines.mlxcel.command: unknown placeholder {modle}"),
    ({"command": []}, "engines.mlxcel.command: empty argv list"),
    ({"timeout_s": 0}, "engines.mlxcel.timeout_s: must be > 0"),
])
def test_a_bad_engine_command_is_one_line(engine: dict, says: str, tmp_path: Path, monkeypatch, capsys) -> None:
    assert says in _refused(tmp_path, seed_suite(tmp_path, engine=engine), monkeypatch, capsys)


def test_an_arm_without_a_command_of_an_engine_without_one_says_where_to_give_it(tmp_path: Path, monkeypatch,
                                                                                 capsys) -> None:
    suite = seed_suite(tmp_path)
    suite.write_text(re.sub(r"(?m)^command = .*\n", "", suite.read_text()))
    line = _refused(tmp_path, suite, monkeypatch, capsys)
    assert "arms[0].command: missing" in line and "[engines.mlxcel] command" in line, line


# --- smaller items ------------------------------------------------------------------------------

def test_a_minimal_contract_record_says_not_shipping_once(tmp_path: Path, monkeypatch, capsys) -> None:
    """No gate pattern: gate unknown; the report's gate sentence names the reason once."""
    parse = {k: PARSE[k] for k in ("tokens", "decode_ms")}
    r, rec = _run(tmp_path, seed_suite(tmp_path, [{"name": "classic"}], parse=parse, phases={}), monkeypatch, capsys)
    assert r.returncode == 0 and rec["runs"][0]["label"] == "not a shipping configuration: gate outcome unknown"
    md = cli_in_process(["report", str(tmp_path / "r.json")], tmp_path, monkeypatch, capsys).stdout
    assert "classic is not a shipping configuration: gate outcome unknown." in md, md[:3000]
    assert "configuration: not a shipping configuration" not in md


def test_reasons_drops_each_not_shipping_prefix() -> None:
    assert reasons("not a shipping configuration: a; not a shipping configuration: b") == "a; b"


def _schema_has(path: str) -> bool:
    """Whether a dotted path (`x[]` for an array's items) is a field of the published result schema."""
    doc = json.loads((REPO / "schema" / "engine-result.schema.json").read_text())
    defs = doc["$defs"]

    def deref(node: dict) -> list[dict]:
        if "$ref" in node:
            return deref(defs[node["$ref"].rsplit("/", 1)[1]])
        if "anyOf" in node:
            return [n for alt in node["anyOf"] for n in deref(alt)]
        if node.get("type") == "array" and "items" in node:
            return [node] + deref(node["items"])
        return [node]

    nodes = deref(defs["EngineResult"])
    for part in path.split("."):
        name, items = part.removesuffix("[]"), part.endswith("[]")
        nodes = [n for node in nodes for n in deref(node.get("properties", {}).get(name, {}))
                 if node.get("properties", {}).get(name)]
        if items:
            nodes = [n for node in nodes if node.get("type") == "array" for n in deref(node["items"])]
        if not nodes:
            return False
    return True


def test_every_field_the_contract_names_is_at_that_place_in_the_schema() -> None:
    """Each row of the contract's table begins with a field's full path, and every path the
    document names (arm., gate., engine., diagnostics.) is where the schema has it."""
    doc = (REPO / "docs" / "engine-contract.md").read_text()
    table = doc.split("## Optional parts", 1)[1].split("\n## ", 1)[0]
    rows = [ln.split("|")[2] for ln in table.splitlines() if ln.startswith("| ") and not ln.startswith("| part")]
    assert len(rows) > 10
    for fields in rows:
        first = re.search(r"`([^`]+)`", fields).group(1)
        assert _schema_has(first), f"the row {fields[:60]!r} begins with {first!r}, not a full path"
    named = set(re.findall(r"`((?:arm|gate|engine|diagnostics)(?:\.[a-z_]+(?:\[\])?)+)`", doc))
    assert "diagnostics.rounds_log" in named
    assert not [p for p in sorted(named) if not _schema_has(p)]
    assert not _schema_has("rounds_log") and not _schema_has("diagnostics.nothing")


def test_own_engine_md_text_example_reads_its_sample_output() -> None:
    """The declaration docs/own-engine.md shows reads the output it shows, every key."""
    import tomllib
    doc = (REPO / "docs" / "own-engine.md").read_text().split("### An engine that prints text", 1)[1]
    blocks = re.findall(r"```(\w*)\n(.*?)```", doc, re.S)
    output, toml = blocks[0][1], tomllib.loads(blocks[1][1])
    parser = textparse.compile_spec(toml["engines"]["mycli"]["parse"], REPO, "parse")
    res = parser.result(output, "", ArmInfo(block=3))
    assert res.token_ids == [1170, 1177, 1184, 1191] and res.diagnostics.decode_ms == 203.2
    assert res.diagnostics.phase_ms == {"verify": 124.97, "draft_block": 38.0}
    assert (res.diagnostics.rounds, res.diagnostics.proposed, res.diagnostics.accepted) == (3, 6, 5)
    assert res.gate.outcome == "overridden" and res.overrides == {"MYCLI_ALLOW_INEXACT": "1"}
    assert res.gate.reading.endswith("in 165506 of 496640 logit bytes")


def test_a_worker_imports_the_function_from_its_own_tree(tmp_path: Path, monkeypatch) -> None:
    """A compare worker rebuilds the suite from the record in the commit's tree (its working
    directory): the parse function comes from there."""
    suite = load_suite(seed_suite(tmp_path, parse={"function": "json:loads"}, phases={})).to_dict()
    suite["engines"]["mlxcel"]["parse"] = {"function": "treeparse:parse"}
    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "treeparse.py").write_text("def parse(stdout, stderr):\n    return {'token_ids': [7], "
                                       "'diagnostics': {'decode_ms': 2.0}}\n")
    monkeypatch.chdir(tree)
    back = suite_from_record(suite, "r.json")
    assert back.arm("classic").parser.result("", "", {}).token_ids == [7]
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="engines.mlxcel.parse.function: cannot import 'treeparse2'"):
        suite["engines"]["mlxcel"]["parse"] = {"function": "treeparse2:parse"}
        suite_from_record(suite, "r.json")
