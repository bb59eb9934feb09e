#!/usr/bin/env bash
# Distil drafter variants for the embedded target side by side on one GPU, on one shared set of
# target-generated greedy continuations, so that they differ only in what each line names.
# Each variant lands in OUT/<name>/ (drafter/, training.json, train.log); score them with
#   python scripts/acceptance.py --draft-model OUT/<name>/drafter
# Usage: scripts/train_drafter_variants.sh OUT SECONDS SELF_SEQS
set -euo pipefail
out=${1:?output directory}; secs=${2:-300}; seqs=${3:-65536}
mkdir -p "$out"
rows="$out/self-rows.npy"
variant() {  # name, then train_pair.py options
  local name=$1; shift
  mkdir -p "$out/$name"
  cp -r specdec/models/target specdec/models/drafter specdec/models/training.json "$out/$name/"
  "${PYTHON:-python3}" scripts/train_pair.py --stage drafter --out "$out/$name" --drafter-seconds "$secs" \
    --self-seqs "$seqs" --self-rows "$rows" "$@" > "$out/$name/train.log" 2>&1
}
"${PYTHON:-python3}" scripts/train_pair.py --stage drafter --out specdec/models --self-seqs "$seqs" --self-rows "$rows" --rows-only
variant qat-2x128 --qat --self-share 0.8 &
variant plain-2x128 --self-share 0.8 &
variant qat-2x192 --qat --self-share 0.8 --drafter-hidden 192 --drafter-ffn 512 &
variant qat-finetune --qat --self-share 0.8 --init-drafter --drafter-lr 1e-3 &
wait
rm -f "$rows"
