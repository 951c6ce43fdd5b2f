#!/usr/bin/env bash
# GSDM paper Fig. 3: iterations a Boolean circuit of depth n needs until the model fits, with and
# without the intermediate (gate-output) variables. Each run trains the problem's Table 2
# configuration (D 64, 12 blocks, 2 heads, IE, batch 16, lr 2e-5) and stops at the first
# validation (16 examples, every EVERY steps) with all 16 outputs right, or at the cap. Runs go
# one at a time on one thread, so their step counts do not depend on other work. A rerun skips
# finished runs. --diffusion masked trains the masked (absorbing-state) process instead of the
# paper's Gaussian one (runs named ...-masked). Summary: scripts/gsdm_boolean_fit.py OUT_DIR
# Usage: scripts/gsdm_boolean_fit.sh [--depths "1 2 3 4 5"] [--variants "with without"]
#          [--diffusion gaussian] [--cap 20000] [--every 500] [--seeds "1"] OUT_DIR
set -euo pipefail

depths="1 2 3 4 5"
cap=20000
every=500
seeds="1"
variants="with without"
diffusion=gaussian
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--depths --variants --diffusion --cap --every --seeds" "$@"
out=${arguments[0]:?OUT_DIR missing; usage at the top of $0}
mkdir -p "$out"

# Every option spelled out, so a change of the problem's defaults cannot change the experiment
# (tests/test_scripts.cpp checks that these command lines still parse).
for seed in $seeds; do
  for depth in $depths; do
    for variant in $variants; do
      name=$out/n$depth-$variant-s$seed
      [[ $diffusion == masked ]] && name=$name-masked
      [[ -f $name.pt ]] && continue
      flags=()
      [[ $variant == without ]] && flags=(--no-intermediates)
      "$bin" --threads 1 --seed "$seed" gsdm train --problem boolean --size "$depth" "${flags[@]}" \
        --dim 64 --blocks 12 --heads 2 --embedding IE --norm token --attention sparse \
        --noise-schedule linear --diffusion-steps 1000 --beta-start 1e-4 --beta-end 5e-3 \
        --diffusion "$diffusion" --mask-schedule cosine --masked-loss elbo \
        --batch 16 --lr 2e-5 --lr-decay constant --warmup 0 --weight-decay 0 --clip 1 --ema 0.99 \
        --train-steps "$cap" --validate-every "$every" --validation-examples 16 \
        --stop-at 'accuracy>=1' --checkpoint "$name.ckpt" --checkpoint-every "$every" --resume \
        --log "$name.jsonl" --out "$name.pt" > "$name.txt" 2>&1
    done
  done
done
