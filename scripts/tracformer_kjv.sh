#!/usr/bin/env bash
# The shipped Tracformer, models/tracformer-kjv.pt: CAR objective, the paper's mixed masking
# (Algorithm 2), d 96, 3 heads, 8 + 8 layers, N_max 16, crops of 256 characters of the King James
# Bible (data/kjv/kjv.txt, from scripts/setup.sh), 4,000 steps (about 2 h of both cores). Writes
# OUT_DIR/tracformer-kjv.pt, its JSONL log and a checkpoint every 50 steps: run again with --resume
# to continue an interrupted run.
# Usage: scripts/tracformer_kjv.sh OUT_DIR [--resume] [--max-minutes M]  (a leg of at most M minutes)
set -euo pipefail
out=${1:?output directory}
shift
source "$(dirname "$0")/lib/experiments.sh"
mkdir -p "$out"

# Every option is spelled out, so a changed default cannot change the model (tests/test_scripts.cpp
# checks that this command line still parses).
"$bin" --threads 2 --seed 1 tracformer train --text data/kjv/kjv.txt --architecture tracformer \
  --objective car --attention sparse --d-model 96 --heads 3 --layers 8 --n-max 16 \
  --block-size 256 --batch 32 --masking mixed --mask-ratio 0.5 --span-mean 16 \
  --span-dist geometric --dropout 0 --lr 1e-3 --lr-decay cosine --warmup 100 --weight-decay 0.1 \
  --clip 1 --ema 0 --train-steps 4000 --validate-every 250 --validation-crops 64 \
  --checkpoint "$out/tracformer-kjv.ckpt" --checkpoint-every 50 --log "$out/tracformer-kjv.jsonl" \
  --out "$out/tracformer-kjv.pt" "$@"
