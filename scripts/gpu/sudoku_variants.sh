#!/usr/bin/env bash
# On a GPU machine, in one call of the device tool: trains GSDM Sudoku variants side by side on the
# one GPU, each one change away from the shipped recipe (issue 19's "one change at a time"), for
# the same wall-clock, then evaluates every model on the same puzzles. Results in $OUT/variants.
#
# The learning rate decays (cosine) to zero at about the last step a run will reach.
#
# Usage: [SET=1|2] BUDGET=SECONDS scripts/gpu/sudoku_variants.sh   (B=binary skips the build; DEVICE=cpu,
#        SCALE="--dim 16 --blocks 1 --heads 2" and short budgets give a smoke test here)
set -uo pipefail
R=${OUT:-/tmp/out}/variants; mkdir -p "$R"
START=$(date +%s)
END=$(( START + ${BUDGET:-570} ))
EVAL_SECONDS=${EVAL_SECONDS:-75}   # kept at the end for the evaluations and the archive
DEVICE=${DEVICE:-cuda}
COUNT=${COUNT:-300}
if [ -z "${B:-}" ]; then
  TARGETS=structdiff RES=$R scripts/gpu/build.sh build-cuda 240 || exit 1
  B=build-cuda/src/structdiff
fi
export OMP_WAIT_POLICY=PASSIVE
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader > "$R/gpu.txt" 2>&1

# name | arguments on top of the shipped recipe | steps/s of each, eight side by side on the H200.
# SET=1 ran on 2026-11-26 (docs/results/gsdm-sudoku.md, "One change at a time"); SET=2 holds the
# issue's remaining changes (its rates for the new batch sizes are estimates).
if [ "${SET:-2}" = 1 ]; then
  variants=(
    "baseline||13.6"
    "group-norm|--norm group|13.6"
    "unscaled|--attention-scaling none|13.6"
    "plain-head|--output-head plain|13.6"
    "ee|--embedding EE|13.6"
    "reference|--norm group --attention-scaling none --output-head plain|13.5"
    "batch256|--batch 256 --lr 6e-4|7.7"
    "dim256|--dim 256|11.5"
  )
else
  variants=(
    "baseline||13.6"
    "observed-init|--observed-embedding-init 1|13.6"
    "time-swish|--time-path swish|13.6"
    "cosine-schedule|--noise-schedule cosine|13.6"
    "lr1e-3|--lr 1e-3|13.6"
    "lr1e-4|--lr 1e-4|13.6"
    "batch128|--batch 128 --lr 6e-4|10"
    "batch256-lr3e-4|--batch 256 --lr 3e-4|7.7"
  )
fi
recipe() {  # the shipped recipe, with the variant's arguments taking the place of the defaults
  local extra=$1 dim="--dim 128" batch="--batch 32" lr="--lr 3e-4"
  [[ $extra == *--dim* ]] && dim=""
  [[ $extra == *--batch* ]] && batch=""
  [[ $extra == *--lr* ]] && lr=""
  echo "${SCALE:---blocks 6 --heads 8} $dim $batch $lr $extra --size 9 --ema 0.999 --lr-decay cosine"
}
train() {  # name extra steps minutes
  local name=$1 extra=$2 steps=$3 minutes=$4
  $B --device "$DEVICE" --threads 1 --seed 0 sudoku train $(recipe "$extra") \
    --train-steps "$steps" --max-minutes "$minutes" --validate-every 1000 --validation-examples 32 \
    --log "$R/$name.jsonl" --out "$R/$name.pt" >> "$R/$name.txt" 2>&1
}
# One leg per run: resuming a checkpoint crashes the CUDA build (docs/results/gpu.md), so each
# run's --train-steps comes from its steps/s, measured on the H200 with these eight side by side.
left=$(( END - $(date +%s) - EVAL_SECONDS ))
for v in "${variants[@]}"; do
  IFS='|' read -r name extra rate <<< "$v"
  steps=$(awk "BEGIN{print int($rate * $left * 0.94)}")
  echo "$name: --train-steps $steps in $left s"
  train "$name" "$extra" "$steps" "$(awk "BEGIN{print $left / 60}")" &
done
wait
echo "training done after $(( $(date +%s) - START )) s"
for v in "${variants[@]}"; do
  name=${v%%|*}
  tail -n 2 "$R/$name.txt"
  timeout $(( END - $(date +%s) > 20 ? END - $(date +%s) - 10 : 10 )) \
    $B --device "$DEVICE" --threads 1 --seed 1 sudoku eval --model "$R/$name.pt" --count "$COUNT" \
    --diversity-samples 32 --json "$R/$name-eval.json" > "$R/$name-eval.txt" 2>&1 &
done
wait
grep -H "" "$R"/*-eval.txt | grep -E "valid|diversity"
# What comes back: one archive of logs and evaluations, and the three models that solve the most
# unique puzzles with 26-45 givens (the device tool returns at most 8 files of 16 MiB).
python3 - "$R" <<'PY' > "$R/best.txt"
import json, pathlib, sys
scores = {}
for f in pathlib.Path(sys.argv[1]).glob("*-eval.json"):
    rows = {r["setting"]: r for r in json.loads(f.read_text())["rows"]}
    row = rows.get("unique, 26-45 givens", {})
    scores[f.name[:-len("-eval.json")]] = (row.get("valid", -1), -row.get("violated_fraction", 1))
for name, score in sorted(scores.items(), key=lambda kv: kv[1], reverse=True):
    print(name, *score)
PY
cat "$R/best.txt"
for name in $(head -3 "$R/best.txt" | cut -d' ' -f1); do cp "$R/$name.pt" "${OUT:-/tmp/out}/sudoku9-$name.pt"; done
tar czf "${OUT:-/tmp/out}/variants.tgz" -C "$R/.." --exclude='*.pt' variants && rm -rf "$R"
echo "all done after $(( $(date +%s) - START )) s"
