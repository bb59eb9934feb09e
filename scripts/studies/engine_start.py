"""Where an in-process engine's start goes: each stage of a fresh process that loads the
embedded pair and decodes, timed from the interpreter's start of this script.

Stages: import mlx.core; the first evaluated array (the device comes up); a first matmul;
import mlx_lm (which imports transformers, and torch where it is installed); import specdec;
load the pair; then five 128-token generations (classic twice, block 3 with the gate overridden
twice, block 2), each with the engine's own prefill and decode ms. A first prefill that
compiles kernels shows here as seconds; run it twice to see MLX's on-disk kernel cache
($TMPDIR/mlx/<version>/ptx on CUDA) at work. One JSON line.

`python scripts/studies/engine_start.py`
"""

import json
import os
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
stages: dict[str, float] = {}


def mark(name: str) -> None:
    stages[name] = round(time.perf_counter() - T0, 3)


import mlx.core as mx  # noqa: E402

mark("import_mlx")
mx.eval(mx.zeros((4,)) + 1)
mark("first_eval")
a = mx.random.normal((256, 256))
mx.eval(a @ a)
mark("first_matmul")
import mlx_lm  # noqa: E402, F401

mark("import_mlx_lm")
import specdec.engine as engine  # noqa: E402
from specdec.loading import load_pair  # noqa: E402

mark("import_specdec")
pair = load_pair(None, None)
mark("load_pair")
for i, (block, inexact) in enumerate([(1, False), (1, False), (3, True), (3, True), (2, False)]):
    if inexact:
        os.environ["SPECDEC_ALLOW_INEXACT"] = "1"
    else:
        os.environ.pop("SPECDEC_ALLOW_INEXACT", None)
    d = engine.generate(pair, "def fibonacci(n):\n    ", block=block, max_tokens=128, ignore_eos=True).diagnostics
    mark(f"gen{i}_block{block}")
    stages[f"gen{i}_prefill_ms"] = round(d.prefill_ms, 1)
    stages[f"gen{i}_decode_ms"] = round(d.decode_ms, 1)
print(json.dumps({"device": str(mx.default_device()), **stages}))
