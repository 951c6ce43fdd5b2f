#!/usr/bin/env bash
# Issue 21's measurements, side by side in one run on an otherwise idle machine.
# Usage: docs/results/performance/run.sh GSDM_REFERENCE_CHECKOUT [OUT_DIR]
# (the authors' code: `git archive` of github:plai-group/gsdm into a folder; it runs on the .venv's
# PyTorch and PyYAML from scripts/setup.sh)
set -euo pipefail
reference=${1:?the authors\' GSDM checkout}
out=${2:-docs/results/performance}
B=${STRUCTDIFF:-build/src/structdiff}
# OpenMP's default wait policy, as users run it (threads spin briefly between parallel regions);
# the experiment scripts' OMP_WAIT_POLICY=PASSIVE, kind to runs sharing the cores, costs the GSDM
# step about a quarter (performance.md).
unset OMP_WAIT_POLICY
mkdir -p "$out"
date -u +"%Y-%m-%d %H:%M UTC"
# Attention: fused kernel vs dense-with-mask vs gather, and the matmul peak of this run.
$B --threads 2 --seed 0 bench attention --workload sudoku9 gsdm-sudoku9 sudoku16 sudoku25 \
  --json "$out/attention.json"
# The kernel's tiles against its neighbour lists, same process.
build/bench/bench_kernels --benchmark_filter=sudoku --benchmark_repetitions=5 \
  --benchmark_report_aggregates_only=true --benchmark_out="$out/kernels.json" \
  --benchmark_out_format=json
# GSDM Sudoku 9x9 training step, the reference configuration (batch 32), then the authors' code;
# three rounds, alternating, since the VM's speed drifts from minute to minute.
for round in 1 2 3; do
  $B --threads 2 --seed 0 bench gsdm --attention sparse dense --train-steps 20 --no-ancestral \
    --json "$out/gsdm-$round.json"
  .venv/bin/python ../shared/tools/gsdm_ref_steps.py "$reference" 2 20
done
# The same step on two single-threaded ranks (data parallel, the loop's own timing).
$B --threads 1 --world-size 2 --seed 1 sudoku train --size 9 --batch 32 --train-steps 60 \
  --validate-every 0 --out "$out/two-ranks.pt" 2>&1 | tail -n 3
rm -f "$out/two-ranks.pt"
# Tracformer encoder: time against length, sparse vs dense, log-log slope.
$B --threads 2 --seed 0 bench tracformer --parts encoder --lengths 1024 2048 4096 8192 \
  --budget 5 --json "$out/tracformer-encoder.json"
