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

from harness.ci import asvsession as _s


class _Figures:
    """Shared by every class below: the same setup_cache function (one session per commit)."""

    setup_cache = staticmethod(_s.run_session)
    timeout = 120


class Decode(_Figures):
    """Every arm: decode cost per token, and byte identity with the arm's own baseline."""

    params = [_s.LABELS]
    param_names = ["arm"]

    def track_ms_per_token(self, cache, arm):
        """Decode wall time per generated token, prefill excluded (one sample per run)."""
        return _s.samples_for(cache, "ms_per_token", arm)

    track_ms_per_token.unit = "ms/token"
    track_ms_per_token.version = _s.figure_version("ms_per_token", _s.SUITE)

    def track_identity_mismatches(self, cache, arm):
        """1 for a run whose output differs from the arm's own baseline, else 0."""
        return _s.samples_for(cache, "identity_mismatches", arm)

    track_identity_mismatches.unit = "mismatches/run"
    track_identity_mismatches.version = _s.figure_version("identity_mismatches", _s.SUITE)

    def track_memory_mib(self, cache, arm):
        """Device memory the arm needs at its peak: the weights its generation used plus what the
        generation added over the resident part (harness.analyze.memory; one sample per run)."""
        return _s.samples_for(cache, "memory_mib", arm)

    track_memory_mib.unit = "MiB"
    track_memory_mib.version = _s.figure_version("memory_mib", _s.SUITE)


class Rounds(_Figures):
    """Speculative arms: the round, what it costs, and how much of the draft is thrown away."""

    params = [_s.SPEC_LABELS]
    param_names = ["arm"]

    def track_ms_per_round(self, cache, arm):
        """Decode wall time per round (draft, verify, accept, finalize, residual)."""
        return _s.samples_for(cache, "ms_per_round", arm)

    track_ms_per_round.unit = "ms/round"
    track_ms_per_round.version = _s.figure_version("ms_per_round", _s.SUITE)

    def track_rejection_rate(self, cache, arm):
        """1 - acceptance rate: rejected draft tokens / proposed draft tokens."""
        return _s.samples_for(cache, "rejection_rate", arm)

    track_rejection_rate.unit = "rejected/proposed"
    track_rejection_rate.version = _s.figure_version("rejection_rate", _s.SUITE)

    def track_round_cost_classic_steps(self, cache, arm):
        """One round's wall time in classic decode steps of the same repetition."""
        return _s.samples_for(cache, "round_cost_classic_steps", arm)

    track_round_cost_classic_steps.unit = "classic steps/round"
    track_round_cost_classic_steps.version = _s.figure_version("round_cost_classic_steps", _s.SUITE)


class Phases(_Figures):
    """Speculative arms: each round phase's wall time per round."""

    params = [_s.SPEC_LABELS, list(_s.PHASES)]
    param_names = ["arm", "phase"]

    def track_phase_ms_per_round(self, cache, arm, phase):
        """Time in one phase per round (default timing: clock read at the algorithm's syncs)."""
        return _s.samples_for(cache, "phase_ms_per_round", f"{arm}|{phase}")

    track_phase_ms_per_round.unit = "ms/round"
    track_phase_ms_per_round.version = _s.figure_version("phase_ms_per_round", _s.SUITE)


# What `import *` gives asv to discover: a suite without speculative arms has no rounds, and
# asv rejects a parameterized benchmark with an empty parameter list.
__all__ = ["Decode", *(["Rounds", "Phases"] if _s.SPEC_LABELS else [])]
