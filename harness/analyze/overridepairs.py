"""Arms that differ from another arm of the same pairing and block by exactly one environment
variable, and what that one variable did to tok/s on each prompt (the report's override table)."""

from __future__ import annotations

from dataclasses import dataclass

from harness.analyze import rounds, spoiled, stats
from harness.analyze.facts import Facts
from harness.analyze.summary import MIN_BOOTSTRAP_RUNS


@dataclass(frozen=True)
class OverridePair:
    """Arm `b` against arm `a` on one prompt, the two differing by one variable."""

    a: str                     # the arm compared against (the earlier in the suite)
    b: str                     # the arm whose tok/s is over a's
    prompt: str
    diff: str                  # the one difference, as b has it: "VAR=value", or "without VAR"
    ratio: float               # b's median decode tok/s over a's
    lo: float | None           # 95% bootstrap interval of the ratio (runs unpaired); None from
    hi: float | None           # fewer than MIN_BOOTSTRAP_RUNS runs a side, the summary's rule
    resolved: bool             # the interval excludes 1
    engines: tuple[str, str]   # a's engine, b's engine
    gate: tuple[str, str]      # a's gate outcome(s), b's
    same_tokens: bool          # the first run of each gave the same token ids


def env_diff(a: dict[str, str], b: dict[str, str]) -> list[str]:
    """Every variable set differently in b than in a: "VAR=value" (b's), or "without VAR"."""
    return [f"{k}={b[k]}" if k in b else f"without {k}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def one_override_pairs(fx: Facts) -> list[OverridePair]:
    """Each pair of arms of one pairing and block that differ by exactly one variable, on each
    prompt both ran; a profile variable's pairs are left to the profile section. The ratio is of
    median tok/s per prompt, with the bootstrap interval the summary uses, over the runs a verdict
    may use (analyze.spoiled.usable)."""
    out = []
    tps = {k: [tps for r in spoiled.usable_runs(rs) if (tps := r.decode_tokens_per_s)] for k, rs in fx.groups.items()}
    for i, a in enumerate(fx.arm_order):
        for b in fx.arm_order[i + 1:]:
            ea, eb = fx.arms[a], fx.arms[b]
            if (ea.pairing, ea.block) != (eb.pairing, eb.block):
                continue
            diff = env_diff(ea.env, eb.env)
            pvars = {v for v in (rounds.profile_var(fx.record, a), rounds.profile_var(fx.record, b)) if v is not None}
            if len(diff) != 1 or any(v in diff[0] for v in pvars):
                continue
            for p in fx.prompts:
                xa, xb = tps.get((a, p)), tps.get((b, p))
                if not xa or not xb:
                    continue
                ratio, lo, hi = stats.bootstrap_ratio_ci(xb, xa)
                few = min(len(xa), len(xb)) < MIN_BOOTSTRAP_RUNS
                ga, gb = fx.groups[(a, p)][0], fx.groups[(b, p)][0]
                out.append(OverridePair(
                    a=a, b=b, prompt=p, diff=diff[0], ratio=ratio,
                    lo=None if few else lo, hi=None if few else hi,
                    resolved=not few and (lo > 1 or hi < 1),
                    engines=(ea.engine, eb.engine), gate=(fx.outcome(a), fx.outcome(b)),
                    same_tokens=ga.token_ids is not None and ga.token_ids == gb.token_ids))
    return out
