"""Change points of a nightly series (harness.analyze.changepoints), on series with known truth, and
what their alerts say (harness.ci.history)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.analyze.changepoints import Point, Step, analyze_series, benjamini_hochberg
from harness.ci.history import Found, History, SeriesInfo, alert_markdown

ORDER = [f"c{i:02d}" for i in range(30)]


def series(seed: int, step_at: int | None = 17, step: float = 0.25, drift: float = 0.004, noise: float = 0.03,
           reps: int = 7, every: int = 1) -> list[Point]:
    """Per-run samples of 30 commits: a drift of `drift` per commit over commits 3-12, a step at
    `step_at`; only every `every`-th commit measured (a nightly that skipped some)."""
    rng = np.random.default_rng(seed)
    pts, level = [], 1.0
    for i in range(30):
        if 3 <= i < 13:
            level *= 1 + drift
        lv = level * (1 + step if step_at is not None and i >= step_at else 1)
        if i % every == 0 or i == 29:
            pts.append(Point(ORDER[i], tuple(2.0 * lv * np.exp(rng.normal(0, noise, reps)))))
    return pts


@pytest.mark.parametrize("seed", range(5))
def test_a_step_beside_a_drift_is_found_at_its_commit_and_the_drift_is_not(seed: int) -> None:
    (r,) = analyze_series({"s": series(seed)}, ORDER, 0.10)
    assert [(s.last_before, s.first_after, s.direction) for s in r.steps] == [("c16", "c17", "regression")]
    s = r.steps[0]
    assert s.ratio == pytest.approx(1.25, abs=0.05) and s.confidence > 0.99 and s.commits == ["c17"]


def test_with_skipped_commits_the_step_is_a_range_that_holds_it() -> None:
    (r,) = analyze_series({"s": series(1, every=4)}, ORDER, 0.10)
    (s,) = r.steps
    assert (s.last_before, s.first_after) == ("c16", "c20") and s.commits == ["c17", "c18", "c19", "c20"]


def test_an_improvement_is_a_step_too() -> None:
    (r,) = analyze_series({"s": series(2, step=-0.3)}, ORDER, 0.10)
    assert [s.direction for s in r.steps] == ["improvement"]


def test_unchanged_code_gives_no_step_over_many_series() -> None:
    # 400 series of unchanged code analysed together: the false-discovery control over every
    # boundary keeps them all quiet (a step needs the threshold AND significance after BH).
    many = {f"s{k}": series(1000 + k, step_at=None, drift=0.0) for k in range(400)}
    assert sum(len(r.steps) for r in analyze_series(many, ORDER, 0.10)) == 0


def test_a_step_smaller_than_the_threshold_is_not_reported_but_a_lower_threshold_sees_it() -> None:
    pts = series(3, step=0.075, drift=0.0)
    assert analyze_series({"s": pts}, ORDER, 0.10)[0].steps == []
    assert [s.first_after for s in analyze_series({"s": pts}, ORDER, {"s": 0.05})[0].steps] == ["c17"]


def test_an_exact_figure_changes_at_the_first_differing_commit_without_statistics() -> None:
    pts = [Point(c, (0.0,) if i < 21 else (1.0,)) for i, c in enumerate(ORDER)]
    (r,) = analyze_series({"identity": pts}, ORDER, 0.10, exact={"identity"})
    (s,) = r.steps
    assert (s.last_before, s.first_after, s.exact, s.p_value) == ("c20", "c21", True, None)


def test_a_series_too_noisy_for_its_threshold_is_unstable_and_never_stepped() -> None:
    (r,) = analyze_series({"s": series(4, noise=0.6, reps=3)}, ORDER, 0.10)
    assert r.unstable and "hide changes under" in r.unstable and r.steps == []


def test_benjamini_hochberg_matches_the_textbook_example() -> None:
    # Benjamini & Hochberg (1995): adjusted p = min over k >= rank of p_(k) * m / k, capped at 1.
    p = [0.01, 0.04, 0.03, 0.005]
    assert benjamini_hochberg(p) == pytest.approx([0.02, 0.04, 0.04, 0.02])


def test_an_alert_on_a_figure_divided_by_classic_says_so() -> None:
    # The foreign engine's slowed commit: classic +112%, and a round's cost in classic steps about -20%:
    # an "improvement" that is only its divisor's regression.
    def found(figure: str, arm: str, before: float, after: float) -> Found:
        step = Step(f"s-{figure}-{arm}", "c01", "c02", ["c02"], before, after, after / before, 1e-4, confidence=0.999)
        return Found(step, SeriesInfo(step.series, f"bench.track_{figure}", arm, figure, "x"), 0.20)

    h = History("lab", 4, 12)
    cost = alert_markdown([found("round_cost_classic_steps", "block3", 2.3, 1.8)], h)
    assert "round_cost_classic_steps is divided by the classic (block 1) arm's ms/token" in cost
    assert "## improvement: block3 round_cost_classic_steps -21.7% at c02" in cost
    plain = alert_markdown([found("ms_per_token", "classic", 0.35, 0.74)], h)
    assert "divided by" not in plain and "To find the commit: `harness bisect c01 c02 --arm classic" in plain
