#!/usr/bin/env bash
# GSDM paper Fig. 5a's starting point at CPU scale: BCMF at (m, n, k) = (16, 16, 8), trained for
# the same wall-clock three ways, then scored on the same fresh problems:
#   structured     the graphical model's attention pattern, with the intermediates C (GSDM)
#   unstructured   every variable attends to every other (--attention dense), with C
#   without        the graph without C (--no-intermediates), its own structured pattern
# All else is the problem's Table 2 model (D 64, 12 blocks, 2 heads, EE embeddings, batch 8).
# The three train at once, one thread each (so on two cores each has about two thirds of one),
# seed 1; then each is scored, one after another, on the same 16 fresh problems (seed 1) with
# 20-step DDIM (the unstructured model's forward pass is the slow one).
# A rerun skips finished runs.
# Usage: scripts/gsdm_bcmf_structure.sh [--minutes 20] [--size 16,16,8] OUT_DIR
set -euo pipefail

minutes=20
size=16,16,8
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--minutes --size" "$@"
out=${arguments[0]:?OUT_DIR missing; usage at the top of $0}
mkdir -p "$out"

# Every option spelled out, so a change of the problem's defaults cannot change the experiment
# (tests/test_scripts.cpp checks that these command lines still parse).
train() {
  local arm=$1 name=$out/$1
  local flags
  case $arm in
    structured) flags=(--attention sparse) ;;
    unstructured) flags=(--attention dense) ;;
    without) flags=(--attention sparse --no-intermediates) ;;
  esac
  [[ -f $name.pt ]] && return
  "$bin" --threads 1 --seed 1 gsdm train --problem bcmf --size "$size" "${flags[@]}" \
    --dim 64 --blocks 12 --heads 2 --embedding EE --norm token --diffusion gaussian \
    --noise-schedule linear --diffusion-steps 1000 --beta-start 1e-4 --beta-end 5e-3 \
    --batch 8 --lr 2e-4 --lr-decay constant --warmup 100 --weight-decay 0 --clip 1 --ema 0.99 \
    --train-steps 1000000 --max-minutes "$minutes" --validate-every 0 \
    --checkpoint "$name.ckpt" --checkpoint-every 100 --resume \
    --log "$name.jsonl" --out "$name.pt" > "$name.txt" 2>&1
}

pool_start 3
for arm in structured unstructured without; do
  pool_run train "$arm"
done
wait

for arm in structured unstructured without; do
  name=$out/$arm
  [[ -f $name.eval.json ]] && continue
  "$bin" --threads 2 --seed 1 gsdm eval --model "$name.pt" --count 16 --batch 8 --sampler ddim \
    --sample-steps 20 --eta 1 --json "$name.eval.json" > "$name.eval.txt" 2>&1
done
