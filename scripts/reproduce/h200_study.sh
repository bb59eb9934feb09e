#!/usr/bin/env bash
# The MTP / attention-path study on a CUDA host (reports/ holds what it produced on an H200):
#   bash scripts/reproduce/h200_study.sh OUT_DIR [random|embedded|all]
# 1. the 8B-shape random-init pair (scripts/reproduce/suites/random-8b-spec.toml) under MLX's cuDNN
#    attention (SPECDEC_CUDNN_SDPA=1, the engine's old default; an override, named in the record)
#    and under the engine's default (cuDNN attention off on CUDA): the before/after record;
# 2. the embedded pair's MTP study (reports/suites/mtp-study.toml) and its quantized-drafter A/B
#    at a second length (reports/suites/mtp-quant-ab.toml).
# Each step is its own harness session (MLX fixes its attention path once per process).
set -euo pipefail
out=${1:?usage: bash scripts/reproduce/h200_study.sh OUT_DIR [random|embedded|all]}
part=${2:-all}
mkdir -p "$out" build
py=${PYTHON:-python3}
if [ "$part" != embedded ]; then
[ -d build/random-8b-4bit ] || $py scripts/reproduce/make_random_model.py --shape 8b --bits 4 --out build/random-8b-4bit
[ -d build/random-1b ] || $py scripts/reproduce/make_random_model.py --shape 1b --bits 0 --out build/random-1b
[ -d build/random-8b-mtp ] || $py scripts/reproduce/make_random_model.py --shape 8b --mtp --out build/random-8b-mtp
fi
# A run that fails or is flagged still leaves its record: go on to the next.
run() { local rec=$1; shift; env "$@" --record "$out/$rec.json" > "$out/$rec.out" 2>&1 || echo "exit $? for $rec"; }
if [ "$part" != embedded ]; then
  run random-8b-spec-cudnn-on SPECDEC_CUDNN_SDPA=1 $py -m harness run scripts/reproduce/suites/random-8b-spec.toml
  run random-8b-spec $py -m harness run scripts/reproduce/suites/random-8b-spec.toml
fi
if [ "$part" != random ]; then
  run mtp-study $py -m harness run reports/suites/mtp-study.toml
  run mtp-quant-ab $py -m harness run reports/suites/mtp-quant-ab.toml
fi
ls -la "$out"
