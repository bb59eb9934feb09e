"""Train the embedded target and distil its drafter on the corpus from build_corpus.py.

The target is a small Llama trained on the Python standard library's source; the drafter is
a smaller Llama trained on the same text against the target's own next-token distribution
(KL to the target plus cross-entropy), which is what makes its proposals accepted. Runs on
any MLX device; on a GPU the defaults take a few minutes, on a 2-core CPU hours.

    python scripts/reproduce/train_pair.py --corpus build/corpus.npz --out specdec/models
"""
from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import asdict
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
from mlx_lm.models.llama import Model, ModelArgs

from specdec.loading import QUANT_BITS, QUANT_GROUP


def target_args(vocab: int) -> ModelArgs:
    return ModelArgs(model_type="llama", hidden_size=192, num_hidden_layers=6, intermediate_size=512,
                     num_attention_heads=6, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=vocab,
                     rope_theta=10000.0, tie_word_embeddings=True, max_position_embeddings=2048)


def drafter_args(vocab: int, hidden: int = 128, layers: int = 2, ffn: int = 384) -> ModelArgs:
    return ModelArgs(model_type="llama", hidden_size=hidden, num_hidden_layers=layers, intermediate_size=ffn,
                     num_attention_heads=hidden // 32, num_key_value_heads=2, rms_norm_eps=1e-5, vocab_size=vocab,
                     rope_theta=10000.0, tie_word_embeddings=True, max_position_embeddings=2048)


def batches(ids: np.ndarray, batch: int, seq: int, rng: np.random.Generator, rows: np.ndarray | None = None,
            self_share: float = 0.5):
    """Random corpus windows; with `rows` (target-generated sequences), `self_share` of each batch from them."""
    while True:
        n_rows = int(round(batch * self_share)) if rows is not None else 0
        starts = rng.integers(0, ids.size - seq - 1, size=batch - n_rows)
        x = [ids[s:s + seq + 1] for s in starts]
        if n_rows:
            x += [rows[i, :seq + 1] for i in rng.integers(0, rows.shape[0], size=n_rows)]
        x = np.stack(x).astype(np.int32)
        yield mx.array(x[:, :-1]), mx.array(x[:, 1:])


def target_generated(target: Model, ids: np.ndarray, n_seqs: int, prompt_len: int, total_len: int,
                     batch: int = 512, seed: int = 2) -> np.ndarray:
    """Greedy continuations by the target of random corpus windows: the text the drafter will
    face at temperature 0, so distilling on it raises acceptance where it is measured."""
    from mlx_lm.models.cache import make_prompt_cache
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(max(1, n_seqs // batch)):
        starts = rng.integers(0, ids.size - prompt_len, size=batch)
        x = mx.array(np.stack([ids[s:s + prompt_len] for s in starts]).astype(np.int32))
        cache = make_prompt_cache(target)
        y = mx.argmax(target(x, cache=cache)[:, -1, :], axis=-1)
        gen = [y]
        for i in range(total_len - prompt_len - 1):
            y = mx.argmax(target(y[:, None], cache=cache)[:, -1, :], axis=-1)
            gen.append(y)
            if i % 32 == 0:
                mx.eval(gen)
        mx.eval(gen)
        out.append(np.concatenate([np.array(x), np.stack([np.array(g) for g in gen], axis=1)], axis=1))
    return np.concatenate(out).astype(np.uint16)


class FakeQuantLinear(nn.Linear):
    """A linear layer that computes with its weight rounded as the engine quantizes the drafter at
    load (4-bit affine, group 64), passing gradients straight through to the dense weight. Same
    parameter names as nn.Linear, so the checkpoint stays a plain dense one."""

    def __call__(self, x: mx.array) -> mx.array:
        w = self.weight
        wq = mx.dequantize(*mx.quantize(w, group_size=QUANT_GROUP, bits=QUANT_BITS),
                           group_size=QUANT_GROUP, bits=QUANT_BITS)
        y = x @ (w + mx.stop_gradient(wq - w)).T
        return y + self.bias if "bias" in self else y


def fake_quantize(model: nn.Module) -> int:
    """Swap every linear layer the engine would quantize for a FakeQuantLinear; returns how many."""
    count = 0
    for _, module in model.named_modules():
        for name, child in list(module.children().items()):
            if type(child) is nn.Linear and child.weight.shape[-1] % QUANT_GROUP == 0:
                q = FakeQuantLinear(1, 1, bias="bias" in child)
                q.update(child.parameters())
                setattr(module, name, q)
                count += 1
    return count


def cosine_lr(step: int, frac: float, peak: float, warmup: int = 100) -> float:
    # The budget is wall time, so the schedule follows the elapsed fraction of it.
    if step < warmup:
        return peak * (step + 1) / warmup
    return 0.1 * peak + 0.9 * peak * 0.5 * (1 + math.cos(math.pi * min(1.0, frac)))


def train(model: Model, ids: np.ndarray, seconds: float, batch: int, seq: int, peak_lr: float,
          teacher: Model | None = None, kl_weight: float = 0.7, seed: int = 0,
          rows: np.ndarray | None = None, self_share: float = 0.5) -> dict:
    rng = np.random.default_rng(seed)
    opt = optim.AdamW(learning_rate=peak_lr, weight_decay=0.01)

    def loss_fn(m, x, y):
        logits = m(x).astype(mx.float32)
        ce = nn.losses.cross_entropy(logits, y).mean()
        if teacher is None:
            return ce
        t_logp = mx.stop_gradient(nn.log_softmax(teacher(x).astype(mx.float32), axis=-1))
        s_logp = nn.log_softmax(logits, axis=-1)
        kl = (mx.exp(t_logp) * (t_logp - s_logp)).sum(-1).mean()
        return kl_weight * kl + (1 - kl_weight) * ce

    step_fn = nn.value_and_grad(model, loss_fn)
    state = [model.state, opt.state]

    def step_update(x, y):
        loss, grads = step_fn(model, x, y)
        grads, _ = optim.clip_grad_norm(grads, 1.0)
        opt.update(model, grads)
        return loss

    # The model and optimizer state are declared so the compiled step may update them.
    update = mx.compile(step_update, inputs=state, outputs=state)
    gen = batches(ids, batch, seq, rng, rows, self_share)
    t0 = time.perf_counter()
    step, tokens, losses = 0, 0, []
    while time.perf_counter() - t0 < seconds:
        opt.learning_rate = cosine_lr(step, (time.perf_counter() - t0) / seconds, peak_lr)
        x, y = next(gen)
        loss = update(x, y)
        mx.eval(state, loss)
        losses.append(loss.item())
        step += 1
        tokens += batch * seq
        if step % 200 == 0:
            el = time.perf_counter() - t0
            print(f"step {step} loss {np.mean(losses[-200:]):.3f} tok/s {tokens / el:,.0f}", flush=True)
    return {"steps": step, "tokens": tokens, "seconds": round(time.perf_counter() - t0, 1),
            "final_loss": float(np.mean(losses[-100:]))}


def eval_loss(model: Model, ids: np.ndarray, seq: int = 256, n: int = 32) -> float:
    rng = np.random.default_rng(123)
    x, y = next(batches(ids, n, seq, rng))
    return nn.losses.cross_entropy(model(x).astype(mx.float32), y).mean().item()


def agreement(target: Model, drafter: Model, ids: np.ndarray, seq: int = 256, n: int = 32) -> float:
    """Share of positions where the drafter's argmax equals the target's: a proxy for per-step acceptance."""
    rng = np.random.default_rng(7)
    x, _ = next(batches(ids, n, seq, rng))
    return (target(x).argmax(-1) == drafter(x).argmax(-1)).astype(mx.float32).mean().item()


def save(model: Model, args: ModelArgs, out: Path, meta: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    weights = {k: v.astype(mx.float32) for k, v in tree_flatten(model.parameters())}
    mx.save_safetensors(str(out / "model.safetensors"), weights, metadata={"format": "mlx"})
    cfg = {k: v for k, v in asdict(args).items() if v is not None}
    cfg.update({"architectures": ["LlamaForCausalLM"], "torch_dtype": "float32",
                "eos_token_id": meta["eos_id"], "bos_token_id": None})
    (out / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default="build/corpus.npz")
    ap.add_argument("--out", default="specdec/models")
    ap.add_argument("--target-seconds", type=float, default=240)
    ap.add_argument("--drafter-seconds", type=float, default=180)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--stage", choices=["all", "drafter"], default="all",
                    help="drafter: keep the target already in --out, retrain only the drafter")
    ap.add_argument("--init-drafter", action="store_true",
                    help="start from the drafter already in --out (fine-tuning) instead of fresh weights")
    ap.add_argument("--drafter-lr", type=float, default=3e-3)
    ap.add_argument("--self-share", type=float, default=0.5,
                    help="share of each drafter batch drawn from target-generated sequences")
    ap.add_argument("--self-seqs", type=int, default=8192,
                    help="target-generated sequences mixed into the drafter's batches (0: corpus only)")
    ap.add_argument("--self-rows", type=Path, default=None,
                    help="cache of the target-generated sequences (.npy): read when it exists, else written")
    ap.add_argument("--self-seed", type=int, default=2,
                    help="seed of the corpus windows the target continues (a new seed gives new rows)")
    ap.add_argument("--kl-weight", type=float, default=0.7,
                    help="weight of KL to the target in the drafter's loss; 0 skips the teacher forward "
                         "(cross-entropy only: on target-generated rows that is matching the target's argmax)")
    ap.add_argument("--rows-only", action="store_true",
                    help="only generate the --self-rows cache, then stop (to share it between runs)")
    ap.add_argument("--drafter-hidden", type=int, default=128)
    ap.add_argument("--drafter-layers", type=int, default=2)
    ap.add_argument("--drafter-ffn", type=int, default=384)
    ap.add_argument("--qat", action="store_true",
                    help="train the drafter through the 4-bit g64 rounding it will run with (straight-through)")
    args = ap.parse_args()
    data = np.load(args.corpus)
    ids, vocab, eos_id = data["ids"], int(data["vocab_size"]), int(data["eos_id"])
    split = int(ids.size * 0.98)
    train_ids, val_ids = ids[:split], ids[split:]
    mx.random.seed(0)
    report: dict = {"device": str(mx.default_device()), "mlx": mx.__version__, "corpus_tokens": int(ids.size)}

    targs = target_args(vocab)
    target = Model(targs)
    report["target_params"] = sum(v.size for _, v in tree_flatten(target.parameters()))
    if args.stage == "all":
        report["target_train"] = train(target, train_ids, args.target_seconds, args.batch, args.seq, 2e-3)
        save(target, targs, Path(args.out) / "target", {"eos_id": eos_id})
    else:
        target.load_weights(str(Path(args.out) / "target" / "model.safetensors"))
        previous = Path(args.out) / "training.json"
        if previous.exists():
            before = json.loads(previous.read_text())
            report["target_train"] = before.get("target_train")
            if args.init_drafter:  # fine-tuning: keep the history of the weights it starts from
                report["drafter_earlier_stages"] = before.get("drafter_earlier_stages", []) + [
                    {k: before.get(k) for k in ("device", "drafter_train", "self_generated", "val_top1_agreement",
                                                "self_generated_top1_agreement")}]
    report["target_val_loss"] = eval_loss(target, val_ids)
    target.eval()
    rows = None
    if args.self_rows and args.self_rows.exists():
        rows = np.load(args.self_rows)
        report["self_generated"] = {"sequences": int(rows.shape[0]), "tokens": int(rows.size),
                                    "prompt_len": 32, "from": args.self_rows.name}
    elif args.self_seqs:
        t0 = time.perf_counter()
        rows = target_generated(target, train_ids, args.self_seqs, 32, args.seq + 1,
                                batch=min(2048, args.self_seqs), seed=args.self_seed)
        if args.self_rows:
            args.self_rows.parent.mkdir(parents=True, exist_ok=True)
            np.save(args.self_rows, rows)
        report["self_generated"] = {"sequences": int(rows.shape[0]), "tokens": int(rows.size),
                                    "seconds": round(time.perf_counter() - t0, 1), "prompt_len": 32,
                                    "seed": args.self_seed}
    if args.rows_only:
        print(json.dumps(report.get("self_generated")))
        return

    dargs = drafter_args(vocab, args.drafter_hidden, args.drafter_layers, args.drafter_ffn)
    drafter = Model(dargs)
    if args.init_drafter:
        drafter.load_weights(str(Path(args.out) / "drafter" / "model.safetensors"))
    if args.qat:
        report["drafter_qat_linear_layers"] = fake_quantize(drafter)
    report["drafter_params"] = sum(v.size for _, v in tree_flatten(drafter.parameters()))
    target.freeze()
    report["drafter_train"] = train(drafter, train_ids, args.drafter_seconds, args.batch, args.seq, args.drafter_lr,
                                    teacher=target if args.kl_weight > 0 else None, kl_weight=args.kl_weight,
                                    seed=1, rows=rows, self_share=args.self_share)
    report["drafter_train"].update(init="previous drafter" if args.init_drafter else "fresh",
                                   lr=args.drafter_lr, self_share=args.self_share if rows is not None else 0.0,
                                   qat=args.qat, kl_weight=args.kl_weight)
    report["drafter_val_loss"] = eval_loss(drafter, val_ids)
    report["val_top1_agreement"] = agreement(target, drafter, val_ids)
    if rows is not None:
        report["self_generated_top1_agreement"] = agreement(target, drafter, rows[-64:].reshape(-1).astype(np.int64))
    save(drafter, dargs, Path(args.out) / "drafter", {"eos_id": eos_id})
    Path(args.out, "training.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report))


if __name__ == "__main__":
    main()
