#!/usr/bin/env bash
# Table 4 of the UNN paper on the committed UD treebanks: one parser per treebank and k = 1..5
# (seed 0, the parse task's UD defaults), each evaluated on its test split at its best dev epoch.
# Writes OUT_DIR/<treebank>-k<k>.{pt,out,json}; a rerun skips the cells whose JSON exists and
# evaluates without training those whose model file exists (written only when training ends).
# Then `python3 scripts/unn_ud_summary.py OUT_DIR` prints the tables beside the paper's.
# Usage: scripts/unn_ud_table4.sh [--treebanks "T ..."] [--iterations "K ..."] [--threads T] OUT_DIR
set -euo pipefail
treebanks="en_partut te_mtg hu_szeged af_afribooms"
iterations="1 2 3 4 5"
threads=1
source "$(dirname "$0")/lib/experiments.sh"
parse_options "--treebanks --iterations --threads" "$@"
out=${arguments[0]:?OUT_DIR missing; usage at the top of $0}
mkdir -p "$out"
for treebank in $treebanks; do
  for k in $iterations; do
    cell="$out/$treebank-k$k"
    [[ -f "$cell.json" ]] && continue
    if [[ ! -f "$cell.pt" ]]; then
      "$bin" --threads "$threads" --seed 0 unn train --task parse --treebank "$treebank" \
        --iterations "$k" --out "$cell.pt" > "$cell.out" 2>&1
    fi
    "$bin" --threads "$threads" unn eval --model "$cell.pt" --json "$cell.json" >> "$cell.out"
  done
done
