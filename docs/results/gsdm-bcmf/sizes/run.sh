#!/usr/bin/env bash
# BCMF size generalisation of the (8,8,4) EE model: DDIM-50 (eta 1) on 32 fresh problems per size.
set -euo pipefail
cd /work/main
export OMP_WAIT_POLICY=PASSIVE
for size in 8,8,4 4,4,4 16,16,4 8,8,2 24,24,4 32,32,4; do
  out=runs/gsdm-bcmf/sizes/eval-${size//,/x}.json
  [[ -f $out ]] && continue
  nice -n 10 runs/bin/structdiff-sizegen --threads 1 --seed 1 gsdm eval --model runs/gsdm-bcmf/b884.pt \
    --size "$size" --count 32 --batch 32 --sampler ddim --sample-steps 50 --eta 1 --json "$out" \
    > "${out%.json}.txt" 2>&1
done
