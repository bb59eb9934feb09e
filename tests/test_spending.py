"""Alpha spending over a check's looks (harness.analyze.spending)."""

import math

import numpy as np
import pytest

from harness.analyze import spending
from harness.analyze.stats import scipy_stats


def test_four_even_looks_give_the_published_obrien_fleming_type_boundaries():
    # gsDesign's sfLDOF, symmetric two-sided at 5% (Jennison & Turnbull's tables agree to 3 places).
    c = spending.boundaries(0.05, (0.25, 0.5, 0.75, 1.0), (1, 2, 3, 4))
    assert c == pytest.approx((4.3326, 2.9631, 2.3590, 2.0141), abs=2e-4)
    # One look is the plain two-sided test.
    assert spending.boundaries(0.05, (1.0,), (7,)) == pytest.approx((1.95996,), abs=1e-5)
    assert spending.nominal_level(0.05, (1.0,), (7,)) == pytest.approx(0.05)


def _crossing_rate(c, sizes, rng, sims=200_000):
    """How often a normal statistic's path over looks at these sizes crosses any boundary."""
    steps = rng.normal(size=(sims, len(sizes))) * np.sqrt(np.diff((0.0, *sizes)))
    z = steps.cumsum(axis=1) / np.sqrt(sizes)
    return float((np.abs(z) >= np.array(c)).any(axis=1).mean())


@pytest.mark.parametrize("times, sizes", [
    ((0.3, 0.55, 0.8, 1.0), (30.0, 41.0, 90.0, 101.0)),      # uneven looks, uneven rounds
    ((0.26, 0.9, 1.0), (5.0, 50.0, 51.0)),                   # the budget ran out at the third look
    ((0.25, 0.5, 0.75, 1.0), (10.0, 80.0, 90.0, 300.0)),
])
def test_the_chance_of_any_crossing_is_alpha_at_the_looks_real_times_and_sizes(times, sizes):
    rate = _crossing_rate(spending.boundaries(0.05, times, sizes), sizes, np.random.default_rng(1))
    assert rate == pytest.approx(0.05, abs=0.003)            # 3.1 standard errors of 200,000 paths
    # The even Bonferroni split's boundaries at the same looks are the more conservative.
    even = [float(scipy_stats().norm.isf(0.05 / len(sizes) / 2))] * len(sizes)
    assert _crossing_rate(even, sizes, np.random.default_rng(1)) < rate


def test_a_look_at_the_same_data_keeps_the_boundary_and_spends_nothing():
    c = spending.boundaries(0.05, (0.25, 0.5, 1.0), (10, 10, 20))
    assert c[1] == c[0]
    assert _crossing_rate(c, (10.0, 10.0, 20.0), np.random.default_rng(2)) == pytest.approx(0.05, abs=0.003)


def test_most_of_the_level_is_kept_for_the_last_look():
    assert spending.spent(0.05, 0.25) < 0.0001 and spending.spent(0.05, 1.0) == 0.05
    assert spending.spent(0.05, 0.5) < spending.spent(0.05, 0.75) < 0.05
    levels = [spending.nominal_level(0.05, (0.25, 0.5, 0.75, 1.0)[:j], (1, 2, 3, 4)[:j]) for j in range(1, 5)]
    assert levels == sorted(levels) and levels[-1] > 0.04     # the last look near the one-look 5%
    assert math.isinf(spending.boundaries(0.05, (1e-9,), (1,))[0])   # spends nothing so early


@pytest.mark.parametrize("times, sizes", [((), ()), ((0.5, 0.4), (1, 2)), ((0.5, 1.2), (1, 2)),
                                          ((0.0, 1.0), (1, 2)), ((0.5, 1.0), (1, 0)), ((0.5,), (1, 2))])
def test_a_schedule_that_is_not_one_is_refused(times, sizes):
    with pytest.raises(ValueError):
        spending.boundaries(0.05, times, sizes)
