"""python -m specdec generate | info | scaling"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import specdec  # noqa: F401  (BLAS preload before mlx)
from specdec.errors import SpecdecError


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line and exit 2, like every other bad input
        print(f"specdec: {message} (see python -m specdec {self.prog.split()[-1]} --help)", file=sys.stderr)
        raise SystemExit(2)


def _parser() -> argparse.ArgumentParser:
    ap = _Parser(prog="specdec", description="Instrumented MLX speculative decoding.")
    sub = ap.add_subparsers(dest="command", required=True, parser_class=_Parser)
    g = sub.add_parser("generate", help="decode a prompt, classic or speculative")
    g.add_argument("--model", help="target mlx-lm model directory (default: the embedded target)")
    g.add_argument("--draft-model", help="drafter directory (default with no --model: the embedded drafter)")
    g.add_argument("--block", type=int, default=3, help="block size K: K-1 drafted tokens per round; 1 is classic")
    g.add_argument("--max-tokens", type=int, default=128)
    g.add_argument("--temp", type=float, default=0.0, help="0 is greedy and exact-match")
    g.add_argument("--seed", type=int, default=0)
    g.add_argument("--ignore-eos", action="store_true", help="fixed-length output for benchmarks")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--prompt", help="prompt text")
    src.add_argument("--prompt-file", help="file holding the prompt")
    g.add_argument("--json", action="store_true", help="end with one JSON line: text, ids, diagnostics, gate, overrides")
    sub.add_parser("info", help="the embedded pair's paths, parameter counts and sizes, as JSON")
    s = sub.add_parser("scaling", help="verify-forward cost at T = 1, 2, 3, 4, 8 after a context")
    s.add_argument("--model", help="target directory (default: the embedded target)")
    s.add_argument("--context", type=int, default=512)
    s.add_argument("--repeats", type=int, default=7)
    return ap


def _prompt(args) -> str:
    if args.prompt_file:
        path = Path(args.prompt_file)
        if not path.is_file():
            raise SpecdecError(f"prompt file {path} does not exist")
        text = path.read_text(encoding="utf-8", errors="replace")
    elif args.prompt is not None:
        text = args.prompt
    else:
        from specdec.prompts import load_prompts
        text = load_prompts("code")[0][1]
    if not text.strip():
        raise SpecdecError("the prompt is empty: give --prompt TEXT or a --prompt-file with text in it")
    return text


def _generate(args) -> int:
    from specdec.engine import generate
    from specdec.loading import load_pair
    if args.block < 1:
        raise SpecdecError(f"--block must be at least 1 (got {args.block}); 1 is classic decode")
    if args.max_tokens < 1:
        raise SpecdecError(f"--max-tokens must be at least 1 (got {args.max_tokens})")
    prompt = _prompt(args)
    pair = load_pair(args.model, args.draft_model, with_drafter=args.block > 1)
    result = generate(pair, prompt, block=args.block, max_tokens=args.max_tokens, temp=args.temp,
                      seed=args.seed, ignore_eos=args.ignore_eos)
    if result.gate.outcome in ("declined", "overridden"):
        print(f"specdec: {result.gate.message}", file=sys.stderr)
    print(result.text)
    if args.json:
        print(json.dumps(result.to_dict()))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "generate":
            return _generate(args)
        if args.command == "info":
            from specdec.loading import embedded_info
            print(json.dumps(embedded_info(), indent=2))
            return 0
        if args.command == "scaling":
            from specdec.loading import load_pair
            from specdec.scaling import verify_forward_cost_scaling
            pair = load_pair(args.model, with_drafter=False)
            print(json.dumps(verify_forward_cost_scaling(pair.target, args.context, repeats=args.repeats)))
            return 0
    except SpecdecError as exc:
        print(f"specdec: {exc}", file=sys.stderr)
        return 2
    return 2
