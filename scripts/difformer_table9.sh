#!/usr/bin/env bash
# DIFFormer's Table 9 (training time per epoch and training memory) on the committed citation
# graphs: GCN, GAT-like, DIFFormer-s and DIFFormer-a (and the MLP), one run each on the authors'
# split, one thread, on an otherwise idle machine. Each cell's JSON holds the run's seconds and
# peak_tensor_mb (CPU tensor memory that training allocated beyond the data and the model). The
# baselines run at tau 1 with ReLU, one of Table 2's grid settings
# (docs/results/difformer-citation/table2.md); their time per epoch hardly depends on either.
# scripts/difformer_table9_summary.py prints the table.
# Usage: scripts/difformer_table9.sh [--datasets "cora citeseer"] [--epochs 40] OUT_DIR
set -euo pipefail
datasets="cora citeseer"
epochs=40
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--datasets --epochs" "$@"
out=${arguments[0]:?OUT_DIR missing; usage at the top of $0}
mkdir -p "$out"

cell() {  # cell NAME ARGS...: one run, skipped when its JSON exists
  local name=$1
  shift
  [[ -s $out/$name.json ]] && return 0
  "$bin" --threads 1 --seed 0 difformer train --runs 1 --split authors --no-progress \
    --epochs "$epochs" --json "$out/$name.json" "$@" > "$out/$name.txt" 2>&1
}

for dataset in $datasets; do
  baseline=(--hidden 64 --dropout 0.5 --lr 0.01 --weight-decay 5e-4 --tau 1 --activation)
  cell "$dataset-mlp" --dataset "$dataset" --architecture mlp "${baseline[@]}"
  cell "$dataset-gcn" --dataset "$dataset" --architecture gcn "${baseline[@]}"
  cell "$dataset-gat" --dataset "$dataset" --architecture gat "${baseline[@]}"
  cell "$dataset-difformer-s" --dataset "$dataset" --kernel simple
  cell "$dataset-difformer-a" --dataset "$dataset" --kernel sigmoid
done
