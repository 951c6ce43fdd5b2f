#!/usr/bin/env bash
# GSDM paper Fig. 6 at CPU scale: independent (IE), array (AE) and exchangeable (EE) embeddings,
# each trained for the same wall-clock on sorting (n = 20) and 9x9 Sudoku, validating as it goes;
# the validation logs are the learning curves (scripts/gsdm_embeddings_plot.py draws them).
#   sorting  lists of --sorting-size (the paper's figure: 20), the paper's Table 2 model (D 64,
#            6 blocks, 8 heads), Gaussian diffusion, 32 fixed validation lists (sampled as the
#            problem validates: 20-step DDIM); runs are named sorting<N>-<embedding>
#   sudoku   D 128, 6 blocks, 8 heads, masked diffusion (the shipped Sudoku model's process),
#            32 fixed validation puzzles with half the cells given (the paper's Fig. 6 setting)
# Every run has one thread and seed 1; a problem's three runs train at once (--jobs 3), so on two
# cores each has about two thirds of one, alike. A rerun skips finished runs.
# Usage: scripts/gsdm_embeddings.sh [--minutes 8] [--jobs 3] [--problems "sorting sudoku"]
#          [--sorting-size 20] [--embeddings "EE AE IE"] OUT_DIR
set -euo pipefail

minutes=8
jobs=3
problems="sorting sudoku"
sorting_size=20
embeddings="EE AE IE"
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--minutes --jobs --problems --sorting-size --embeddings" "$@"
out=${arguments[0]:?OUT_DIR missing; usage at the top of $0}
mkdir -p "$out"

# Every option spelled out, so a change of the problem's defaults cannot change the experiment
# (tests/test_scripts.cpp checks that these command lines still parse).
train() {
  local problem=$1 embedding=$2 name flags
  case $problem in
    sorting)
      name=$out/sorting$sorting_size-$embedding
      flags=(--problem sorting --size "$sorting_size" --dim 64 --blocks 6 --heads 8
             --diffusion gaussian --noise-schedule linear
             --diffusion-steps 1000 --beta-start 1e-4 --beta-end 5e-3
             --batch 16 --lr 2e-4 --warmup 200 --ema 0.99 --validate-every 50) ;;
    sudoku)
      name=$out/sudoku-$embedding
      flags=(--problem sudoku --size 9 --dim 128 --blocks 6 --heads 8 --diffusion masked
             --mask-schedule cosine --masked-loss elbo --batch 32 --lr 1e-4 --warmup 300
             --ema 0.999 --validate-every 100) ;;
  esac
  [[ -f $name.pt ]] && return
  "$bin" --threads 1 --seed 1 gsdm train "${flags[@]}" --embedding "$embedding" \
    --attention sparse --norm token --lr-decay constant --weight-decay 0 --clip 1 \
    --train-steps 1000000 --max-minutes "$minutes" --validation-examples 32 \
    --checkpoint "$name.ckpt" --checkpoint-every 500 --resume \
    --log "$name.jsonl" --out "$name.pt" > "$name.txt" 2>&1
}

pool_start "$jobs"
for problem in $problems; do
  for embedding in $embeddings; do
    pool_run train "$problem" "$embedding"
  done
done
wait
