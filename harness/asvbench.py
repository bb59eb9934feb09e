"""The asv benchmarks: figures per arm, all from the commit's one harness session
(harness.ci.asvsession.run_session). A repository's benchmarks/ holds only
`from harness.asvbench import *`; asv names each benchmark after that module
(benchmarks/bench_engine.py: "bench_engine.Decode.track_ms_per_token").

Every figure is lower-is-better, as asv assumes: ms per token rather than tokens/s,
rejection rate (1 - acceptance) rather than acceptance. An arm that runs under an override
carries it in its name ("block3-inexact [not shipping: ENGINE_ALLOW_INEXACT]").
A figure that does not apply to an arm (rounds of classic decode) is skipped, not failed;
an arm whose runs failed on a commit fails every figure on that commit.
"""

from collections.abc import Callable
from typing import Any, TypeVar

from harness.ci import asvsession as _s

_F = TypeVar("_F", bound=Callable[..., object])


def _figure(unit: str, figure: str) -> Callable[[_F], _F]:
    """Give a benchmark method the attributes asv reads: its unit, and a version that changes
    when the figure's meaning does (so asv does not join old and new samples)."""
    def mark(fn: _F) -> _F:
        vars(fn).update(unit=unit, version=_s.figure_version(figure, _s.SUITE))
        return fn
    return mark


class _Figures:
    """Shared by every class below: the same setup_cache function (one session per commit)."""

    setup_cache = staticmethod(_s.run_session)
    timeout = 120


class Decode(_Figures):
    """Every arm: decode cost per token, and byte identity with the arm's own baseline."""

    params = [_s.LABELS]
    param_names = ["arm"]

    @_figure("ms/token", "ms_per_token")
    def track_ms_per_token(self, cache: _s.SessionFigures, arm: str) -> dict[str, Any]:
        """Decode wall time per generated token, prefill excluded (one sample per run)."""
        return _s.samples_for(cache, "ms_per_token", arm)

    @_figure("mismatches/run", "identity_mismatches")
    def track_identity_mismatches(self, cache: _s.SessionFigures, arm: str) -> dict[str, Any]:
        """1 for a run whose output differs from the arm's own baseline, else 0."""
        return _s.samples_for(cache, "identity_mismatches", arm)

    @_figure("MiB", "memory_mib")
    def track_memory_mib(self, cache: _s.SessionFigures, arm: str) -> dict[str, Any]:
        """Device memory the arm needs at its peak: the weights its generation used plus what the
        generation added over the resident part (harness.analyze.memory; one sample per run)."""
        return _s.samples_for(cache, "memory_mib", arm)


class Rounds(_Figures):
    """Speculative arms: the round, what it costs, and how much of the draft is thrown away."""

    params = [_s.SPEC_LABELS]
    param_names = ["arm"]

    @_figure("ms/round", "ms_per_round")
    def track_ms_per_round(self, cache: _s.SessionFigures, arm: str) -> dict[str, Any]:
        """Decode wall time per round (draft, verify, accept, finalize, residual)."""
        return _s.samples_for(cache, "ms_per_round", arm)

    @_figure("rejected/proposed", "rejection_rate")
    def track_rejection_rate(self, cache: _s.SessionFigures, arm: str) -> dict[str, Any]:
        """1 - acceptance rate: rejected draft tokens / proposed draft tokens."""
        return _s.samples_for(cache, "rejection_rate", arm)

    @_figure("classic steps/round", "round_cost_classic_steps")
    def track_round_cost_classic_steps(self, cache: _s.SessionFigures, arm: str) -> dict[str, Any]:
        """One round's wall time in classic decode steps of the same repetition."""
        return _s.samples_for(cache, "round_cost_classic_steps", arm)


class Phases(_Figures):
    """Speculative arms: each round phase's wall time per round."""

    params = [_s.SPEC_LABELS, list(_s.PHASES)]
    param_names = ["arm", "phase"]

    @_figure("ms/round", "phase_ms_per_round")
    def track_phase_ms_per_round(self, cache: _s.SessionFigures, arm: str, phase: str) -> dict[str, Any]:
        """Time in one phase per round (default timing: clock read at the algorithm's syncs)."""
        return _s.samples_for(cache, "phase_ms_per_round", f"{arm}|{phase}")


class Counters(_Figures):
    """Every arm: each work counter its engine reports, per round (classic decode: per token)."""

    params = [_s.LABELS, list(_s.COUNTERS)]
    param_names = ["arm", "counter"]

    @_figure("count/round", "counter_per_round")
    def track_counter_per_round(self, cache: _s.SessionFigures, arm: str, counter: str) -> dict[str, Any]:
        """Host syncs, target or drafter forwards, or the engine's own counter, per round."""
        return _s.samples_for(cache, "counter_per_round", f"{arm}|{counter}")


# What `import *` gives asv to discover: a suite without speculative arms has no rounds, and
# asv rejects a parameterized benchmark with an empty parameter list.
__all__ = ["Decode", "Counters", *(["Rounds", "Phases"] if _s.SPEC_LABELS else [])]
