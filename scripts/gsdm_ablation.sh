#!/usr/bin/env bash
# Structured (sparse mask) vs unstructured (dense) attention for Sudoku GSDMs at equal training
# wall-clock, as in the GSDM paper's Figure 5b. All runs of the chosen sizes train at once, one
# thread each, so each pair shares the machine equally; then each model is evaluated with DDIM.
# Usage: scripts/gsdm_ablation.sh [--sizes "9 16"] MINUTES OUT_DIR   (sizes: 9, 16, 25)
set -euo pipefail
sizes="9 16"
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--sizes" "$@"
minutes=${arguments[0]:?minutes of training per run}
out=${arguments[1]:?output directory}
mkdir -p "$out"

# Every option the recorded table relies on is spelled out, so a changed default cannot change
# the experiment (tests/test_scripts.cpp checks that these command lines still parse).
train() {  # size attention dim blocks heads
  "$bin" --threads 1 --seed 0 sudoku train --size "$1" --attention "$2" --dim "$3" --blocks "$4" \
    --heads "$5" --embedding AE --norm token \
    --noise-schedule linear --diffusion-steps 1000 --beta-start 1e-4 --beta-end 5e-3 \
    --batch 32 --lr 3e-4 --lr-decay constant --warmup 0 --weight-decay 0 --clip 1 --ema 0.99 \
    --validate-every 0 --train-steps 1000000 --max-minutes "$minutes" \
    --log "$out/sudoku$1-$2.jsonl" --out "$out/sudoku$1-$2.pt" > "$out/sudoku$1-$2.train.txt" 2>&1
}
# 9x9 with the reference configuration; 16x16 and 25x25 smaller so that they get through enough
# steps.
shape() {  # size -> dim blocks heads
  case $1 in
    9) echo 128 6 8 ;;
    16 | 25) echo 64 4 4 ;;
    *) echo "size $1: the sizes are 9, 16 and 25" >&2; exit 2 ;;
  esac
}
for size in $sizes; do shape "$size" > /dev/null; done
for size in $sizes; do
  # shellcheck disable=SC2046
  train "$size" sparse $(shape "$size") &
  # shellcheck disable=SC2046
  train "$size" dense $(shape "$size") &
done
wait
for size in $sizes; do for model in "$out"/sudoku"$size"-*.pt; do
  # The table predates stochastic DDIM as the default: deterministic DDIM 50 (eta 0).
  "$bin" --threads 2 --seed 1 sudoku eval --model "$model" --count 64 --no-unique \
    --sampler ddim --sample-steps 50 --eta 0 --grids broad \
    --diversity-samples 8 --json "${model%.pt}.eval.json" > "${model%.pt}.eval.txt"
done; done
