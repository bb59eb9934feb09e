"""What a record's outputs say, for the report's identity and acceptance sections: each
speculative arm's first run against a classic run of its target, and acceptance per arm and
paired between arms of one pairing and block."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from harness.analyze import acceptance as acc
from harness.analyze.facts import Facts
from harness.analyze.identity import Comparison, Reference, compare_output
from harness.core.schema import Identity, Run


@dataclass(frozen=True)
class ClassicCheck:
    """An arm's first run against a classic run on the same prompt, where the summary gave no
    comparison (classic is then no reference: information only)."""

    classic_arm: str           # the classic arm of the same pairing, else of the same target model
    result: Comparison         # compare_output's
    engaged: bool              # speculation engaged on this prompt (else the arm decoded classic)
    gate_passed: bool          # some run's gate passed by itself


def first_differing(fx: Facts, arm: str, prompt: str) -> Identity | None:
    """The identity of the arm's first run on the prompt that differs from its own baseline."""
    for r in fx.groups.get((arm, prompt), []):
        if r.identity is not None and r.identity.status == "differs":
            return r.identity
    return None


def classic_checks(fx: Facts) -> dict[tuple[str, str], ClassicCheck]:
    """(arm, prompt) -> its check against classic, for each speculative row with runs, a classic
    run to compare with and no comparison from the summary."""
    # A classic arm of the same pairing, else one on the same target model (an MTP pairing and a
    # draft-model pairing share their target; its classic decode is the same reference).
    target = {p.name: p.target for p in fx.suite.pairings}
    classic: dict[tuple[str, str], tuple[str, Run]] = {}
    by_target: dict[tuple[Any, str], tuple[str, Run]] = {}
    for (arm, prompt), rs in fx.groups.items():
        if fx.arms[arm].block == 1 and rs:
            classic.setdefault((fx.arms[arm].pairing, prompt), (arm, rs[0]))
            by_target.setdefault((target.get(fx.arms[arm].pairing), prompt), (arm, rs[0]))
    out = {}
    for s in fx.rows:
        rs = fx.groups.get((s.arm, s.prompt), [])
        ref = classic.get((s.pairing, s.prompt)) or by_target.get((target.get(s.pairing), s.prompt))
        if s.block == 1 or s.vs_classic or ref is None or not rs:
            continue
        d = compare_output(rs[0].token_ids, rs[0].text, Reference.of_run(ref[1]))
        out[(s.arm, s.prompt)] = ClassicCheck(ref[0], d, fx.engaged(s.arm, s.prompt), "passed" in fx.outcome(s.arm))
    return out


@dataclass(frozen=True)
class Acceptance:
    """Acceptance of the arms that speculated, from one measured run per arm and prompt (the first)."""

    unpaired: list[acc.Unpaired]    # per arm, in the suite's order
    paired: list[acc.PairedAB]      # arms of one pairing and block whose text is identical
    not_paired: list[str]           # "a / b": such arms whose text differs (rounds cannot be matched)
    disagree: list[str]             # arms whose repetitions gave different output on some prompt


def acceptance(fx: Facts) -> Acceptance:
    spec = [a for a in fx.arm_order if fx.arms[a].block > 1 and fx.engaged(a)]
    # A profile-mode arm decodes its twin's tokens; pairing it would only restate that.
    paired_arms = [a for a in spec if not fx.profiled(a)]
    by_arm = {a: acc.first_runs({p: fx.groups.get((a, p), []) for p in fx.prompts}) for a in spec}
    pairs, not_paired = [], []
    for i, a in enumerate(paired_arms):
        for b in paired_arms[i + 1:]:
            ea, eb = fx.arms[a], fx.arms[b]
            if (ea.pairing, ea.block) != (eb.pairing, eb.block):
                continue
            if acc.identical_text(by_arm[a], by_arm[b]):
                pairs.append(acc.paired(a, by_arm[a], b, by_arm[b]))
            else:
                not_paired.append(f"{a} / {b}")
    disagree = [a for a in spec for p in fx.prompts if len(fx.groups.get((a, p), [])) > 1
                and not acc.repetitions_agree(fx.groups[(a, p)])]
    return Acceptance([acc.unpaired(a, by_arm[a]) for a in spec], pairs, not_paired, sorted(set(disagree)))
