"""Suite loading and validation: every user error is one line naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness_helpers import command_arm, write_suite

from harness.collect.suite import DEFAULT_SUITE, load_suite, quick, suite_from_record
from harness.core.errors import UserError


def _error(path: Path) -> str:
    with pytest.raises(UserError) as ei:
        load_suite(path)
    msg = str(ei.value)
    assert "\n" not in msg
    assert msg.startswith(str(path))
    return msg


def test_fixture_suite_loads_with_defaults(tmp_path: Path) -> None:
    (tmp_path / "prompt.txt").write_text("from a file")
    p = write_suite(tmp_path, [command_arm("classic"), command_arm("b3", 3, {"SPECDEC_PROFILE": 1})],
                    prompts=[{"name": "p1", "text": "inline"}, {"name": "p2", "file": "prompt.txt"}])
    s = load_suite(p)
    assert [a.name for a in s.arms] == ["classic", "b3"]
    assert s.arm("b3").env == {"SPECDEC_PROFILE": "1"}          # integers become strings
    assert s.prompt("p2").text == "from a file"                 # relative to the suite file
    assert s.settings.repetitions == 2 and s.settings.spread_threshold == 0.04
    assert s.settings.contention_threshold == 0.20
    # A command engine that declares nothing gets no override prefixes (no SPECDEC_/MLX_ default).
    assert s.settings.override_prefixes == () and s.arm("b3").override_prefixes == ()
    assert len(s.sha256) == 64


def test_default_suite_is_the_embedded_pair_classic_and_blocks() -> None:
    s = load_suite(DEFAULT_SUITE)
    assert [(a.name, a.block) for a in s.arms] == [("classic", 1), ("block2", 2), ("block3", 3), ("block4", 4),
                                                   ("block3-inexact", 3)]
    assert [a.env for a in s.arms] == [{}, {}, {}, {}, {"SPECDEC_ALLOW_INEXACT": "1"}]
    assert s.pairings[0].target == "embedded" and s.pairings[0].drafter == "embedded"
    assert s.settings.repetitions == 5 and s.settings.warmups == 1


def test_malformed_toml(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text("name = \n[[arms]\n")
    assert "not valid TOML" in _error(p)


@pytest.mark.parametrize("arm_extra, key, what", [
    ({"blok": 3}, "arms[0].blok", "unknown field"),
    ({"block": "three"}, "arms[0].block", "expected an integer"),
    ({"block": 0}, "arms[0].block", "must be >= 1"),
    ({"engine": "vllm"}, "arms[0].engine", "unknown engine"),
    ({"pairing": "nope"}, "arms[0].pairing", "no pairing named 'nope'"),
    ({"env": {"X": [1]}}, "arms[0].env.X", "env values are strings"),
    ({"command": ["x", "{modle}"]}, "arms[0].command", "unknown placeholder {modle}"),
    ({"tok_s_regex": "tok/s"}, "arms[0].tok_s_regex", "capture group"),
    ({"timeout_s": -1}, "arms[0].timeout_s", "must be > 0"),
])
def test_bad_arm_fields(tmp_path: Path, arm_extra: dict, key: str, what: str) -> None:
    arm = command_arm("a")
    arm.update(arm_extra)
    msg = _error(write_suite(tmp_path, [arm]))
    assert f": {key}: " in msg and what in msg, msg


@pytest.mark.parametrize("settings, key, what", [
    ({"repetitions": 2.5}, "repetitions", "expected an integer"),
    ({"max_tokens": True}, "max_tokens", "expected an integer"),
    ({"cooldown_s": "long"}, "cooldown_s", "expected a number of seconds or \"host\""),
    ({"override_prefixes": "SPECDEC_"}, "override_prefixes", "list of strings"),
    ({"frobnicate": 1}, "frobnicate", "unknown field"),
    ({"quiet": {"enabled": "yes"}}, "quiet.enabled", "true or false"),
    ({"cooldown_ratio": -0.5}, "cooldown_ratio", "must be >= 0"),
    ({"cooldown_ratio": "fast"}, "cooldown_ratio", "expected a number"),
    ({"cooldown_s": 5, "cooldown_cap_s": 2}, "cooldown_cap_s", "must be >= cooldown_s (5)"),
    ({"cooldown_cap_s": "none"}, "cooldown_cap_s", "expected a number"),
    ({"cooldown_s": "host", "cooldown_ratio": 2}, "cooldown_ratio", "host spec gives it"),
    ({"cooldown_s": "host", "cooldown_cap_s": 9}, "cooldown_cap_s", "host spec gives it"),
    ({"budget_s": 0}, "budget_s", "must be > 0"),
    ({"max_repetitions": 1}, "max_repetitions", "must be >= repetitions (2)"),
    ({"max_repetitions": 3.5}, "max_repetitions", "expected an integer"),
    ({"threshold": 1.0}, "threshold", "must be < 1"),
    ({"threshold": 0}, "threshold", "must be > 0"),
    ({"alpha": 0.6}, "alpha", "must be <= 0.5"),
    ({"alpha": 0.0}, "alpha", "must be > 0"),
    ({"looks": 0}, "looks", "must be >= 1"),
    ({"thresholds": {"ms_per_tok": 0.1}}, "thresholds.ms_per_tok", "unknown figure (known: ms_per_token"),
    ({"thresholds": {"memory_mib": 1.5}}, "thresholds.memory_mib", "must be < 1"),
    ({"thresholds": 0.1}, "thresholds", "expected a table"),
])
def test_bad_settings(tmp_path: Path, settings: dict, key: str, what: str) -> None:
    msg = _error(write_suite(tmp_path, [command_arm("a")], **settings))
    assert f": {key}: " in msg and what in msg, msg


def test_two_arms_with_one_name(tmp_path: Path) -> None:
    msg = _error(write_suite(tmp_path, [command_arm("a"), command_arm("a", 2)]))
    assert ": arms[1].name: two arms are named 'a'" in msg


def test_missing_model_directory(tmp_path: Path) -> None:
    p = write_suite(tmp_path, [command_arm("a")],
                    pairings=[{"name": "fx", "target": str(tmp_path / "nowhere")}])
    msg = _error(p)
    assert ": pairings[0].target: model directory not found" in msg


def test_speculative_arm_needs_a_drafter(tmp_path: Path) -> None:
    p = write_suite(tmp_path, [{"name": "b3", "pairing": "fx", "engine": "mlx-lm", "block": 3}],
                    pairings=[{"name": "fx", "target": str(tmp_path / "target")}])
    assert ": arms[0].block: block 3 needs a drafter" in _error(p)


def test_missing_prompt_file(tmp_path: Path) -> None:
    p = write_suite(tmp_path, [command_arm("a")], prompts=[{"name": "x", "file": "missing.txt"}])
    assert ": prompts[0].file: cannot read prompt file" in _error(p)


def test_record_round_trip_and_quick(tmp_path: Path) -> None:
    s = load_suite(write_suite(tmp_path, [command_arm("a", env={"K": "v"}), command_arm("b", 2)]))
    back = suite_from_record(s.to_dict(), "rec.json")
    assert back.arms == s.arms and back.prompts == s.prompts and back.settings == s.settings
    q = quick(s)
    assert q.settings.repetitions == 2 and q.settings.cooldown_s == 0 and not q.settings.quiet.enabled


def test_cooldown_from_host_spec(tmp_path: Path) -> None:
    from harness.collect.host.info import collect_host
    from harness.collect.host.specs import resolve_host_settings
    s = load_suite(write_suite(tmp_path, [command_arm("a")], cooldown_s="host"))
    assert s.settings.cooldown_source == "host"
    r = resolve_host_settings(s, collect_host())
    assert r.settings.cooldown_source.startswith("host")  and r.settings.cooldown_source != "host"
    assert r.settings.cooldown_s >= 0
    assert "cooldown_s" in _error(write_suite(tmp_path, [command_arm("a")], cooldown_s="long"))


def test_scaling_setting_parses_and_rejects_non_bool(tmp_path: Path) -> None:
    src = Path(DEFAULT_SUITE).read_text()
    good = tmp_path / "s.toml"
    good.write_text("scaling = true\n" + src)
    assert load_suite(good).settings.scaling is True
    assert load_suite(DEFAULT_SUITE).settings.scaling is False
    bad = tmp_path / "b.toml"
    bad.write_text('scaling = "yes"\n' + src)
    assert "scaling" in _error(bad)


@pytest.mark.real_engine
def test_measure_scaling_times_the_first_specdec_target() -> None:
    from harness.collect.runner import measure_scaling
    out = measure_scaling(load_suite(DEFAULT_SUITE), context_tokens=32)
    assert out is not None and out["pairing"] == "embedded"
    assert [w["T"] for w in out["widths"]] == [1, 2, 3, 4, 8]
    assert all(w["min_ms"] <= w["median_ms"] <= w["max_ms"] for w in out["widths"])


def test_cooldown_rule_and_budget_settings_parse_and_round_trip(tmp_path: Path) -> None:
    s = load_suite(write_suite(tmp_path, [command_arm("a")], cooldown_s=0.05, cooldown_ratio=0.25,
                               cooldown_cap_s=2.0, budget_s=600, max_repetitions=12, threshold=0.05,
                               alpha=0.5, looks=3))
    st = s.settings
    assert (st.cooldown_s, st.cooldown_ratio, st.cooldown_cap_s) == (0.05, 0.25, 2.0)
    assert (st.budget_s, st.max_repetitions, st.threshold, st.alpha, st.looks) == (600.0, 12, 0.05, 0.5, 3)
    d = s.to_dict()["settings"]
    assert d["cooldown_ratio"] == 0.25 and d["cooldown_cap_s"] == 2.0 and d["budget_s"] == 600.0
    assert suite_from_record(s.to_dict(), "rec.json").settings == st
    q = quick(s).settings
    assert (q.cooldown_s, q.cooldown_ratio, q.cooldown_cap_s) == (0.0, 0.0, None)


def test_new_settings_default_and_old_records_lack_them(tmp_path: Path) -> None:
    s = load_suite(write_suite(tmp_path, [command_arm("a")]))
    st = s.settings
    assert (st.cooldown_ratio, st.cooldown_cap_s) == (0.0, None)
    assert (st.budget_s, st.max_repetitions, st.threshold, st.alpha, st.looks) == (None, None, 0.10, 0.05, 4)
    d = s.to_dict()
    for key in ("cooldown_ratio", "cooldown_cap_s", "budget_s", "max_repetitions", "threshold",
                "alpha", "looks"):
        del d["settings"][key]     # a record written before these settings existed
    assert suite_from_record(d, "old.json").settings == st


def test_per_figure_thresholds_load(tmp_path: Path) -> None:
    s = load_suite(write_suite(tmp_path, [command_arm("a")], thresholds={"memory_mib": 0.02}))
    assert s.settings.thresholds == {"memory_mib": 0.02} and s.settings.threshold == 0.10


def test_an_embedded_model_by_name(tmp_path: Path) -> None:
    # "embedded:NAME" is the default engine's embedded model NAME (its MTP head), in any role.
    p = tmp_path / "s.toml"
    p.write_text('name = "m"\n[[pairings]]\nname = "mtp"\ntarget = "embedded"\ndrafter = "embedded:mtp"\n'
                 '[[arms]]\nname = "b3"\npairing = "mtp"\nblock = 3\n[[prompts]]\ncategory = "code"\nlimit = 1\n')
    s = load_suite(p)
    assert s.pairings[0].drafter == "embedded:mtp"
    assert s.pairings[0].drafter_dir().name == "mtp" and (s.pairings[0].drafter_dir() / "config.json").is_file()
    p.write_text(p.read_text().replace("embedded:mtp", "embedded:nope"))
    with pytest.raises(UserError, match="the embedded nope model is missing"):
        load_suite(p)


@pytest.mark.parametrize("extra, key, what", [
    ("[engines.e]\ntimeout_s = -1\n", "engines.e.timeout_s", "must be > 0, got -1"),
    ("[engines.e]\nphases = \"draft\"\n", "engines.e.phases", "expected a list of strings, got 'draft'"),
    ("[engines.e]\nadapter = \"shell\"\n", "engines.e.adapter", "expected one of \"command\", got 'shell'"),
    ("[engines.e.prompts]\ncode = [{ name = \"a\" }]\n", "engines.e.prompts.code[0].text", "missing"),
])
def test_typed_errors_name_the_path_into_tables(tmp_path: Path, extra: str, key: str, what: str) -> None:
    # A table's key comes from the file: msgspec's own message says only `[...]` there.
    p = write_suite(tmp_path, [command_arm("a")])
    p.write_text(p.read_text() + extra)
    msg = _error(p)
    assert f": {key}: {what}" in msg, msg


@pytest.mark.parametrize("kw, key, what", [
    ({"quiet": {"threshold_pct": 101}}, "quiet.threshold_pct", "must be <= 100, got 101"),
    ({"quiet": {"wait": 1}}, "quiet.wait", "unknown field (known: enabled, threshold_pct, settle_s, timeout_s)"),
    ({"seed": 2 ** 64}, "seed", "must be < 2**64"),
    ({"prompts": [{"name": "x", "text": "t", "limit": 0}]}, "prompts[0].limit", "must be >= 1, got 0"),
    ({"prompts": [{"text": "t"}]}, "prompts[0].name", "missing"),
    ({"pairings": [{"name": "fx"}]}, "pairings[0].target", "missing (a model directory or \"embedded\")"),
])
def test_typed_errors_say_the_value_and_the_bound(tmp_path: Path, kw: dict, key: str, what: str) -> None:
    msg = _error(write_suite(tmp_path, [command_arm("a")], **kw))
    assert f": {key}: {what}" in msg, msg


def test_committed_records_suites_are_the_suite_type() -> None:
    # The record's suite section is the suite file's own types: every committed record converts.
    import json

    import msgspec

    from harness.core import suitespec
    from harness.core.schema import SuiteSection, load_record
    repo = Path(__file__).resolve().parents[1]
    paths = [*repo.glob("reports/*.json"), *repo.glob("tests/fixtures/**/*.json")]
    records = [(p, d) for p in paths if isinstance(d := json.loads(p.read_text()), dict)
               and d.get("kind") == "harness.record"]
    assert len(records) >= 10
    for p, d in records:
        s = msgspec.convert(load_record(d, str(p))["suite"], SuiteSection)
        assert isinstance(s.settings, suitespec.Settings) and all(isinstance(a, suitespec.Arm) for a in s.arms)


def test_a_records_suite_refuses_what_a_suite_file_refuses(tmp_path: Path) -> None:
    from harness.collect.suite import load_suite as load
    from harness.core.schema import load_record
    s = load(write_suite(tmp_path, [command_arm("a")])).to_dict()
    rec = {"schema_version": 4, "kind": "harness.record", "session_id": "x", "created": "now", "suite": s,
           "runs": []}
    assert load_record(rec, "r.json")["suite"] == s
    s["arms"][0]["blok"] = 3
    with pytest.raises(UserError, match=r"unknown field `blok` - at `\$.suite.arms\[0\]`"):
        load_record(rec, "r.json")
