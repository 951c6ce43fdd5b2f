#!/usr/bin/env bash
# A BCMF model (default: the size-range model) on the spec note's grid: m = n in {10 (inside the
# training range), 16, 32, 64} x k in {2, 4, 8}; DDIM-20 with eta 1 on 16 fresh problems per
# cell (8 at m = n = 64), PARALLEL cells at a time (default 1), smallest first. Finished cells
# are skipped, so rerunning continues. MODEL and OUT choose another model and folder (the
# fixed-size (8,8,4) model of ../train_884.sh for comparison).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
export STRUCTDIFF=${STRUCTDIFF:-build/src/structdiff} OMP_WAIT_POLICY=PASSIVE
model=${MODEL:-runs/gsdm-bcmf-range/model.pt}
out=${OUT:-runs/gsdm-bcmf-range/eval}
mkdir -p "$out"
cell() {
  local size=$1 count=16 json=$out/eval-${1//,/x}.json
  [[ -f $json ]] && return 0
  [[ $size == 64,* ]] && count=8
  nice -n 5 "$STRUCTDIFF" --threads 1 --seed 1 gsdm eval --model "$model" \
    --size "$size" --count "$count" --batch "$count" --sampler ddim --sample-steps 20 --eta 1 \
    --json "$json" > "${json%.json}.txt" 2>&1
}
export -f cell
export out model
printf '%s\n' 8,8,4 10,10,2 10,10,4 10,10,8 16,16,2 16,16,4 16,16,8 32,32,2 32,32,4 32,32,8 \
  64,64,2 64,64,4 64,64,8 | xargs -P "${PARALLEL:-1}" -I{} bash -c 'cell {}'
