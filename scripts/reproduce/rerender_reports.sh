#!/usr/bin/env bash
# Re-render every committed report, its figures and the index from the records in reports/
# (the two comparisons with the records each compares). A change to a renderer shows as a diff
# of reports/; the same records give the same bytes.
set -euo pipefail
cd "$(dirname "$0")/../.."
# HARNESS: another checkout's harness (a git worktree run with this venv and PYTHONPATH).
H=${HARNESS:-.venv/bin/harness}
for f in reports/2026*.json; do $H report "$f" --out "${f%.json}.md"; done
$H report reports/20261205-084154-mtp-study-linux-cpu.json \
  --compare reports/20261205-032041-mtp-study-h200.json --out reports/20261205-mtp-study-linux-cpu-vs-h200.md
$H report reports/20261205-021945-random-8b-spec-cudnn-on-h200.json \
  --compare reports/20261205-022112-random-8b-spec-h200.json --out reports/20261205-random-8b-spec-cudnn-on-vs-off-h200.md
$H report reports/20261207-173424-random-8b-spec-cudnn-on-h100.json \
  --compare reports/20261207-173656-random-8b-spec-h100.json --out reports/20261207-random-8b-spec-cudnn-on-vs-off-h100.md
$H report reports/20261205-084154-mtp-study-linux-cpu.json \
  --compare reports/20261207-173809-mtp-study-h100.json --out reports/20261207-mtp-study-linux-cpu-vs-h100.md
$H report --index
