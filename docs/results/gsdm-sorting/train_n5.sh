#!/usr/bin/env bash
# Sorting n=5 (spec acceptance row): D64 L6 H8 EE (problem defaults), b16, lr 2e-4 cosine.
cd /work/main
export OMP_WAIT_POLICY=PASSIVE
exec nice -n 5 runs/bin/structdiff-sorting --threads 1 --seed 1 gsdm train --problem sorting --size 5 \
  --train-steps 20000 --lr 2e-4 --lr-decay cosine --warmup 200 --ema 0.999 --clip 1 \
  --validate-every 2000 --validation-examples 64 --checkpoint runs/gsdm-sorting/n5.ckpt \
  --checkpoint-every 1000 --resume --log runs/gsdm-sorting/n5.jsonl --out runs/gsdm-sorting/n5.pt
