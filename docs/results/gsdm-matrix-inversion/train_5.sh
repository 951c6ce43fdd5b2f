#!/usr/bin/env bash
# Matrix inversion 5x5 (spec acceptance row): D128 L8 H8 AE (problem defaults), b16, lr 2e-4
# cosine; 20 minutes of this session, continued with --resume in later ones.
cd /work/main
export OMP_WAIT_POLICY=PASSIVE
exec nice -n 5 runs/bin/structdiff-matinv --threads 1 --seed 1 gsdm train --problem matrix-inversion \
  --train-steps 20000 --lr 2e-4 --lr-decay cosine --warmup 200 --ema 0.995 --clip 1 \
  --validate-every 1000 --validation-examples 32 --checkpoint runs/gsdm-matinv/m5.ckpt \
  --checkpoint-every 500 --resume --max-minutes 20 --log runs/gsdm-matinv/m5.jsonl --out runs/gsdm-matinv/m5.pt
