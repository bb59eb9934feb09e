"""Train the embedded MTP drafter: one decoder layer on the embedded target's hidden states,
borrowing its embedding and LM head (specdec/mtp.py).

Reproduces specdec/models/mtp (the shipped head; its training.json records that run: 110 s
of training on one GPU through MLX's CUDA build, 8,192 self-generated sequences).

Position p of the head sees the target's final hidden state H_p and the embedding of token
p+1, and learns the target's distribution for token p+2 (KL to the target plus cross-entropy,
as scripts/reproduce/train_pair.py distils the draft model). A second, chained step feeds the head its own
hidden state, as draft_block does from block 3 up. The text is the corpus mixed with the
target's own greedy continuations (what it meets at temperature 0); the linear layers train
through 4-bit fake quantization, since the engine quantizes the drafter at load.

    python scripts/reproduce/build_corpus.py --out build/corpus.npz      # once
    python scripts/reproduce/train_mtp.py --corpus build/corpus.npz --out specdec/models/mtp
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

try:
    import specdec  # noqa: F401  (preloads OpenBLAS on Linux CPU hosts, before mlx loads)
except ImportError:
    pass
import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train_pair import batches, cosine_lr, fake_quantize, target_generated  # noqa: E402

from specdec.loading import EMBEDDED_TARGET, _load  # noqa: E402
from specdec.mtp import MTPArgs, MTPHead, target_parts  # noqa: E402

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def head_args(target, ffn: int) -> MTPArgs:
    a = target.args
    return MTPArgs(hidden_size=a.hidden_size, intermediate_size=ffn, num_attention_heads=a.num_attention_heads,
                   num_key_value_heads=a.num_key_value_heads, vocab_size=a.vocab_size,
                   rms_norm_eps=a.rms_norm_eps, rope_theta=a.rope_theta)


def losses(head: MTPHead, embed, lm_head, hidden_fwd, x: mx.array, kl_weight: float, second: float):
    """x [B, S+1]: step 1 at p predicts x[p+2] from (x[p+1], H_p); step 2 predicts x[p+3] from
    (x[p+2], the head's own hidden at p)."""
    H = mx.stop_gradient(hidden_fwd(x))                          # [B, S+1, d]
    t_logp = mx.stop_gradient(nn.log_softmax(lm_head(H).astype(mx.float32), axis=-1))

    def one(h_in, tok_in, teacher, labels):
        h = head(embed(tok_in), h_in)
        s_logp = nn.log_softmax(lm_head(h).astype(mx.float32), axis=-1)
        kl = (mx.exp(teacher) * (teacher - s_logp)).sum(-1).mean()
        ce = nn.losses.cross_entropy(s_logp, labels).mean()
        return kl_weight * kl + (1 - kl_weight) * ce, h, s_logp

    l1, h1, s1 = one(H[:, :-2], x[:, 1:-1], t_logp[:, 1:-1], x[:, 2:])
    l2, _, _ = one(h1[:, :-1], x[:, 2:-1], t_logp[:, 2:-1], x[:, 3:])
    return l1 + second * l2, l1


def agreement(head: MTPHead, embed, lm_head, hidden_fwd, x: mx.array) -> tuple[float, float]:
    """Share of positions where the head's argmax equals the target's: step 1 and chained step 2."""
    H = hidden_fwd(x)
    t = lm_head(H).argmax(-1)
    h1 = head(embed(x[:, 1:-1]), H[:, :-2])
    a1 = (lm_head(h1).argmax(-1) == t[:, 1:-1]).astype(mx.float32).mean().item()
    h2 = head(embed(x[:, 2:-1]), h1[:, :-1])
    a2 = (lm_head(h2).argmax(-1) == t[:, 2:-1]).astype(mx.float32).mean().item()
    return a1, a2


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="build/corpus.npz")
    ap.add_argument("--out", type=Path, default=Path("specdec/models/mtp"))
    ap.add_argument("--seconds", type=float, default=360)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--ffn", type=int, default=512)
    ap.add_argument("--kl-weight", type=float, default=0.7)
    ap.add_argument("--second-step", type=float, default=0.5, help="weight of the chained second step's loss")
    ap.add_argument("--self-seqs", type=int, default=2048, help="target-generated sequences in the mix")
    ap.add_argument("--self-share", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--init", type=Path, default=None, help="continue from this MTP head directory's weights")
    args = ap.parse_args()

    ids = np.load(args.corpus)["ids"]
    target, _ = _load(EMBEDDED_TARGET, "target")
    target.freeze()
    embed, lm_head, hidden_fwd = target_parts(target)
    cut = int(ids.size * 0.98)
    train_ids, val_ids = ids[:cut], ids[cut:]
    t0 = time.perf_counter()
    rows = target_generated(target, train_ids, args.self_seqs, 32, args.seq + 2, batch=256) if args.self_seqs else None
    gen_s = time.perf_counter() - t0

    mx.random.seed(args.seed)
    hargs = head_args(target, args.ffn)
    head = MTPHead(hargs)
    earlier = None
    if args.init is not None:
        head.load_weights(str(args.init / "model.safetensors"), strict=True)
        prev = args.init / "training.json"
        earlier = json.loads(prev.read_text()) if prev.exists() else None
    qat = fake_quantize(head)
    opt = optim.AdamW(learning_rate=args.lr, weight_decay=0.01)

    def loss_fn(m, x):
        return losses(m, embed, lm_head, hidden_fwd, x, args.kl_weight, args.second_step)[0]

    step_fn = nn.value_and_grad(head, loss_fn)
    state = [head.state, opt.state]

    def update(x):
        loss, grads = step_fn(head, x)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        opt.update(head, grads)
        return loss

    # (not compiled: compiling this step took longer than a run of steps on a CPU)
    rng = np.random.default_rng(args.seed)
    gen = batches(train_ids, args.batch, args.seq + 1, rng, rows, args.self_share)
    t0 = time.perf_counter()
    step, tokens, hist = 0, 0, []
    while time.perf_counter() - t0 < args.seconds:
        opt.learning_rate = cosine_lr(step, (time.perf_counter() - t0) / args.seconds, args.lr)
        x, y = next(gen)
        x = mx.concatenate([x, y[:, -1:]], axis=1)   # the whole window: x[:, :S+2]
        loss = update(x)
        mx.eval(state, loss)
        hist.append(loss.item())
        step += 1
        tokens += args.batch * args.seq
        if step % 20 == 0:
            print(f"step {step} loss {np.mean(hist[-100:]):.3f} tok/s {tokens / (time.perf_counter() - t0):,.0f}",
                  flush=True)
    train_s = time.perf_counter() - t0

    vx, vy = next(batches(val_ids, 32, args.seq + 1, np.random.default_rng(123)))
    val = agreement(head, embed, lm_head, hidden_fwd, mx.concatenate([vx, vy[:, -1:]], axis=1))
    sx = None
    if rows is not None:
        sx = mx.array(rows[:32, :args.seq + 2].astype(np.int32))
    self_agree = agreement(head, embed, lm_head, hidden_fwd, sx) if sx is not None else None

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.astype(mx.float32) for k, v in tree_flatten(head.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    cfg = dict(vars(hargs))
    cfg["borrows"] = "the target's embedding and LM head (model.embed_tokens, tied)"
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    for f in TOKENIZER_FILES:   # the target's tokenizer: the head drafts the target's ids
        if (EMBEDDED_TARGET / f).exists():
            shutil.copy(EMBEDDED_TARGET / f, out / f)
    report = {"device": str(mx.default_device()), "mlx": mx.__version__, "parameters": int(sum(
        v.size for _, v in tree_flatten(head.parameters()))), "qat_linear_layers": qat,
        "self_generated": {"sequences": args.self_seqs, "seconds": round(gen_s, 1)},
        "train": {"steps": step, "tokens": tokens, "seconds": round(train_s, 1),
                  "final_loss": float(np.mean(hist[-100:]))},
        "val_top1_agreement": {"step1": val[0], "step2_chained": val[1]},
        "self_generated_top1_agreement": (None if self_agree is None else
                                          {"step1": self_agree[0], "step2_chained": self_agree[1]}),
        "args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "earlier_stages": ([earlier] if earlier and "earlier_stages" not in earlier
                           else ([{k: v for k, v in earlier.items() if k != "earlier_stages"}]
                                 + earlier["earlier_stages"]) if earlier else [])}
    (out / "training.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
