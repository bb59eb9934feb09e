"""Build the embedded pair's corpus and tokenizer from the Python standard library.

Every machine with CPython has this text, so the pair can be rebuilt offline. The corpus is
the stdlib's own .py files (test suites excluded), in sorted path order, so the same Python
version gives the same bytes. Writes tokenizer files into both model directories and the
token ids as a compressed .npz for the trainer.

    python scripts/reproduce/build_corpus.py --out build/corpus.npz
"""
from __future__ import annotations

import argparse
import json
import sys
import sysconfig
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

VOCAB_SIZE = 1024
EOS = "<|endoftext|>"
SKIP_PARTS = {"test", "tests", "idle_test", "site-packages", "__pycache__", "lib2to3"}


def stdlib_files() -> list[Path]:
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in root.rglob("*.py") if not SKIP_PARTS.intersection(p.relative_to(root).parts)]
    return sorted(files, key=lambda p: str(p.relative_to(root)))


def read_documents() -> list[str]:
    docs = []
    for path in stdlib_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        if text.strip():
            docs.append(text)
    return docs


def train_tokenizer(docs: list[str]) -> Tokenizer:
    # Byte-level BPE: any input text encodes, and decode is the exact inverse.
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(docs, trainer=trainer)
    return tok


def write_tokenizer(tok: Tokenizer, model_dir: Path) -> None:
    model_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(model_dir / "tokenizer.json"))
    (model_dir / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast",
        "eos_token": EOS, "bos_token": None, "unk_token": None, "pad_token": EOS,
        "model_max_length": 2048, "clean_up_tokenization_spaces": False,
    }, indent=2) + "\n")
    (model_dir / "special_tokens_map.json").write_text(json.dumps({"eos_token": EOS, "pad_token": EOS}, indent=2) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="build/corpus.npz")
    ap.add_argument("--models", default=str(Path(__file__).resolve().parents[2] / "specdec" / "models"))
    args = ap.parse_args()
    docs = read_documents()
    tok = train_tokenizer(docs)
    eos_id = tok.token_to_id(EOS)
    ids: list[int] = []
    for enc in tok.encode_batch(docs):
        ids.extend(enc.ids)
        ids.append(eos_id)
    arr = np.asarray(ids, dtype=np.uint16)
    for name in ("target", "drafter"):
        write_tokenizer(tok, Path(args.models) / name)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, ids=arr, eos_id=np.int64(eos_id), vocab_size=np.int64(tok.get_vocab_size()))
    print(json.dumps({"documents": len(docs), "bytes": sum(len(d.encode()) for d in docs),
                      "tokens": int(arr.size), "vocab": tok.get_vocab_size(),
                      "python": sys.version.split()[0], "out": str(out)}))


if __name__ == "__main__":
    main()
