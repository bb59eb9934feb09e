"""Acceptance A/B between two arms: unpaired per-step rates, and paired rounds on identical text.

Two arms that produced byte-identical output can be paired round by round: a round is
matched by the generated-text offset it starts at (rounds_log "offset"), which removes the
between-prompt variance an unpaired comparison carries. Repetitions at temperature 0 repeat
the same tokens, so they are not independent trials: every figure here uses one measured run
per arm and prompt (the first), and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.analyze import stats
from harness.core.schema import RoundEntry, Run


def first_runs(runs_by_prompt: dict[str, list[Run]]) -> dict[str, Run]:
    return {p: rs[0] for p, rs in runs_by_prompt.items() if rs}


def repetitions_agree(runs: list[Run]) -> bool:
    ids = [r.token_ids for r in runs]
    return all(x is not None and x == ids[0] for x in ids)


@dataclass
class Unpaired:
    arm: str
    rounds: int
    trials: int          # positions tested up to and including the first miss
    accepted: int
    p: float | None
    ci: tuple[float, float] | None    # Wilson, 95%


def unpaired(arm: str, runs: dict[str, Run]) -> Unpaired:
    diags = [r.diagnostics for r in runs.values()]
    rounds = sum(d.rounds or 0 for d in diags)
    trials = sum(d.per_step_tested or 0 for d in diags)
    acc = sum(d.accepted or 0 for d in diags)
    if not trials:
        return Unpaired(arm, rounds, 0, acc, None, None)
    return Unpaired(arm, rounds, trials, acc, acc / trials, stats.wilson_ci(min(acc, trials), trials))


@dataclass
class PairedAB:
    a: str
    b: str
    prompts: list[str]
    rounds_a: int
    rounds_b: int
    matched: int
    same_proposal: int | None        # None: an engine that logs no drafted ids
    differ: int                      # matched rounds whose accept counts differ
    a_more: int
    b_more: int
    accepted_a: int                  # over matched rounds
    accepted_b: int

    @property
    def sign_p(self) -> float | None:
        return stats.sign_test(self.a_more, self.b_more) if self.differ else None

    @property
    def change(self) -> float | None:
        """Total accepted over matched rounds, b relative to a."""
        return self.accepted_b / self.accepted_a - 1.0 if self.accepted_a else None


def _log(run: Run) -> dict[int, RoundEntry]:
    return {e.offset: e for e in run.diagnostics.rounds_log or []}


def paired(a: str, runs_a: dict[str, Run], b: str, runs_b: dict[str, Run]) -> PairedAB:
    """Match rounds on the prompts both arms ran; the caller checks that the text is identical."""
    prompts = [p for p in runs_a if p in runs_b]
    res = PairedAB(a, b, prompts, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    have_drafts = True
    for p in prompts:
        la, lb = _log(runs_a[p]), _log(runs_b[p])
        res.rounds_a += len(la)
        res.rounds_b += len(lb)
        for off in sorted(set(la) & set(lb)):
            ea, eb = la[off], lb[off]
            res.matched += 1
            na, nb = ea.accepted, eb.accepted
            res.accepted_a += na
            res.accepted_b += nb
            if ea.drafted is not None and eb.drafted is not None:
                res.same_proposal = (res.same_proposal or 0) + (ea.drafted == eb.drafted)
            else:
                have_drafts = False
            if na != nb:
                res.differ += 1
                res.a_more += na > nb
                res.b_more += nb > na
    if not have_drafts:
        res.same_proposal = None
    elif res.same_proposal is None:
        res.same_proposal = 0
    return res


def identical_text(runs_a: dict[str, Run], runs_b: dict[str, Run]) -> bool:
    common = [p for p in runs_a if p in runs_b]
    return bool(common) and all(
        runs_a[p].token_ids is not None and runs_a[p].token_ids == runs_b[p].token_ids for p in common)
