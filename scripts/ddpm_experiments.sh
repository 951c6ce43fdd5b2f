#!/usr/bin/env bash
# DDPM sample quality per attention type after equal training time (the Performer report's
# comparison, measured with a classifier's Fréchet distance instead of by eye). For each dataset
# and attention type: `ddpm train` for MINUTES of wall-clock, then `ddpm eval` (Fréchet classifier
# distance to the test set, class histogram, a 10x10 sample grid). Runs go two at a time with one
# thread each, so every run gets one core of the 2-core machine. One directory per dataset under
# OUT_DIR with <attention>.pt, .log (JSONL), .txt (stdout/stderr), .json (eval) and .png (grid).
# A rerun skips finished cells. Usage:
#   scripts/ddpm_experiments.sh [--minutes M] [--datasets "fashion-mnist mnist"]
#     [--attentions "dense favor-softmax favor-relu linear"] [--samples N] [--sample-steps S]
#     [--parallel P] OUT_DIR [extra `ddpm train` options...]
set -euo pipefail

minutes=10
datasets="fashion-mnist mnist"
attentions="dense favor-softmax favor-relu linear"
samples=1000
sample_steps=50
parallel=2
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--minutes --datasets --attentions --samples --sample-steps --parallel" "$@"
out=${arguments[0]:?OUT_DIR missing; usage at the top of $0}
extra=("${arguments[@]:1}")

# The recorded configuration (docs/results/ddpm-attention.md), every training option spelled out so
# that a change of the tool's defaults does not change the experiment; extra options follow them.
pinned=(--base-channels 16 --channel-mult 1 2 4 --res-blocks 1 --attention-resolutions 14 7
  --bottleneck-attention dense --heads 4 --head-dim 32 --groups 8 --dropout 0 --favor-features 0
  --redraw 1000 --batch 32 --lr 1e-3 --lr-decay constant --warmup 200 --clip 1 --ema 0.995
  --weight-decay 0 --validation-images 256)

cell() {  # DATASET ATTENTION
  local dir=$out/$1 name=$2
  mkdir -p "$dir"
  if [[ ! -f $dir/$name.pt ]]; then
    "$bin" --threads 1 --seed 0 ddpm train --dataset "$1" --attention "$name" \
      --train-steps 1000000 --max-minutes "$minutes" --validate-every 100 \
      --log "$dir/$name.log" --out "$dir/$name.pt" "${pinned[@]}" "${extra[@]}" > "$dir/$name.txt" 2>&1
  fi
  if [[ ! -f $dir/$name.json ]]; then
    "$bin" --threads 1 --seed 1 ddpm eval --model "$dir/$name.pt" \
      --classifier "models/classifier-$1.pt" --count "$samples" --sample-steps "$sample_steps" --eta 0 \
      --grid "$dir/$name.png" --json "$dir/$name.json" >> "$dir/$name.txt" 2>&1
  fi
  echo "done: $dir/$name"
}

pool_start "$parallel"
for dataset in $datasets; do
  for attention in $attentions; do
    pool_run cell "$dataset" "$attention"
  done
done
wait
