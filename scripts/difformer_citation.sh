#!/usr/bin/env bash
# DIFFormer's Table 2 on the committed citation graphs, one JSON per cell under OUT_DIR, all on the
# authors' split (seed 123) with 5 initialisations, as the paper's ± is:
#   DIFFormer-s and DIFFormer-a with the authors' released settings (the bare --dataset defaults);
#   the baselines MLP, GCN and GAT-like (src/models/difformer.cpp: one Euler-step encoder with
#   another diffusivity) over a small grid: step size tau 0.5 or 1, with or without ReLU, hidden 64,
#   dropout 0.5, lr 0.01, weight decay 5e-4, 200 epochs. scripts/difformer_citation_summary.py
#   picks each baseline's setting by mean validation accuracy, never by test accuracy.
# A rerun skips the cells whose JSON exists, so an interrupted run resumes.
# Usage: scripts/difformer_citation.sh [--datasets "cora citeseer"] [--models "M ..."] OUT_DIR
#   models: difformer-s difformer-a mlp gcn gat (default: all)
set -euo pipefail
datasets="cora citeseer"
models="mlp gcn gat difformer-s difformer-a"
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--datasets --models" "$@"
out=${arguments[0]:?OUT_DIR missing; usage at the top of $0}
mkdir -p "$out"

cell() {  # cell NAME ARGS...: one 5-run cell, skipped when its JSON exists
  local name=$1
  shift
  [[ -s $out/$name.json ]] && return 0
  echo "$name" >&2
  "$bin" --threads 1 --seed 0 difformer train --runs 5 --split authors --no-progress \
    --json "$out/$name.json" "$@" > "$out/$name.txt" 2>&1
}

for dataset in $datasets; do
  for model in $models; do
    case $model in
      difformer-s) cell "$dataset-difformer-s" --dataset "$dataset" --kernel simple ;;
      difformer-a) cell "$dataset-difformer-a" --dataset "$dataset" --kernel sigmoid ;;
      mlp | gcn | gat)
        for tau in 0.5 1; do
          for relu in relu linear; do
            activation=()
            [[ $relu == relu ]] && activation=(--activation)
            cell "$dataset-$model-tau$tau-$relu" --dataset "$dataset" --architecture "$model" \
              --hidden 64 --dropout 0.5 --lr 0.01 --weight-decay 5e-4 --epochs 200 --tau "$tau" \
              "${activation[@]}"
          done
        done ;;
      *) echo "unknown model $model; the models are: mlp gcn gat difformer-s difformer-a" >&2; exit 2 ;;
    esac
  done
done
