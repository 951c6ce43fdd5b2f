#!/usr/bin/env bash
# GSDM paper Fig. 7 (sorting, n = 20): the standard mask against its ablations, each trained the
# same number of steps from the same seed and scored on the same 64 lists with ancestral sampling.
#   standard         the graphical model's mask
#   non-symmetrised  an edge p -> c lets only the child attend to its parent (--mask)
#   random           as many pairs as the standard mask, drawn uniformly (--mask)
#   without          the graph without the intermediates C (--no-intermediates)
#   s-fully-connected  one factor over all of s instead of neighbouring pairs (--variant)
#   unconstrained-s    no factor on s, a misspecified model (--variant)
# Runs go one at a time on one thread; a rerun skips finished ones.
# Usage: scripts/gsdm_sorting_masks.sh [--size 20] [--steps 2000] [--variants "..."]
#          [--sampler ancestral|ddim] OUT_DIR
set -euo pipefail

size=20
steps=2000
variants="standard non-symmetrised random without s-fully-connected unconstrained-s"
sampler=ancestral
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--size --steps --variants --sampler" "$@"
out=${arguments[0]:?OUT_DIR missing; usage at the top of $0}
mkdir -p "$out"

# Every option spelled out, so a change of the problem's defaults cannot change the experiment
# (tests/test_scripts.cpp checks that these command lines still parse).
for variant in $variants; do
  name=$out/$variant
  case $variant in
    without) flags=(--no-intermediates --mask-rule standard) ;;
    s-fully-connected | unconstrained-s) flags=(--variant "$variant" --mask-rule standard) ;;
    *) flags=(--mask-rule "$variant") ;;
  esac
  if [[ ! -f $name.pt ]]; then
    "$bin" --threads 1 --seed 1 gsdm train --problem sorting --size "$size" "${flags[@]}" \
      --dim 64 --blocks 6 --heads 8 --embedding EE --norm token --attention sparse \
      --noise-schedule linear --diffusion-steps 1000 --beta-start 1e-4 --beta-end 5e-3 \
      --batch 16 --lr 2e-4 --lr-decay cosine --warmup 200 --weight-decay 0 --clip 1 --ema 0.99 \
      --train-steps "$steps" --validate-every 500 --validation-examples 32 \
      --checkpoint "$name.ckpt" --checkpoint-every 250 --resume \
      --log "$name.jsonl" --out "$name.pt" > "$name.txt" 2>&1
  fi
  [[ -f $name.eval.json ]] && continue
  "$bin" --threads 1 --seed 1 gsdm eval --model "$name.pt" --count 64 --sampler "$sampler" \
    --sample-steps 50 --eta 1 --json "$name.eval.json" > "$name.eval.txt" 2>&1
done
