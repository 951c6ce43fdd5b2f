#!/usr/bin/env bash
# BCMF (8,8,4) (spec acceptance row): D64 L12 H2 EE (problem defaults), b8, lr 2e-4 cosine.
cd /work/main
export OMP_WAIT_POLICY=PASSIVE
exec nice -n 5 runs/bin/structdiff-bcmf --threads 1 --seed 1 gsdm train --problem bcmf --size 8,8,4 \
  --train-steps 6000 --lr 2e-4 --lr-decay cosine --warmup 200 --ema 0.995 --clip 1 \
  --validate-every 1000 --validation-examples 32 --checkpoint runs/gsdm-bcmf/b884.ckpt \
  --checkpoint-every 500 --resume --log runs/gsdm-bcmf/b884.jsonl --out runs/gsdm-bcmf/b884.pt
