"""The asv integration's parts, fast: figures from a record, asv's statistics and table,
pr-check's verdicts, the machine entry, the results repository, the dashboard's libraries.
The slow end-to-end proof is test_asv_e2e.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from harness.analyze.envdiff import EnvDifference
from harness.ci import asvtool, machine, nightly, pullrequest
from harness.core.errors import UserError

REPO = Path(__file__).resolve().parent.parent


if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
from harness.ci import asvsession as session  # noqa: E402  (the asv suite's helpers: benchmarks/ imports them)

# --- figures from a record -----------------------------------------------------------------

def _run(arm, rep, mpt, mode="classic", rounds=0, accept=None, ident="identical", status="ok", warmup=False,
         phase=None):
    diag = {"mode": mode, "rounds": rounds, "decode_ms": mpt * 48, "acceptance_rate": accept,
            "phase_ms": phase or {}}
    return {"index": rep, "arm": arm, "prompt": "code/x", "repetition": rep, "warmup": warmup, "status": status,
            "error": None if status == "ok" else "ImportError: broken", "ms_per_token": mpt,
            "diagnostics": diag, "identity": {"status": ident}, "marks": [], "label": "shipping configuration"}


PH = ("draft_block", "verify_forward")
ARMS = [session.ArmSpec("classic", "classic", 1, (), PH),
        session.ArmSpec("block3", "block3", 3, (), PH),
        session.ArmSpec("block3-inexact", "block3-inexact [not shipping: SPECDEC_ALLOW_INEXACT]", 3,
                        ("SPECDEC_ALLOW_INEXACT",), PH)]


def _record(fail_arm=None, ident="identical"):
    runs = [_run("classic", 0, 9.0, warmup=True)]
    for rep in range(3):
        runs.append(_run("classic", rep, 2.0 + rep * 0.1, ident=ident))
        runs.append(_run("block3", rep, 2.1, status="failed" if fail_arm == "block3" else "ok"))
        runs.append(_run("block3-inexact", rep, 4.0, mode="speculative", rounds=32, accept=0.25,
                         phase={"verify_forward": 64.0, "draft_block": 32.0}))
    return {"schema_version": 1, "kind": "harness.record", "runs": runs}


def test_figures_are_per_run_samples_without_warmups():
    f = session.figures_from_record(_record()["runs"], ARMS)
    assert f.ms_per_token.samples["classic"] == [2.0, 2.1, 2.2]
    lab = ARMS[2].label
    assert f.ms_per_round.samples[lab] == [4.0 * 48 / 32] * 3
    assert f.rejection_rate.samples[lab] == [0.75] * 3
    assert f.phase_ms_per_round.samples[f"{lab}|verify_forward"] == [2.0] * 3
    # Round cost: this run's ms/round over the classic run of the same repetition.
    assert f.round_cost_classic_steps.samples[lab] == pytest.approx([6.0 / 2.0, 6.0 / 2.1, 6.0 / 2.2])
    assert "decoded classic" in f.ms_per_round.skip["block3"]
    assert "no rounds" in f.ms_per_round.skip["classic"]
    assert f.identity_mismatches.samples["classic"] == [0.0] * 3


def test_a_failed_arm_fails_its_figures_and_a_missing_baseline_skips_identity():
    f = session.figures_from_record(_record(fail_arm="block3", ident="no_baseline")["runs"], ARMS)
    assert "3 of 3 runs failed" in f.errors["block3"]
    with pytest.raises(RuntimeError, match="runs failed on this commit"):
        session.samples_for(f, "ms_per_token", "block3")
    with pytest.raises(NotImplementedError, match="no baseline"):
        session.samples_for(f, "identity_mismatches", "classic")
    with pytest.raises(NotImplementedError, match="no rounds"):
        session.samples_for(f, "phase_ms_per_round", "classic|verify_forward")
    assert session.samples_for(f, "ms_per_token", "classic") == {"samples": [2.0, 2.1, 2.2], "number": 1}


def test_memory_is_a_figure_where_the_engine_reports_it():
    rec = _record()
    for i, r in enumerate(x for x in rec["runs"] if x["arm"] == "classic" and not x["warmup"]):
        r["diagnostics"]["peak_memory_bytes"] = (100 + i) * 2**20        # its peak alone: taken as is
    for r in (x for x in rec["runs"] if x["arm"] == "block3-inexact"):
        # A process holding 90 MiB (two pairs) of which this generation used 40 MiB, adding 5.
        r["diagnostics"].update(peak_memory_bytes=95 * 2**20, resident_memory_bytes=90 * 2**20,
                                model_memory_bytes=40 * 2**20)
    f = session.figures_from_record(rec["runs"], ARMS)
    assert f.memory_mib.samples["classic"] == [100.0, 101.0, 102.0]
    assert f.memory_mib.samples[ARMS[2].label] == [45.0] * 3
    with pytest.raises(NotImplementedError, match="peak_memory_bytes"):
        session.samples_for(f, "memory_mib", "block3")


def test_the_samples_shape_is_what_asv_computes_statistics_from():
    from asv_runner.statistics import compute_stats
    value, st = compute_stats([2.0, 2.1, 2.2, 2.3, 2.4, 2.5, 2.6, 2.7], 1)
    assert value == pytest.approx(2.35) and st["repeat"] == 8


def test_asv_mann_whitney_needs_seven_samples_per_side():
    """Why the suite measures 8 runs per arm: fully separated 6 vs 6 is never significant."""
    from asv._stats import is_different
    st = {"ci_99_a": 0.0, "ci_99_b": 100.0}
    for n, expect in ((6, False), (7, True), (8, True)):
        a, b = [1.0 + i / 100 for i in range(n)], [2.0 + i / 100 for i in range(n)]
        assert is_different(a, b, st, st) is expect, n


def test_arm_labels_name_their_overrides():
    suite = {"override_prefixes": ["SPECDEC_", "MLX_"], "override_ignore": ["SPECDEC_BLAS"],
             "arms": [{"name": "classic", "block": 1},
                      {"name": "block3-inexact", "block": 3, "env": {"SPECDEC_ALLOW_INEXACT": "1"}},
                      {"name": "dense", "block": 3, "env": {"SPECDEC_QUANTIZE_DRAFTER": "0"}}]}
    labels = [a.label for a in session.arm_specs(msgspec.convert(suite, session.SuiteFile), environ={"SPECDEC_BLAS": "reference"})]
    assert labels == ["classic", "block3-inexact [not shipping: SPECDEC_ALLOW_INEXACT]",
                      "dense [not shipping: SPECDEC_QUANTIZE_DRAFTER=0]"]
    inherited = session.arm_specs(msgspec.convert(suite, session.SuiteFile), environ={"SPECDEC_PROFILE": "1"})
    assert inherited[0].label == "classic [not shipping: SPECDEC_PROFILE]"


def test_a_foreign_engine_declares_its_own_prefixes_and_phases():
    suite = {"engines": {"tiny": {"phases": ["draft", "verify", "host_readback"], "override_prefixes": ["TINY_"]}},
             "arms": [{"name": "classic", "engine": "tiny", "block": 1, "command": ["tiny"]},
                      {"name": "b3", "engine": "tiny", "block": 3, "command": ["tiny"],
                       "env": {"TINY_ALLOW_INEXACT": "1"}}]}
    arms = session.arm_specs(msgspec.convert(suite, session.SuiteFile), environ={"SPECDEC_PROFILE": "1", "TINY_TRACE": "2"})
    # Another engine's variables are not this engine's overrides; its own inherited ones are.
    assert [a.label for a in arms] == ["classic [not shipping: TINY_TRACE=2]",
                                      "b3 [not shipping: TINY_ALLOW_INEXACT, TINY_TRACE=2]"]
    assert session.declared_phases(arms) == ["draft", "verify", "host_readback"]
    runs = [_run("b3", rep, 3.0, mode="speculative", rounds=10, accept=0.5,
                 phase={"draft": 5.0, "verify": 20.0, **({"host_readback": 2.0} if rep else {})})
            for rep in range(3)]
    f = session.figures_from_record(runs, arms)
    lab = arms[1].label
    assert f.phase_ms_per_round.samples[f"{lab}|verify"] == [2.0] * 3
    # Reported in 2 of 3 runs: skipped with the reason, never charted as 0.0.
    assert f"{lab}|host_readback" not in f.phase_ms_per_round.samples
    with pytest.raises(NotImplementedError, match="no 'host_readback' phase in 1 of 3 runs"):
        session.samples_for(f, "phase_ms_per_round", f"{lab}|host_readback")
    # No acceptance reported: its rejection rate is skipped with the reason, not read as 0.
    with pytest.raises(NotImplementedError, match="neither acceptance_rate nor proposed/accepted"):
        session.samples_for(session.figures_from_record(
            [{**x, "diagnostics": {**x["diagnostics"], "acceptance_rate": None}} for x in runs], arms),
            "rejection_rate", lab)


def test_the_shipped_suite_has_enough_runs_and_a_labelled_override_arm():
    assert session.SUITE.repetitions >= 7
    assert "block3-inexact [not shipping: SPECDEC_ALLOW_INEXACT]" in session.LABELS
    assert session.SPEC_LABELS == [lab for lab in session.LABELS if lab != "classic"]


def test_version_follows_meaning_not_noise_settings():
    s = session.SUITE
    v = session.figure_version("ms_per_token", s)
    assert session.figure_version("ms_per_token", msgspec.structs.replace(s, repetitions=3)) == v
    assert session.figure_version("ms_per_token", msgspec.structs.replace(s, max_tokens=64)) != v


def test_with_repetitions_rewrites_or_adds_the_key():
    assert session.with_repetitions("name = 'x'\nrepetitions = 8   # c\n[quiet]\n", 4).splitlines()[1] == "repetitions = 4   # c"
    assert session.with_repetitions("name = 'x'\n", 3).startswith("repetitions = 3\n")


# --- asv's comparison table ----------------------------------------------------------------

COMPARE_OUT = """
| Change   | Before [b0e27ff4]    | After [dc71bf9c]    |   Ratio | Benchmark (Parameter)                                                      |
|----------|----------------------|---------------------|---------|----------------------------------------------------------------------------|
| +        | 2.85±0.1             | 7.66±0.3            |    2.69 | bench_specdec.Decode.track_ms_per_token('classic')                         |
|          | 6.1±1                | 6.5±1               |   ~1.07 | bench_specdec.Decode.track_ms_per_token('block3-inexact [not shipping: SPECDEC_ALLOW_INEXACT]') [m/virtualenv-py3.11] |
|          | 0.7377               | 0.7377              |    1.00 | bench_specdec.Rounds.track_rejection_rate('block3-inexact [not shipping: SPECDEC_ALLOW_INEXACT]') |
| x        | 1                    | 2                   |    2.00 | bench_specdec.Decode.track_identity_mismatches('classic')                  |
"""


def test_parse_compare_reads_marks_ratios_and_environments():
    rows = asvtool.parse_compare(COMPARE_OUT)
    assert [r.mark for r in rows] == ["+", "", "", "x"]
    assert rows[0].name == "bench_specdec.Decode.track_ms_per_token('classic')"
    assert rows[1].insignificant_change and rows[1].env == "m/virtualenv-py3.11"
    assert rows[1].name.endswith("SPECDEC_ALLOW_INEXACT]')")
    assert rows[2].env is None


# --- pr-check's verdicts ------------------------------------------------------------------

def _cmp(verdict_change, noise=0.01, n=24, identity=None, head_fail=False):
    """A Comparison of two sides built from synthetic paired runs, judged by the real code."""
    import numpy as np

    from harness.analyze.design import Design
    from harness.analyze.identity import IdentityRow
    from harness.ci import twocommits

    rng = np.random.default_rng(0)
    design = Design(threshold=0.10, alpha=0.05, looks=4, figures=2)
    base, head = [], []
    for rep in range(n):
        drift = float(np.exp(rng.normal(0, 0.3)))
        for arm, change in (("classic", verdict_change), ("block3-inexact", 1.0)):
            b = 2.0 * drift * float(np.exp(rng.normal(0, noise)))
            h = 2.0 * drift * change * float(np.exp(rng.normal(0, noise)))
            base.append(_run(arm, rep, b, mode="speculative" if arm != "classic" else "classic",
                             rounds=16 if arm != "classic" else 0, phase={"verify_forward": b * 10}))
            head.append(_run(arm, rep, h, mode="speculative" if arm != "classic" else "classic",
                             rounds=16 if arm != "classic" else 0, phase={"verify_forward": h * 10},
                             status="failed" if head_fail and arm == "classic" else "ok"))
    figs = twocommits.judge(base, head, ["classic", "block3-inexact"], design)
    fails = {"base": {}, "head": {"classic": n} if head_fail else {}}
    return twocommits.Comparison("a" * 40, "b" * 40, design, figs,
                              identity or [IdentityRow("classic", "p", "identical", "24 head runs vs base")],
                              fails, {"base": "rb.json", "head": "rh.json"},
                              {"rounds": n, "stopped": "resolved", "stopped_because": "every compared figure resolved"},
                              120.0, labels={"block3-inexact": ["not a shipping configuration: override in force: X=1"]})


def test_a_clear_slowdown_fails_with_its_figure_in_the_headline():
    c = _cmp(1.3)
    assert c.exit_status == 1
    assert c.headline().startswith("FAIL: classic ms/token +")
    gated = {f.arm: f.result.verdict for f in c.gated}
    assert gated == {"classic": "worse", "block3-inexact": "unchanged"}


def test_pass_only_when_every_gated_figure_is_unchanged_or_improved():
    c = _cmp(1.0)
    assert c.exit_status == 0 and c.headline().startswith("pass: every gated figure unchanged within ±10%")
    assert _cmp(0.7).exit_status == 0


def test_noise_that_hides_the_threshold_is_inconclusive_first_never_pass():
    c = _cmp(1.0, noise=0.4, n=6)
    assert c.exit_status == 3
    assert c.headline().startswith("inconclusive: this host could not see changes under")
    # The headline names the inconclusive gated figure that could see least.
    worst = max((f for f in c.gated if f.result.verdict == "inconclusive"), key=lambda f: f.result.detectable)
    assert f"{worst.arm} {worst.figure}" in c.headline()
    assert f"changes under {worst.result.detectable:.1%}" in c.headline()


def _inconclusive(detectable, lo, hi, threshold=0.02):
    """A Comparison whose one gated figure is inconclusive with these readings."""
    from harness.analyze import paired
    from harness.analyze.design import Design
    from harness.ci import twocommits

    res = paired.Paired(80, 1.0, lo, hi, detectable, "inconclusive")
    fig = twocommits.Figure("classic", "ms/token", True, res)
    return twocommits.Comparison("a" * 40, "b" * 40, Design(threshold=threshold), [fig], [],
                              {"base": {}, "head": {}}, {}, {"stopped": "budget"}, 60.0)


def test_an_inconclusive_headline_never_rounds_its_detectable_change_down_to_the_threshold():
    # 2.1% against a 2% threshold once read "could not see changes under 2% ... (threshold 2%)".
    h = _inconclusive(0.021, 0.985, 1.015).headline()
    assert h == "inconclusive: this host could not see changes under 2.1% in classic ms/token (threshold 2%)"
    # A threshold that is not a whole percent is printed as given.
    assert _inconclusive(0.031, 0.985, 1.015, threshold=0.025).headline().endswith("(threshold 2.5%)")


def test_an_inconclusive_figure_that_could_see_the_threshold_names_its_interval_instead():
    # Detectable within the threshold, yet the interval reaches past it: "could not see changes
    # under 1.8%" would be false, so the headline gives the reading and why it did not decide.
    h = _inconclusive(0.018, 0.975, 1.012).headline()
    assert h == ("inconclusive: classic ms/token reads +0.0% (-2.5% to +1.2%), "
                 "an interval that reaches beyond ±2%")


def test_identity_breaks_and_runs_failing_at_head_only_fail():
    from harness.analyze.identity import IdentityRow
    c = _cmp(1.0, identity=[IdentityRow("classic", "p", "differs", "1 of 8 head runs: differs at token 3")])
    assert c.exit_status == 1 and "no longer byte-identical" in c.headline()
    c = _cmp(1.0, head_fail=True)
    assert c.exit_status == 1 and "classic: runs fail at head only" in c.headline()


def _rec(outputs):
    return {"runs": [{"index": i, "arm": a, "prompt": "p", "status": "ok", "token_ids": ids, "text": t,
                      "text_sha256": t, "warmup": False, "marks": [], "label": lab}
                     for i, (a, ids, t, lab) in enumerate(outputs)]}


def test_identity_against_the_base_commits_output():
    from harness.analyze.identity import identity_rows
    from harness.core.runs import as_runs
    base = _rec([("classic", [1, 2, 3], "abc", "shipping configuration")])
    same = _rec([("classic", [1, 2, 3], "abc", "shipping configuration")])
    other = _rec([("classic", [1, 2, 4], "abd", "shipping configuration")])
    assert identity_rows(as_runs(base["runs"]), as_runs(same["runs"]))[0].status == "identical"
    row = identity_rows(as_runs(base["runs"]), as_runs(other["runs"]))[0]
    assert row.status == "differs" and "token 2" in row.detail


def test_markdown_puts_the_verdict_first_and_names_labels_design_and_asv():
    from harness.render.prcomment import visible_lines
    c = _cmp(1.3)
    rows = asvtool.parse_compare(COMPARE_OUT)
    meta = {"machine": "m1-ultra", "host": {"chip": "Apple M1 Ultra"}, "command": "harness pr-check main HEAD",
            "duration_s": 600.0, "load": {"base": {"runs": 48, "failed": 0, "contended": 1, "quiet_wait_timeouts": 0}}}
    md = pullrequest.render_markdown(c, meta, rows, COMPARE_OUT)
    lines = md.splitlines()
    assert lines[0] == "<!-- harness-pr-check:m1-ultra -->" and ": FAIL (" in lines[1]
    assert lines[3].startswith("**HEAD is 30.") and "% slower on classic ms/token (+" in lines[3]
    assert "| classic ms/token | 1.92 ms | 2.46 ms | +30.1% (" in md and md.count("| **slower** |") == 1
    # Diagnostics and the method are folded; what shows is the verdict and the gated figures.
    shown = "\n".join(visible_lines(md))
    assert "phase ms/round: verify_forward" in md and "verify_forward" not in shown
    assert "over at most 4 looks, spent by an O'Brien-Fleming-type boundary; this, the last look taken, was look 4 at the end of sampling, spending what was left" in md
    assert "O'Brien" not in shown and "split over 2 gated figure(s)" in md and "80% power" in md
    assert "block3-inexact: not a shipping configuration" in md
    assert "<summary>asv over the same samples (Mann-Whitney U): 1 regression, 2 untouched, 1 not comparable" in md
    assert "Environment:" not in shown and "Environment: no difference in what the records hold" in md
    c.notes.environment = [EnvDifference("mlx", "0.32.4", "0.33.0")]
    md = pullrequest.render_markdown(c, meta, rows, COMPARE_OUT)
    lines = md.splitlines()
    assert lines[5].startswith("Environment: 1 difference, listed first: mlx 0.32.4 -> 0.33.0")
    assert "| field | base | head |\n|---|---|---|\n| mlx | 0.32.4 | 0.33.0 |" in md
    # asv's reading of the same figure, rounded, in its own folded table.
    assert "| worse | `Decode.track_ms_per_token('classic')` | 2.85 ms ±4% | 7.66 ms ±4% | 2.69 | - |" in md


def test_asv_word_matches_arm_labels_with_overrides():
    from harness.render.prcomment_asv import asv_word, row_for
    rows = asvtool.parse_compare(COMPARE_OUT)
    assert asv_word(row_for(rows, "classic", "ms/token")) == "worse"
    assert asv_word(row_for(rows, "block3-inexact", "ms/token")) == "changed, not significant"
    assert asv_word(row_for(rows, "block3", "ms/token")) == ""


# --- bad input: one line, exit 2 ----------------------------------------------------------

def _cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "harness", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, timeout=120)


def test_a_config_pointing_at_a_missing_benchmark_dir_is_one_line(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    conf = tmp_path / "asv.conf.json"
    conf.write_text('// comment\n{"version": 1, "repo": ".", "benchmark_dir": "nope"}\n')
    r = _cli("pr-check", "main", "HEAD", "--config", str(conf), "--machine-file", str(tmp_path / "m.json"))
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip().count("\n") == 0 and "benchmark_dir" in r.stderr and "is not a directory" in r.stderr
    r = _cli("nightly", "--results-repo", str(tmp_path / "r.git"), "--config", str(tmp_path / "missing.json"))
    assert r.returncode == 2 and r.stderr.startswith("harness: ") and r.stderr.strip().count("\n") == 0


def test_the_project_config_loads_and_names_its_dirs():
    conf = asvtool.load_config(REPO / "asv.conf.json")
    assert conf.benchmark_dir == REPO / "benchmarks"
    assert conf.results_dir == REPO / "results" and conf.html_dir == REPO / "html"
    assert conf.data["environment_type"] == "virtualenv" and conf.data["repo"] == "."


# --- host register ------------------------------------------------------------------------

def test_unknown_host_spec_is_one_line_exit_2(tmp_path):
    r = _cli("host", "register", "--spec", "no-such-host", "--machine-file", str(tmp_path / "m.json"))
    assert r.returncode == 2
    assert r.stderr.strip() == ("harness: unknown host spec 'no-such-host' (known: gb10, h100, h200, linux-cpu, "
                                "m1-ultra, m3-ultra, m5-max)") or "unknown host spec 'no-such-host'" in r.stderr
    assert r.stderr.strip().count("\n") == 0 and not (tmp_path / "m.json").exists()


def test_register_a_matching_host_spec_keeps_other_machines(tmp_path):
    mf = tmp_path / "m.json"
    mf.write_text(json.dumps({"version": 1, "other": {"machine": "other"}}))
    host = {"cpu": {"model": "Apple M1 Ultra", "apple_chip": "Apple M1 Ultra"}, "os": {"system": "Darwin"},
            "gpu": {"name": "Apple M1 Ultra", "family": "G13", "mlx_backend": "metal"}}
    entry, warnings, _ = machine.register(machine_file=mf, host=host)
    assert (entry.machine, entry.chip, entry.gpu_generation, entry.peak_bandwidth) == \
        ("m1-ultra", "Apple M1 Ultra", "G13", "800 GB/s")
    assert warnings == []
    data = json.loads(mf.read_text())
    assert set(data) == {"version", "other", "m1-ultra"} and data["m1-ultra"]["host_spec"] == "m1-ultra"


def test_an_unknown_host_gets_unknown_peak_and_a_warning(tmp_path):
    host = {"cpu": {"model": "RISC-V Thing", "apple_chip": "unknown"}, "os": {"system": "Plan9"},
            "gpu": {"name": "unknown", "mlx_backend": "none"}}
    entry, warnings, _ = machine.register(machine_file=tmp_path / "m.json", host=host, machine="lab-x")
    assert entry.peak_bandwidth == "unknown peak" and entry.host_spec == "none"
    assert entry.chip == "RISC-V Thing" and entry.machine == "lab-x"
    assert any("no host spec" in w and "unknown peak" in w for w in warnings)


def test_the_cli_writes_the_entry_and_warns_for_a_generic_host_spec(tmp_path):
    # --profile, the option's old name, still reads (workflows an earlier `harness init` wrote).
    r = _cli("host", "register", "--profile", "linux-cpu", "--machine-file", str(tmp_path / "m.json"))
    assert r.returncode == 0, r.stderr
    assert "unknown peak" in r.stderr
    entry = json.loads(r.stdout.strip().splitlines()[-1])["entry"]
    assert set(entry) >= {"machine", "os", "arch", "cpu", "num_cpu", "ram", "chip", "gpu_generation", "peak_bandwidth"}


def test_the_asv_shim_reads_the_chosen_machine_file(tmp_path):
    mf = tmp_path / "m.json"
    machine.write_machine_entry(machine.MachineEntry(machine="shim-test", chip="X", os="o", arch="a", cpu="c",
                                                     num_cpu="1", ram="1"), mf)
    code = ("import sys; from harness.ci import asvtool; from asv.machine import Machine;"
            f"asvtool.main(['--machine-file', {str(mf)!r}, '--', '--version']);"
            "print(Machine.load(machine_name='shim-test').chip)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.stdout.strip().splitlines()[-1] == "X", r.stdout + r.stderr


# --- the results repository ---------------------------------------------------------------

def _git(cwd, *args):
    return subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout.strip()


def test_a_rejected_push_is_fetched_merged_and_retried(tmp_path):
    bare = tmp_path / "r.git"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    ours = nightly.open_results_repo(str(bare), tmp_path / "ours", "main")
    (tmp_path / "ours" / "results" / "host-a").mkdir(parents=True)
    (tmp_path / "ours" / "results" / "host-a" / "x.json").write_text("{}")
    assert nightly.commit_paths(ours, ["results/host-a"], "a", "host-a")
    assert nightly.push_with_retry(ours, "main") == 1
    # Another host pushes meanwhile; our next push is rejected, then merged and retried.
    _git(tmp_path, "clone", "-q", str(bare), "theirs")
    (tmp_path / "theirs" / "results" / "host-b").mkdir(parents=True)
    (tmp_path / "theirs" / "results" / "host-b" / "y.json").write_text("{}")
    _git(tmp_path / "theirs", "add", "-A")
    _git(tmp_path / "theirs", "commit", "-q", "-m", "b")
    _git(tmp_path / "theirs", "push", "-q", "origin", "HEAD:main")
    (tmp_path / "ours" / "results" / "host-a" / "z.json").write_text("{}")
    assert nightly.commit_paths(ours, ["results/host-a"], "a2", "host-a")
    assert nightly.push_with_retry(ours, "main") == 2
    files = _git(bare, "ls-tree", "-r", "--name-only", "main").splitlines()
    assert files == ["results/host-a/x.json", "results/host-a/z.json", "results/host-b/y.json"]
    assert not nightly.commit_paths(ours, ["results/host-a"], "nothing new", "host-a")


def test_an_unreachable_results_repo_is_one_clear_error_and_keeps_the_commit(tmp_path):
    with pytest.raises(UserError, match="is unreachable"):
        nightly.open_results_repo(str(tmp_path / "missing.git"), tmp_path / "co", "main")
    bare = tmp_path / "r.git"
    _git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
    repo = nightly.open_results_repo(str(bare), tmp_path / "co2", "main")
    (tmp_path / "co2" / "results" / "h").mkdir(parents=True)
    (tmp_path / "co2" / "results" / "h" / "a.json").write_text("{}")
    nightly.commit_paths(repo, ["results/h"], "m", "h")
    bare.rename(tmp_path / "gone.git")
    with pytest.raises(UserError, match="unreachable.*kept in"):
        nightly.push_with_retry(repo, "main", url=str(bare))
    assert nightly._ahead(repo, "main")  # the commit waits for the next push


def test_sync_in_keeps_this_hosts_local_files(tmp_path):
    repo, local = tmp_path / "repo", tmp_path / "results"
    for m, content in (("me", "repo"), ("other", "repo")):
        (repo / "results" / m).mkdir(parents=True)
        (repo / "results" / m / "c.json").write_text(content)
    (local / "me").mkdir(parents=True)
    (local / "me" / "c.json").write_text("local")
    (local / "other").mkdir(parents=True)
    (local / "other" / "c.json").write_text("stale")
    nightly.sync_in(repo, local, "me")
    assert (local / "me" / "c.json").read_text() == "local"
    assert (local / "other" / "c.json").read_text() == "repo"


def test_branch_commits_stop_at_since(tmp_path):
    _git(tmp_path, "init", "-q", "-b", "main")
    shas = []
    for i in range(3):
        (tmp_path / f"f{i}").write_text(str(i))
        if i == 1:
            (tmp_path / "asv.conf.json").write_text("{}")
        _git(tmp_path, "add", "-A")
        _git(tmp_path, "commit", "-q", "-m", str(i))
        shas.append(_git(tmp_path, "rev-parse", "HEAD"))
    assert nightly.branch_commits(tmp_path, "main", None) == [shas[2], shas[1]]
    assert nightly.branch_commits(tmp_path, "main", shas[0]) == shas[::-1]
    with pytest.raises(UserError, match="unknown branch"):
        nightly.branch_commits(tmp_path, "nope", None)


# --- the dashboard's libraries ------------------------------------------------------------

def test_vendor_dashboard_points_index_at_local_copies(tmp_path):
    from harness.ci import dashboard
    cache = tmp_path / "cache"
    for a in dashboard.ASSETS:
        for p in (a.path, *a.extra):
            f = cache / dashboard._local_name(a, p)
            f.parent.mkdir(parents=True, exist_ok=True)
            f.write_text(f"/* {a.npm} {p} */")
    index = (Path(sys.modules["asv"].__file__).parent / "www" / "index.html").read_text()
    html = tmp_path / "html"
    html.mkdir()
    (html / "index.html").write_text(index)
    assert dashboard.vendor_dashboard(html, cache) == len(dashboard.ASSETS)
    out = (html / "index.html").read_text()
    assert "cdn.jsdelivr.net/npm/bootstrap" not in out and "code.jquery.com" not in out
    assert 'src="vendor/jquery-3.3.1/dist/jquery.min.js"' in out and "integrity=" not in out.split("<body")[0]
    assert (html / "vendor" / "bootstrap-3.1.1" / "dist" / "fonts" / "glyphicons-halflings-regular.woff").exists()
    assert dashboard.vendor_dashboard(html, cache) == 0  # idempotent


def test_a_check_takes_its_false_alarm_level_from_the_command_line():
    suite = pullrequest.load_check_suite(REPO / "benchmarks" / "suite.toml", None, None, 0.01)
    assert suite.settings.alpha == 0.01
    assert pullrequest.load_check_suite(REPO / "benchmarks" / "suite.toml", None, None).settings.alpha == 0.05
    for bad in ("0", "0.7", "-1"):
        r = _cli("compare-commits", "main", "HEAD", "--alpha", bad)
        assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
        assert r.stderr.startswith("harness: --alpha must be in (0, 0.5]"), r.stderr


def test_rejection_rate_and_tokens_per_round_are_judged_exactly():
    from harness.analyze.design import Design
    from harness.ci import twocommits

    def runs(accepted, jitter=False):
        out = []
        for rep in range(6):
            r = _run("block3", rep, 2.0, mode="speculative", rounds=16)
            acc = accepted + (rep % 2 if jitter else 0)
            r["diagnostics"].update(proposed=32, accepted=acc, emitted_per_verify=(acc + 16) / 16)
            out.append(r)
        return out

    design = Design(threshold=0.10, alpha=0.05, looks=1, figures=1)
    same = {f.figure: f for f in twocommits.judge(runs(20), runs(20), ["block3"], design)}
    assert same["rejection rate (exact)"].result.verdict == "unchanged" and same["rejection rate (exact)"].gated
    # One more rejected draft per run at head: worse, with no statistics, and the check fails.
    figs = twocommits.judge(runs(20), runs(19), ["block3"], design)
    by = {f.figure: f for f in figs}
    assert by["rejection rate (exact)"].result.verdict == "worse"
    assert by["tokens/round (exact)"].result.verdict == "worse"
    c = twocommits.Comparison("a" * 40, "b" * 40, design, figs, [], {}, {"base": "b", "head": "h"}, {}, 1.0)
    assert c.exit_status == twocommits.FAIL and "rejection rate (exact)" in c.headline()
    # Runs of one side that differ: not exact on this host; shown, not gated.
    noisy = {f.figure: f for f in twocommits.judge(runs(20, jitter=True), runs(20), ["block3"], design)}
    assert not noisy["rejection rate (exact)"].gated and "nondeterministic" in noisy["rejection rate (exact)"].result.note
