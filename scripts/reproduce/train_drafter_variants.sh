#!/usr/bin/env bash
# Distil drafter variants for the embedded target side by side on one GPU, on one shared set of
# target-generated greedy continuations, so that they differ only in what each line names.
# Each variant lands in OUT/<name>/ (drafter/, training.json, train.log, acceptance.json: the
# pooled per-step acceptance from scripts/studies/acceptance.py on code prompts, block 3)
# Usage: scripts/reproduce/train_drafter_variants.sh OUT SECONDS SELF_SEQS
set -euo pipefail
out=${1:?output directory}; secs=${2:-300}; seqs=${3:-65536}
mkdir -p "$out"
rows="$out/self-rows.npy"
variant() {  # name, then train_pair.py options
  local name=$1; shift
  mkdir -p "$out/$name"
  cp -r specdec/models/target specdec/models/drafter specdec/models/training.json "$out/$name/"
  "${PYTHON:-python3}" scripts/reproduce/train_pair.py --stage drafter --out "$out/$name" --drafter-seconds "$secs" \
    --self-seqs "$seqs" --self-rows "$rows" "$@" > "$out/$name/train.log" 2>&1
}
"${PYTHON:-python3}" scripts/reproduce/train_pair.py --stage drafter --out specdec/models --self-seqs "$seqs" --self-rows "$rows" --rows-only
variant qat-ft --qat --init-drafter --drafter-lr 1e-3 --self-share 0.8 &
variant qat-ft-ce --qat --init-drafter --drafter-lr 1e-3 --self-share 1.0 --kl-weight 0 &
variant qat-2x192 --qat --self-share 0.8 --drafter-hidden 192 --drafter-ffn 512 &
variant qat-2x256 --qat --self-share 0.8 --drafter-hidden 256 --drafter-ffn 768 &
wait
rm -f "$rows"
for d in "$out"/*/drafter; do  # score each as the engine runs it (quantized) and dense
  "${PYTHON:-python3}" scripts/studies/acceptance.py --draft-model "$d" --json > "${d%/drafter}/acceptance.json" || true
done
