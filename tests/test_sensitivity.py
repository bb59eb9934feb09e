"""scripts/studies/asv_sensitivity.py's process-effect estimate: two worker processes of the same code
that differ by a per-check amount show as excess variance of the checks' z, and the sd it
reports recovers that amount; without one it reports about none."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from harness_helpers import REPO


def _script():
    spec = importlib.util.spec_from_file_location("asv_sensitivity", REPO / "scripts" / "studies" / "asv_sensitivity.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(effect_sd: float, checks: int = 60, arms: int = 3, n: int = 40, pair_sd: float = 0.12) -> list[dict]:
    rng = np.random.default_rng(7)
    rows = []
    for _ in range(checks):
        pairs = {}
        for a in range(arms):
            logs = rng.normal(rng.normal(0.0, effect_sd) if effect_sd else 0.0, pair_sd, n)
            pairs[f"arm{a}"] = {"n": n, "mean_log": float(logs.mean()), "sd_log": float(logs.std(ddof=1))}
        rows.append({"pairs": pairs})
    return rows


def test_no_process_effect_reads_as_the_pairs_noise_alone():
    pe = _script().process_effect(_rows(0.0))
    assert abs(pe["var_z"] - pe["var_z_expected"]) < 3 * pe["var_z_se"]
    assert pe["per_check_effect_sd"] < 0.015


def test_a_per_process_effect_is_excess_variance_and_its_size_is_recovered():
    pe = _script().process_effect(_rows(0.05))
    assert pe["var_z"] > pe["var_z_expected"] + 3 * pe["var_z_se"]
    assert pe["per_check_effect_sd"] == pytest.approx(0.05, abs=0.015)


def test_too_few_checks_give_no_estimate():
    assert _script().process_effect(_rows(0.0, checks=1)) is None


def test_serially_correlated_pairs_are_not_read_as_a_process_effect():
    # Neighbouring pairs alike (AR(1), rho 0.4) and no per-process effect: with each check's
    # serial allowance the excess is gone; without it the same checks would read one.
    from test_paired import _ar1

    from harness.analyze.estimators import serial_inflation

    rng = np.random.default_rng(3)
    rows, bare = [], []
    for _ in range(60):
        x = _ar1(rng, 200, 0.4)
        a = {"n": 200, "mean_log": float(x.mean()), "sd_log": float(x.std(ddof=1))}
        bare.append({"pairs": {"classic": dict(a)}})
        rows.append({"pairs": {"classic": {**a, "serial_inflation": serial_inflation(x)[0]}}})
    pe, pe_bare = _script().process_effect(rows), _script().process_effect(bare)
    assert pe_bare["var_z"] > pe_bare["var_z_expected"] + 3 * pe_bare["var_z_se"]
    assert abs(pe["var_z"] - pe["var_z_expected"]) < 3 * pe["var_z_se"]


def test_each_check_is_judged_with_and_without_the_probe_and_summarised():
    mod = _script()
    rng = np.random.default_rng(2)
    rows = []
    for _ in range(3):
        state = rng.normal(0.0, 0.1, 80)
        xs = list(np.full(80, 5.0))
        ys = list(5.0 * np.exp(state + rng.normal(0.0, 0.04, 80)))
        probe = (list(np.full(80, 4.0)), list(4.0 * np.exp(state + rng.normal(0.0, 0.04, 80))))
        design = {"threshold": 0.05, "alpha": 0.05, "looks": 4, "figures": 1, "look": 4}
        rows.append({"pairs": {"classic": mod.probe_gain(xs, ys, probe, design)}})
    g = rows[0]["pairs"]["classic"]
    assert g["probe"]["used"] and len(g["probe_logs"]) == 80
    assert g["with_probe"]["detectable"] < g["without_probe"]["detectable"]
    assert g["with_probe"]["pairs_needed"] < g["without_probe"]["pairs_needed"]
    s = mod.probe_summary(rows)["classic"]
    assert s["checks"] == 3 and 0.6 < s["variance_removed_median"] < 0.95
    assert s["detectable_with_median"] < s["detectable_without_median"]
    assert mod.probe_summary([{"pairs": {"classic": {"n": 3}}}]) == {}


def test_a_head_summary_takes_the_true_median_of_an_even_count():
    # Checks stop at one of a few looks, so their durations cluster (190, 280, 370 s). The
    # summary once took the upper middle value as "the median": 281 s where it is 236 s here.
    durations = [190.3, 190.4, 190.9, 190.9, 191.0, 281.4, 281.4, 281.6, 369.3, 369.4]
    rs = [{"exit": 1, "classic_verdict": "worse", "worse_gated": ["classic ms/token"], "duration_s": d,
           "classic_detectable": 0.05 + i / 1000, "classic_ratio": 1.15, "classic_n": 100}
          for i, d in enumerate(durations)]
    s = _script().head_summary("F=0.15", rs)
    assert s["duration_s_median"] == pytest.approx(236.2) and s["duration_s_max"] == 369.4
    assert s["classic_detectable_median"] == pytest.approx(0.0545)
    assert s["checks"] == 10 and s["exit_1"] == 10 and s["classic_worse"] == 10 and s["process_effect"] is None
    assert s["true_effect_pooled"] == pytest.approx(0.15)
