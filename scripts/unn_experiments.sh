#!/usr/bin/env bash
# The conv UNN experiments of the UNN paper (Sec. 3, Tables 2, 3, 5, 6; ../shared/notes/unn-spec.md
# section 7, rows A1-A6) on the MNIST subset of data/mnist (7,000 train / 1,000 dev / 2,000 test):
#   a1          the k = 1 forward-only baseline (gamma 0)
#   a2-kK       joint training (gamma 0.1), forward-backward in both directions, tied weights
#   a3-kK       forward-only (gamma 0), forward order, tied
#   a4-kK       forward-only, untied: one weight copy per iteration, H2 with 64 / k channels
# Every run: batch 128, Adam lr 5e-4 without decay, clipping or EMA, dropout 0.3 on H1 and H2,
# 2,750 steps (50 epochs), the best development epoch kept; one thread each, `--parallel` at once.
# Each cell writes OUT_DIR/<cell>-s<seed>/{model.pt,train.txt,train.jsonl,eval.json,grid.png,
# generate.json}; a rerun skips finished cells and resumes interrupted ones from their checkpoint.
# Usage:
#   scripts/unn_experiments.sh [--cells "a1 a2-k1 ..."] [--seeds "1 2 3"] [--parallel P] OUT_DIR
set -euo pipefail

cells="a1 a2-k1 a2-k2 a2-k3 a2-k4 a2-k5 a3-k2 a3-k3 a3-k4 a3-k5 a4-k2 a4-k3 a4-k4 a4-k5"
seeds="1"
parallel=1
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--cells --seeds --parallel" "$@"
out=${arguments[0]:?OUT_DIR missing; usage at the top of $0}

# Every training option spelled out, so a change of the tool's defaults cannot change the
# experiment (tests/test_scripts.cpp checks that these command lines still parse).
common=(--task mnist-conv --batch 128 --lr 5e-4 --lr-decay constant --warmup 0 --weight-decay 0
  --clip inf --ema 0 --dropout 0.3 --dev-size 1000 --train-steps 2750 --checkpoint-every 55)
shape() {  # CELL -> options
  local k=${1##*-k}
  case $1 in
    a1) echo --iterations 1 --schedule forward --generate-schedule forward-backward --gamma 0 ;;
    a2-k*) echo --iterations "$k" --schedule forward-backward --generate-schedule forward-backward --gamma 0.1 ;;
    a3-k*) echo --iterations "$k" --schedule forward --generate-schedule forward-backward --gamma 0 ;;
    a4-k*) echo --iterations "$k" --schedule forward --generate-schedule forward-backward --gamma 0 --untied ;;
    *) echo "unknown cell $1" >&2; exit 2 ;;
  esac
}

cell() {  # CELL SEED
  local dir=$out/$1-s$2
  mkdir -p "$dir"
  if [[ ! -f $dir/model.pt ]]; then
    # shellcheck disable=SC2046
    "$bin" --threads 1 --seed "$2" unn train $(shape "$1") "${common[@]}" \
      --checkpoint "$dir/checkpoint.pt" --resume --log "$dir/train.jsonl" --out "$dir/model.pt" \
      > "$dir/train.txt" 2>&1
  fi
  [[ -f $dir/eval.json ]] || "$bin" --threads 1 unn eval --model "$dir/model.pt" \
    --energy-images 16 --json "$dir/eval.json" > "$dir/eval.txt" 2>&1
  [[ -f $dir/generate.json ]] || "$bin" --threads 1 unn generate --model "$dir/model.pt" \
    --classifier models/classifier-mnist.pt --out "$dir/grid.png" --json "$dir/generate.json" \
    > "$dir/generate.txt" 2>&1
  echo "done: $dir"
}

pool_start "$parallel"
for seed in $seeds; do
  for c in $cells; do
    pool_run cell "$c" "$seed"
  done
done
wait
