"""Lab hosts' readings act: a run started during a backup, on battery, above nominal thermal
pressure, or with another process's GPU work on either side of it is set aside for its host
(analyze.spoiled), counted towards the contended share like a contended run and left out of the
verdicts (tests/test_set_aside.py), and the report, the PR comment and the terminal say so; the quiet wait goes on for an idle GPU, the runner records the GPU read while
our engine is idle, and the thermal wait waits for nominal pressure. Records from fixtures and
synthetic runs; fake readers for the GPU; nothing is timed."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from harness_helpers import REPO, cli_in_process, command_arm, write_suite
from test_host_load import BUSY_R, FakeClock, ScriptedForeign, ScriptedProcesses

from harness.analyze import contended, spoiled
from harness.analyze.design import Design
from harness.analyze.verdict import judge
from harness.ci import pullrequest, twocommits
from harness.ci import reportfiles as report_cli
from harness.cli.report import backfill
from harness.collect import runner
from harness.collect.host import gpuload, thermal
from harness.collect.host.applegpu import AppleGpu
from harness.collect.host.quiet import QuietWait
from harness.collect.suite import load_suite
from harness.core.runs import as_run
from harness.core.schema import load_record
from harness.render import hostwords, termsummary
from harness.render import reportcontext as rp

SETTINGS = {"watch": {"threshold_pct": 15.0, "contended_share": 0.25}}
LINUX_THERMAL = {"power_source": "unknown", "backup_running": "unknown", "power_plugged": True}
MAC_THERMAL = {"power_source": "AC Power", "backup_running": False, "thermal_pressure": "nominal",
               "thermal_pressure_source": "ProcessInfo.thermalState"}
IDLE_GPU = {"device_pct": 2, "renderer_pct": 1, "tiler_pct": 0, "in_use_bytes": 10, "alloc_bytes": 20}
BUSY_GPU = {**IDLE_GPU, "device_pct": 95, "renderer_pct": 94}

# One Mac reading that sets a run aside, by its reason code.
SPOILERS: dict[str, dict[str, Any]] = {
    "backup": {"thermal": {**MAC_THERMAL, "backup_running": True}},
    "battery": {"thermal": {**MAC_THERMAL, "power_source": "Battery Power"}},
    "thermal": {"thermal": {**MAC_THERMAL, "thermal_pressure": "serious"}},
    "gpu-busy": {"thermal": MAC_THERMAL,
                 "gpu": {"limit_pct": 20.0, "settle_s": 0.25, "before": IDLE_GPU, "after": BUSY_GPU}},
}


def _spoil(run: dict[str, Any], why: str) -> dict[str, Any]:
    run = copy.deepcopy(run)
    run.setdefault("load", {}).update(copy.deepcopy(SPOILERS[why]))
    return run


def _runs(n: int, ms: float, spoiled_n: int, rng: Any, arm: str, why: str | None) -> list[dict[str, Any]]:
    """n measured runs of one arm on a Mac, the first `spoiled_n` with reading `why` (None: the
    run marked contended by the watch instead, as before lab readings)."""
    out = []
    for i in range(n):
        r = {"index": i, "arm": arm, "prompt": "p", "repetition": i, "status": "ok", "warmup": False,
             "ms_per_token": ms * float(np.exp(rng.normal(0.0, 0.01))), "marks": [],
             "load": {"thermal": dict(MAC_THERMAL),
                      "gpu": {"limit_pct": 20.0, "before": IDLE_GPU, "after": IDLE_GPU}}}
        if i < spoiled_n:
            r = _spoil(r, why) if why else {**r, "marks": ["contended"]}
        out.append(r)
    return out


# ---------------------------------------------------------------- the reasons, from readings

@pytest.mark.parametrize("why", list(SPOILERS))
def test_each_reading_sets_its_run_aside_and_counts_as_contended(why: str) -> None:
    run = _spoil({"index": 0, "status": "ok", "arm": "a", "marks": [], "load": {"thermal": dict(MAC_THERMAL)}}, why)
    assert spoiled.reasons(run) == (why,)
    assert contended.is_contended(as_run({"index": 0, "status": "ok", **run})) and "contended" not in run["marks"]


def test_quiet_readings_and_linux_records_set_nothing_aside() -> None:
    quiet_mac = {"index": 0, "status": "ok", "load": {"thermal": MAC_THERMAL, "gpu": {"limit_pct": 20.0, "before": IDLE_GPU,
                                                          "after": IDLE_GPU}}}
    linux = {"index": 0, "status": "ok", "load": {"thermal": LINUX_THERMAL}}
    fair = {"index": 0, "status": "ok", "load": {"thermal": {**MAC_THERMAL, "thermal_pressure": "fair"}}}
    assert spoiled.reasons(quiet_mac) == spoiled.reasons(linux) == ()
    assert spoiled.reasons(fair) == ("thermal",)          # above nominal, if only just
    # Every committed record (Linux and NVIDIA hosts) has no run set aside.
    for path in sorted((REPO / "reports").glob("2026*.json")):
        assert not any(spoiled.reasons(r) for r in json.loads(path.read_text())["runs"]), path.name


# ---------------------------------------------------------------- the report

def _fixture_record(tmp_path: Path, spoil: dict[int, str], name: str) -> str:
    """tests/fixtures/report/record.json with the runs at these indices set aside."""
    rec = json.loads((REPO / "tests/fixtures/report/record.json").read_text())
    rec["runs"] = [_spoil(r, spoil[r["index"]]) if r["index"] in spoil else r for r in rec["runs"]]
    path = tmp_path / name
    path.write_text(json.dumps(rec))
    return str(path)


def _measured(path: str, arm: str) -> list[int]:
    return [r["index"] for r in json.loads(Path(path).read_text())["runs"]
            if r["arm"] == arm and not r["warmup"]]


def test_report_flags_set_aside_runs_with_their_reasons_and_the_terminal_its_codes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    plain = _fixture_record(tmp_path, {}, "plain.json")
    first, second = _measured(plain, "block3")
    path = _fixture_record(tmp_path, {first: "battery", second: "gpu-busy"}, "mac.json")
    ctx = report_cli.context_for(path, None, backfill())
    md = rp.render(ctx, "record", user_dir=REPO / "tests/fixtures/report/no-such-templates")
    flags = md[md.index("| arm |", md.index("flag")):] if "flag" in md else ""
    assert f"run {first}" in flags and "set aside (battery): the host ran on battery power" in flags
    assert f"run {second}" in flags and "set aside (gpu-busy): another process used the GPU" in flags
    assert "left out of the verdicts" in flags
    plain_md = rp.render(report_cli.context_for(plain, None, backfill()), "record",
                         user_dir=REPO / "tests/fixtures/report/no-such-templates")
    assert "set aside (" not in plain_md
    # The arm's verdict carries each reason as a mark: the terminal's flag codes and legend.
    marks = judge(load_record(json.loads(Path(path).read_text()), path)).of("block3").marks
    assert "battery" in marks and "gpu-busy" in marks
    assert termsummary.FLAGS["battery"][0] == "P" and termsummary.FLAGS["gpu-busy"][0] == "G"


def _arm_rows(md: str, arm: str) -> tuple[str, str]:
    """The arm's row of the report's first table (verdicts and marks) and of its Arms table
    (per-prompt figures and flags, in the appendix)."""
    def row(header: str) -> str:
        start = md.index(header)
        return next(x for x in md[start:].splitlines() if x.startswith(f"| {arm} |"))
    return row("| arm | tok/s | spread |"), row("| arm | tok/s median |")


def test_report_marks_an_arm_with_a_set_aside_run_do_not_publish_as_a_contended_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    rec = json.loads((REPO / "tests/fixtures/report/record.json").read_text())
    # The fixture with nothing else that marks block3's row: no contended run, no quiet
    # timeout, a cooldown.
    for r in rec["runs"]:
        r["marks"] = [m for m in r.get("marks") or [] if m != "contended" and not m.startswith("quiet_")]
    rec["suite"]["settings"]["cooldown_s"] = 5.0
    first = next(r["index"] for r in rec["runs"] if r["arm"] == "block3" and not r["warmup"])
    as_contended = copy.deepcopy(rec)
    as_contended["runs"][first]["marks"] = ["contended"]
    battery = copy.deepcopy(rec)
    battery["runs"][first] = _spoil(battery["runs"][first], "battery")
    md, top, arms = {}, {}, {}
    for name, data in (("clean", rec), ("contended", as_contended), ("battery", battery)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(data))
        md[name] = rp.render(report_cli.context_for(str(path), None, backfill()), "record",
                             user_dir=REPO / "tests/fixtures/report/no-such-templates")
        top[name], arms[name] = _arm_rows(md[name], "block3")
        assert judge(load_record(data, name)).of("block3").do_not_publish is (name != "clean")
    assert "do not publish" not in arms["clean"] and top["clean"].endswith("| - |")
    assert "| do not publish; 1 contended" in arms["contended"] and top["contended"].endswith("| contended |")
    # Set aside for the host: the same marking, its reason code where the flags are shown.
    assert arms["battery"].endswith("; 1 set aside (battery 1), not in the figures |")
    assert top["battery"].endswith("| battery |")
    assert ("battery: some of its runs set aside for the host (the host ran on battery power), "
            "left out of the verdicts") in md["battery"]
    # A contended run stays in the row's figures; a run set aside leaves them: the other run's alone.
    other = next(r for r in rec["runs"] if r["arm"] == "block3" and not r["warmup"] and r["index"] != first)
    assert arms["contended"].split(" | ")[1] != arms["battery"].split(" | ")[1] == f"{other['decode_tokens_per_s']:.1f}"
    assert "1 run not set aside: spread unknown" in arms["battery"]
    assert "finished and were not set aside for their host;" in md["battery"]
    assert "not set aside" not in md["contended"]


# ---------------------------------------------------------------- the PR comment

def _check(why: str | None, spoiled_n: int) -> tuple[twocommits.Comparison, list[str]]:
    rng = np.random.default_rng(1)
    base = _runs(24, 10.0, spoiled_n, rng, "a", why)
    head = _runs(24, 13.0, spoiled_n, rng, "a", why)
    d = Design(threshold=0.1)
    c = twocommits.Comparison("b" * 40, "h" * 40, d, twocommits.judge(base, head, ["a"], d), [], {},
                           {"base": "b", "head": "h"}, {"rounds": 24}, 60.0)
    c.notes.contention = contended.sides_info({"head": head, "base": base}, SETTINGS)
    md = pullrequest.render_markdown(c, {"machine": "m", "host": {}, "command": "harness pr-check",
                                     "duration_s": 60.0})
    return c, md.splitlines()


def test_pr_comment_says_which_runs_were_set_aside_and_why_before_any_figure() -> None:
    c, md = _check("battery", 3)            # under the share: the verdict stands, the runs are named
    assert c.exit_status == twocommits.FAIL and c.figures[0].result.verdict == "worse"
    said = " ".join(md[:8])
    assert ("set aside for the host: 3 of 24 runs of head (battery 3), 3 of 24 runs of base (battery 3), "
            "left out of the verdicts") in said
    assert "battery: the host ran on battery power" in said
    assert md.index(next(x for x in md if x.startswith("set aside"))) < md.index(next(x for x in md if "| " in x))
    _, quiet = _check("battery", 0)
    assert not any("set aside" in x for x in quiet)


@pytest.mark.parametrize("why", list(SPOILERS))
def test_pr_check_on_runs_set_aside_past_the_share_is_inconclusive(why: str) -> None:
    c, md = _check(why, 20)
    assert c.exit_status == twocommits.INCONCLUSIVE == 3
    assert c.figures[0].result.contended["reading"] == "worse"
    said = " ".join(md[:10])
    assert "contended or set aside: 20 of 24 runs of head" in said
    assert f"({why} 20)" in said and hostwords.LEGEND[why] in said
    assert all(len(x) <= 80 for x in hostwords.set_aside_lines(c.notes.contention))


# ---------------------------------------------------------------- the quiet wait's GPU

class ScriptedGpu:
    """GPU readings by the fake clock's time: busy (95 %) before `until_s`, idle after."""

    def __init__(self, clock: FakeClock, until_s: float) -> None:
        self.clock, self.until, self.t0, self.calls = clock, until_s, clock(), 0

    def __call__(self) -> AppleGpu:
        self.calls += 1
        pct = 95 if self.clock() - self.t0 < self.until else 2
        return AppleGpu(pct, pct, 0, 10, 20)


def _gate(clock: FakeClock, gpu: Any, **kw: Any) -> QuietWait:
    kw = {"threshold_pct": 15.0, "settle_s": 0.5, "timeout_s": 10.0, "interval_s": 0.25, **kw}
    return QuietWait(sampler=ScriptedForeign(clock), process_sampler=ScriptedProcesses([BUSY_R]),
                     clock=clock, sleep=clock.sleep, gpu=gpu, **kw)


def test_quiet_wait_waits_while_another_process_uses_the_gpu() -> None:
    clock = FakeClock()
    res = _gate(clock, ScriptedGpu(clock, until_s=2.0)).wait(cooldown_s=1.0)
    assert res["timed_out"] is False and res["waited_s"] >= 1.0      # busy past the cooldown's end
    g = res["gpu"]
    assert g["busy_samples"] >= 4 and g["device_pct_max"] == 95 and g["last"]["device_pct"] == 2
    assert g["limit_pct"] == gpuload.GPU_BUSY_PCT
    assert res["foreign_pct_max"] == 2.0                              # the CPU was quiet throughout


def test_quiet_wait_gives_up_on_a_gpu_that_stays_busy_and_the_run_is_set_aside() -> None:
    clock = FakeClock()
    res = _gate(clock, ScriptedGpu(clock, until_s=1e9), timeout_s=2.0).wait(cooldown_s=0.5)
    assert res["timed_out"] is True and res["gpu"]["last"]["device_pct"] == 95
    gpu = gpuload.after_run(gpuload.before_run(res), lambda: AppleGpu(2, 2, 0, 1, 1), sleep=lambda s: None)
    assert gpu is not None and spoiled.reasons({"index": 0, "status": "ok", "load": {"gpu": gpu}}) == ("gpu-busy",)


def test_quiet_wait_without_a_gpu_reading_reads_as_before() -> None:
    clock = FakeClock()
    calls = []
    res = _gate(clock, lambda: calls.append(1)).wait(cooldown_s=1.0)   # None: no reading here
    assert "gpu" not in res and len(calls) == 1                         # asked once, then not again
    assert "gpu" not in _gate(clock, None).wait(cooldown_s=1.0)


# ---------------------------------------------------------------- the runner

def _one_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, pct: int) -> dict[str, Any]:
    monkeypatch.setattr(runner.host_gpu, "read", lambda: AppleGpu(pct, pct, 0, 100, 200))
    suite = load_suite(write_suite(tmp_path, [command_arm("a")], repetitions=1, warmups=0,
                                   quiet={"enabled": True, "threshold_pct": 100.0, "settle_s": 0.0, "timeout_s": 0.5}))
    from harness.collect.plan import build_plan
    planned = [p for p in build_plan(suite) if not p.warmup][0]
    return msgspec.to_builtins(runner.run_one(planned, suite, runner.Engines(), runner.NullUI(), None))


def test_runner_records_the_idle_gpu_either_side_and_a_busy_one_sets_the_run_aside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    idle = _one_run(tmp_path, monkeypatch, 3)
    g = idle["load"]["gpu"]
    assert g["before"]["device_pct"] == 3 and g["after"]["device_pct"] == 3 and g["limit_pct"] == 20.0
    assert idle["load"]["quiet_wait"]["gpu"]["busy_samples"] == 0 and spoiled.reasons(idle) == ()
    busy = _one_run(tmp_path, monkeypatch, 90)
    assert "quiet_wait_timeout" in busy["marks"] and spoiled.reasons(busy) == ("gpu-busy",)


def test_runner_records_no_gpu_where_the_host_reads_none(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner.host_gpu, "read", lambda: None)
    suite = load_suite(write_suite(tmp_path, [command_arm("a")], repetitions=1, warmups=0))
    from harness.collect.plan import build_plan
    run = runner.run_one(build_plan(suite)[0], suite, runner.Engines(), runner.NullUI(), None)
    assert run.load.gpu is None and run.load.quiet_wait is not None and run.load.quiet_wait.gpu is None


# ---------------------------------------------------------------- the thermal wait

def test_thermal_wait_cools_until_the_pressure_reads_nominal_within_its_limit() -> None:
    clock = FakeClock()
    levels = iter(["serious", "fair", "nominal"])
    wait, state = thermal.wait_thermal(
        runner.THERMAL_WAIT_MAX_S, read=lambda: {**MAC_THERMAL, "thermal_pressure": next(levels)},
        clock=clock, sleep=clock.sleep)
    assert wait.nominal is True and wait.reads == 3 and wait.waited_s == pytest.approx(2.0)
    assert spoiled.reasons({"index": 0, "status": "ok", "load": {"thermal": state}}) == ()
    clock = FakeClock()
    wait, state = thermal.wait_thermal(5.0, read=lambda: {**MAC_THERMAL, "thermal_pressure": "serious"},
                                       clock=clock, sleep=clock.sleep)
    assert wait.nominal is False and wait.waited_s == pytest.approx(5.0)     # bounded
    assert "thermal pressure serious" in wait.reason
    assert spoiled.reasons({"index": 0, "status": "ok", "load": {"thermal": state}}) == ("thermal",)


# ---------------------------------------------------------------- the workflows

def test_workflows_pass_the_schema_check_make_lint_runs_and_a_broken_one_fails(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("check-jsonschema")
    check = [str(exe), "--builtin-schema", "vendor.github-workflows"]
    ours = sorted(str(p) for p in (REPO / ".github" / "workflows").glob("*.yml"))
    assert any(p.endswith("macos.yml") for p in ours)
    r = subprocess.run(check + ours, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\non: push\njobs:\n  a:\n    runs_on: macos-14\n    steps:\n      - run: make test\n")
    r = subprocess.run(check + [str(bad)], capture_output=True, text=True)
    assert r.returncode != 0 and "'runs-on' is a required property" in r.stdout
    mac = (REPO / ".github" / "workflows" / "macos.yml").read_text()
    assert "runs-on: macos-14" in mac and "make test" in mac
    assert "vendor.github-workflows .github/workflows/*.yml" in (REPO / "Makefile").read_text()


def _init_workflows(tmp_path: Path) -> list[Path]:
    """The workflow files `harness init` writes (harness.ci.init.render), for a repository with
    nothing to build, a Python engine and an engine built with --build: each fills @@INSTALL@@
    its own way. Written under tmp_path, one directory per repository."""
    from harness.ci import init as ci_init
    out = []
    for kind, build in (("plain", None), ("python", None), ("built", ["make", "engine"])):
        repo = tmp_path / kind
        repo.mkdir(parents=True)
        subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True)
        if kind == "python":
            (repo / "pyproject.toml").write_text('[project]\nname = "tiny-engine"\nversion = "0.1"\n')
        files = ci_init.render(repo, "specdec-bench @ git+https://example.org/harness@v1",
                               ["{python}", "-m", "engine"], ["linux-cpu", "m3-ultra"], build=build)
        for dest, text in files.items():
            if dest.startswith(".github/workflows/"):
                assert "@@" not in text, f"{kind} {dest}: a placeholder left"
                out.append(repo / Path(dest).name)
                out[-1].write_text(text)
    return out


def test_init_workflow_templates_render_to_files_the_schema_check_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import yaml

    from harness.ci import init as ci_init
    check = [str(Path(sys.executable).with_name("check-jsonschema")), "--builtin-schema", "vendor.github-workflows"]
    rendered = _init_workflows(tmp_path / "ok")
    assert sorted({p.name for p in rendered}) == ["nightly.yml", "pr-benchmark.yml"] and len(rendered) == 6
    r = subprocess.run(check + [str(p) for p in rendered], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    # The nightly's host readings, the same step as the harness's own nightly.
    def step(path: Path) -> dict[str, Any]:
        steps = next(iter(yaml.safe_load(path.read_text())["jobs"].values()))["steps"]
        return next(s for s in steps if s.get("name") == "Host readings")
    ours = step(REPO / ".github" / "workflows" / "nightly.yml")
    for p in rendered:
        if p.name == "nightly.yml":
            assert step(p) == ours
            names = [s.get("name") for s in next(iter(yaml.safe_load(p.read_text())["jobs"].values()))["steps"]]
            assert names.index("Host readings") < names.index("Measure, publish, push")
    # A broken template fails: the same check on what init renders from it.
    broken = tmp_path / "templates"
    shutil.copytree(ci_init.TEMPLATES, broken)
    nightly = broken / "workflows" / "nightly.yml"
    assert nightly.read_text().count("    runs-on:") == 1
    nightly.write_text(nightly.read_text().replace("    runs-on:", "    runs_on:"))
    monkeypatch.setattr(ci_init, "TEMPLATES", broken)
    bad = [p for p in _init_workflows(tmp_path / "bad") if p.name == "nightly.yml"]
    r = subprocess.run(check + [str(p) for p in bad], capture_output=True, text=True)
    assert r.returncode != 0 and "'runs-on' is a required property" in r.stdout


def test_dashboard_tests_find_chrome_where_macos_installs_it_or_skip_saying_why(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import harness_helpers
    monkeypatch.setattr(harness_helpers.shutil, "which", lambda name: None)
    monkeypatch.setattr(harness_helpers.sys, "platform", "darwin")
    monkeypatch.setattr(harness_helpers.os.path, "exists", lambda p: p == harness_helpers.MAC_CHROME)
    assert harness_helpers.chromium() == "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"
    monkeypatch.setattr(harness_helpers.os.path, "exists", lambda p: False)
    with pytest.raises(pytest.skip.Exception, match="no Google Chrome at /Applications/"):
        harness_helpers.chromium()


def test_run_summary_names_the_runs_set_aside_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(runner.host_thermal, "recent_thermal_state",
                        lambda: {**MAC_THERMAL, "power_source": "Battery Power"})
    monkeypatch.setattr(runner.host_gpu, "read", lambda: None)
    suite = write_suite(tmp_path, [command_arm("a")], repetitions=2)
    r = cli_in_process(["run", str(suite), "--record", str(tmp_path / "r.json")], tmp_path, monkeypatch, capsys)
    assert r.returncode == 0, r.stderr[-2000:]
    lines = r.stdout.splitlines()
    assert lines[0] == "contended or set aside: 2 of 2 runs of a (100%);"
    said = " ".join(x.strip() for x in lines[:8])
    assert "set aside for the host: 2 of 2 runs of a (battery 2), left out of the verdicts" in said
    assert all(json.loads((tmp_path / "r.json").read_text())["runs"][i]["load"]["thermal"]["power_source"]
               == "Battery Power" for i in (0, 1))
