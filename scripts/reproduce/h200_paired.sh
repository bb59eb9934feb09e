#!/usr/bin/env bash
# The paired commit check on a CUDA host with the 8B-shape random-init 4-bit target, in steps
# that each fit one device call (docs/measurements/log.md, "The H200"):
#
#   bash scripts/reproduce/h200_paired.sh OUT probe [LENGTHS]          # pair noise by run length (default
#        "16 32 64 128", host cooldown) and at 32 tokens without a ratio cooldown; about 3 min
#   bash scripts/reproduce/h200_paired.sh OUT resolve T COOL BUDGET     # one A/A check: does it resolve 2%?
#   bash scripts/reproduce/h200_paired.sh OUT fault T COOL BUDGET       # the calibrated F = 0.03 fault
#   bash scripts/reproduce/h200_paired.sh OUT aa T COOL BUDGET N        # N A/A checks (false alarms)
#
# THRESHOLD=0.01 asks the check to see 1% (default 0.02, the suite's); F=0.04 sets the fault's size
# (default 0.03, a fraction of one target forward per generated token). With RESTART_S=SECONDS in the environment, resolve, fault and aa restart both workers that often
# (the suite's restart_s: the verdicts count the worker generations, docs/statistics.md).
#
# T is max_tokens; COOL is "host" (the host spec's rule: 0.25 x the previous run, 0.05 s to
# 30 s) or "floor" (0.05 s after every run; the thermal reading still makes the runner wait
# while the GPU reports a slowdown). Each step writes its suites under build/suites/ (derived
# from scripts/reproduce/suites/, so their model paths hold) and its results under OUT, with each check's
# scratch project and records under OUT/NAME-T-COOL-work/.
set -euo pipefail
out=${1:?usage: bash scripts/reproduce/h200_paired.sh OUT probe|resolve|fault|aa ...}
step=${2:?usage: bash scripts/reproduce/h200_paired.sh OUT probe|resolve|fault|aa ...}
py=${PYTHON:-python3}
mkdir -p "$out" build/suites
[ -d build/random-8b-4bit ] || $py scripts/reproduce/make_random_model.py --shape 8b --bits 4 --out build/random-8b-4bit

# derive SRC T COOL -> prints the derived suite's path
derive() {
  local src=$1 t=$2 cool=$3 dst tag=-t$2-$3${RESTART_S:+-r$RESTART_S}
  dst=build/suites/$(basename "$src" .toml)$tag.toml
  sed -e "s/^max_tokens = .*/max_tokens = $t/" -e "0,/^name = /s/^name = \"\(.*\)\"/name = \"\1$tag\"/" "$src" > "$dst"
  [ -z "${RESTART_S:-}" ] || echo "restart_s = $RESTART_S" | sed -i "/^looks = /r /dev/stdin" "$dst"
  if [ "$cool" = floor ]; then
    sed -i -e 's/^cooldown_s = .*/cooldown_s = 0.05\ncooldown_ratio = 0.0/' "$dst"
  elif [ "$cool" != host ]; then
    echo "COOL must be host or floor, got $cool" >&2; exit 2
  fi
  echo "$dst"
}

check() {   # check NAME T COOL BUDGET ARGS...
  local name=$1${RESTART_S:+-r$RESTART_S} t=$2 cool=$3 budget=$4; shift 4
  local suite; suite=$(derive scripts/reproduce/suites/paired-random-8b.toml "$t" "$cool")
  # The scratch project stays under OUT: each check's two side records (every run, its load
  # and thermal readings) are then at OUT/NAME-T-COOL-work/project/.harness/compare/*/records/.
  rm -rf "$out/$name-t$t-$cool-work"
  $py scripts/studies/asv_sensitivity.py --command compare-commits --suite "$suite" --budget-s "$budget" \
      --threshold "${THRESHOLD:-0.02}" --workdir "$out/$name-t$t-$cool-work" --out "$out/$name-t$t-$cool.json" "$@" \
      > "$out/$name-t$t-$cool.out" 2>&1 || echo "exit $? for $name"
  tail -4 "$out/$name-t$t-$cool.out"
}

case $step in
  probe)
    lengths=${3:-16 32 64 128}
    for spec in $(for t in $lengths; do echo "$t:host"; done) 32:floor; do
      t=${spec%%:*}; cool=${spec##*:}
      suite=$(derive scripts/reproduce/suites/noise-probe-random-8b.toml "$t" "$cool")
      rec=$out/probe-t$t-$cool
      $py -m harness run "$suite" --record "$rec.json" > "$rec.out" 2>&1 || echo "exit $? for probe t$t $cool"
      $py scripts/studies/pair_noise.py "$rec.json" --threshold 0.02 --json "$rec.noise.json" || true
    done ;;
  resolve) check resolve "${3:?T}" "${4:?COOL}" "${5:?BUDGET}" --work "" --checks 0 --aa 1 ;;
  fault) check "fault-f${F:-0.03}" "${3:?T}" "${4:?COOL}" "${5:?BUDGET}" --work "${F:-0.03}" --checks 1 --aa 0 ;;
  aa) check aa "${3:?T}" "${4:?COOL}" "${5:?BUDGET}" --work "" --checks 0 --aa "${6:?N}" ;;
  *) echo "unknown step $step (probe, resolve, fault or aa)" >&2; exit 2 ;;
esac
ls -la "$out"
