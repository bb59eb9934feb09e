"""The PR comment's asv part: each benchmark once, from the environment pr-check
measured, CodSpeed-style: one sentence of counts (regressions first, then the untouched), then
only the rows that changed, where it listed every benchmark twice (110 lines)."""

from __future__ import annotations

from harness.ci import asvtool, prcheck

M = "m1-ultra"
EXISTING = f"{M}/existing-py_work_venv_bin_python"
VIRTUALENV = f"{M}/virtualenv-py3.11"
BENCHES = [("+", "2.85±0.1", "7.66±0.3", "2.69", "bench_engine.Decode.track_ms_per_token('classic')")] + [
    ("", "1.00", "1.01", "1.01", f"bench_engine.Rounds.track_phase_ms_per_round('classic', 'p{i}')") for i in range(20)]


def _two_env_table() -> str:
    """asv compare's table when both commits have results in two environments."""
    lines = ["| Change   | Before [b0e27ff4] | After [dc71bf9c] | Ratio | Benchmark (Parameter) |",
             "|----------|-------------------|------------------|-------|-----------------------|"]
    for env in (EXISTING, VIRTUALENV):
        for mark, b, a, ratio, name in BENCHES:
            # The virtualenv's older results read differently: they must not be what is shown.
            mark2 = mark if env == EXISTING else ""
            lines.append(f"| {mark2} | {b} | {a} | {ratio} | {name} [{env}] |")
    return "\n".join(lines) + "\n"


def test_each_benchmark_is_kept_once_from_the_environment_pr_check_measured():
    rows = prcheck.measured_rows(asvtool.parse_compare(_two_env_table()))
    assert len(rows) == len(BENCHES) and {r.env for r in rows} == {EXISTING}
    assert rows[0].mark == "+"


def test_asv_compare_is_asked_for_the_measured_environment_only(monkeypatch, tmp_path):
    seen = []

    def fake_run(args, conf, machine_file=None, env=None, echo=True, timeout_s=None):
        seen.append(list(args))
        return asvtool.AsvRun(list(args), 0, _two_env_table())
    monkeypatch.setattr(prcheck, "run_asv", fake_run)
    rows, _ = prcheck.asv_rows(None, tmp_path / "m.json", M, "b0e27ff4", "dc71bf9c", 1.1)
    assert "--python=same" in seen[0] and len(rows) == len(BENCHES)


def test_comment_says_counts_first_then_only_the_changed_rows():
    table = _two_env_table()
    rows = prcheck.measured_rows(asvtool.parse_compare(table))
    out = prcheck.asv_section(rows, table)
    assert out[0] == "asv over the same samples (Mann-Whitney U): 1 regression, 20 untouched benchmarks."
    body = out[2:]
    assert body[:2] == ["| asv | benchmark | base | head | ratio |", "|---|---|---|---|---|"]
    assert body[2:] == ["| worse | `bench_engine.Decode.track_ms_per_token('classic')` | 2.85±0.1 | 7.66±0.3 | 2.69 |"]
    assert not any("track_phase_ms_per_round" in x for x in out)   # untouched: counted, not listed
