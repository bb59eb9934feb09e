"""Per-step acceptance of a pair on one prompt category: the embedded pair's quality goal.

Temperature 0, every prompt of the category, pooled as the harness pools it (accepted drafts
over positions tested up to and including each round's first miss), with a Wilson 95% interval,
for the drafter quantized as the engine runs it by default and dense. The exactness gate is
overridden (SPECDEC_ALLOW_INEXACT=1) because acceptance, not byte identity, is measured here.

    python scripts/studies/acceptance.py                      # embedded pair, code, block 3, 128 tokens
    python scripts/studies/acceptance.py --draft-model DIR --category prose --json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from harness.analyze.stats import wilson_ci
from specdec.engine import generate
from specdec.errors import SpecdecError
from specdec.loading import load_pair
from specdec.prompts import CATEGORIES, load_prompts


def pooled(pair, category: str, block: int, max_tokens: int) -> dict:
    accepted = tested = 0
    per_prompt = {}
    for name, text in load_prompts(category):
        d = generate(pair, text, block=block, max_tokens=max_tokens, ignore_eos=True).diagnostics
        accepted, tested = accepted + d.accepted, tested + d.per_step_tested
        per_prompt[name] = round(d.per_step_acceptance or 0.0, 3)
    lo, hi = wilson_ci(accepted, tested)
    return {"per_step_acceptance": accepted / tested, "ci95_wilson": [lo, hi], "accepted": accepted,
            "tested": tested, "per_prompt": per_prompt}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", type=Path, default=None, help="target directory (default: embedded)")
    ap.add_argument("--draft-model", type=Path, default=None, help="drafter directory (default: embedded)")
    ap.add_argument("--category", choices=CATEGORIES, default="code")
    ap.add_argument("--block", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--json", action="store_true", help="one JSON line instead of the table")
    args = ap.parse_args()
    os.environ["SPECDEC_ALLOW_INEXACT"] = "1"
    result = {"category": args.category, "block": args.block, "max_tokens": args.max_tokens, "temp": 0.0}
    for label, quantize in (("quantized_4bit_g64", True), ("dense", False)):
        try:
            pair = load_pair(args.model, args.draft_model, quantize_drafter_=quantize)
        except SpecdecError as e:
            print(f"acceptance: {e}", file=sys.stderr)
            raise SystemExit(2) from None
        result[label] = pooled(pair, args.category, args.block, args.max_tokens)
    if args.json:
        print(json.dumps(result))
        return
    print(f"per-step acceptance, {args.category} prompts, block {args.block}, temp 0, {args.max_tokens} tokens each")
    for label in ("quantized_4bit_g64", "dense"):
        r = result[label]
        lo, hi = r["ci95_wilson"]
        print(f"  drafter {label:<18} {r['per_step_acceptance']:.3f}  (95% Wilson {lo:.3f}-{hi:.3f}, "
              f"{r['accepted']}/{r['tested']})  per prompt: {r['per_prompt']}")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
