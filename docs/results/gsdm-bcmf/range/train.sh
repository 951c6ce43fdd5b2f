#!/usr/bin/env bash
# BCMF size generalisation, the paper's protocol (App. F): one EE model trained with a new size per
# batch, m, n, k ~ U{1..10} each; validated at (8,8,4). Rerunning resumes from the checkpoint.
set -euo pipefail
cd "$(dirname "$0")/../../../.."
STRUCTDIFF=${STRUCTDIFF:-build/src/structdiff}
out=runs/gsdm-bcmf-range
mkdir -p "$out"
export OMP_WAIT_POLICY=PASSIVE
nice -n 5 "$STRUCTDIFF" --threads 1 --seed 1 gsdm train --problem bcmf --size 8,8,4 \
  --size-range 1,1,1..10,10,10 --train-steps 12000 --lr 2e-4 --lr-decay cosine --warmup 200 \
  --ema 0.995 --clip 1 --validate-every 2000 --validation-examples 32 \
  --checkpoint "$out/train.ckpt" --checkpoint-every 500 --resume --log "$out/train.jsonl" \
  --out "$out/model.pt"
