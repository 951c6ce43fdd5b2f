#!/usr/bin/env bash
# On a GPU machine, in one call of the device tool (docs/results/gpu.md has the call): build
# against PyTorch's CUDA libtorch, the whole test suite, the GPU benchmarks, short GSDM Sudoku and
# Tracformer trainings. Everything lands in $OUT/res.tgz.
# Usage: BUDGET=SECONDS scripts/gpu/check.sh   (carry .devdeps and data/kjv)
set -uo pipefail
export RES=/tmp/res; mkdir -p $RES
END=$(( $(date +%s) + ${BUDGET:-540} ))
# step CAP CMD...: runs CMD with at most CAP seconds, never past the deadline.
step() {
  local cap=$1; shift
  local left=$(( END - $(date +%s) )); local t=$(( left < cap ? left : cap ))
  if [ "$t" -lt 15 ]; then echo "SKIPPED (no time): $*"; return 99; fi
  local s=$(date +%s); timeout -k 5 "$t" "$@"; local rc=$?
  echo "[rc=$rc in $(( $(date +%s) - s )) s] $*"; return $rc
}
finish() { tar czf "$OUT/res.tgz" -C /tmp res; exit "${1:-0}"; }
scripts/gpu/build.sh build-cuda "${BUILD_LIMIT:-300}"; echo "build rc=$?"
cat $RES/probe.txt; grep -E 'structdiff:' $RES/configure.log
B=build-cuda/src/structdiff
[ -x $B ] || finish 1
export OMP_WAIT_POLICY=PASSIVE
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,driver_version --format=csv,noheader | tee $RES/gpu.txt
step 150 ctest --test-dir build-cuda -j12 --timeout 120 --output-on-failure > $RES/ctest.log 2>&1
grep -E 'tests passed|\(Failed\)|\(SEGFAULT\)|Timeout|Not Run' $RES/ctest.log | head -40
# The GPU images' toolchain links libstdc++ statically; RuntimeLinking.* show where
# std::filesystem binds (docs/results/gpu.md, "Third lease"). A crash left gets a backtrace
# where the image has gdb.
grep -E 'RuntimeLinking' $RES/ctest.log
crashed=$(grep -m1 -E 'Exception: SegFault' $RES/ctest.log | sed -E 's/.*Test +#[0-9]+: ([^ ]+) .*/\1/')
if [ -n "$crashed" ]; then
  binary=$(ctest --test-dir build-cuda -N -V -R "^${crashed}\$" | sed -n 's/.*Test command: \([^ ]*\).*/\1/p' | head -1)
  echo "first crashed test: $crashed ($binary)"
  if command -v gdb > /dev/null; then
    step 60 gdb -batch -ex run -ex bt --args "$binary" --gtest_filter="$crashed" > $RES/backtrace.txt 2>&1
    grep -A25 SIGSEGV $RES/backtrace.txt | head -40
  else
    echo "no gdb on this image: no backtrace"
  fi
fi
step 80 $B --device cuda --seed 1 bench attention --min-time 0.2 --json $RES/bench_attention_gpu.json > $RES/bench_attention_gpu.txt 2>&1
cat $RES/bench_attention_gpu.txt
step 60 $B --device cuda --seed 1 bench gsdm --size 9 --batch 32 --attention sparse dense gather --train-steps 30 --sample-examples 64 --no-ancestral --json $RES/bench_gsdm_gpu.json > $RES/bench_gsdm_gpu.txt 2>&1
cat $RES/bench_gsdm_gpu.txt
step 60 $B --device cuda --seed 0 sudoku train --size 9 --dim 128 --blocks 6 --heads 8 --batch 32 --lr 3e-4 --ema 0.999 --train-steps 100000 --max-minutes 0.75 --validate-every 500 --validation-examples 32 --checkpoint $RES/sudoku-ckpt.pt --checkpoint-every 1000 --log $RES/sudoku_gpu_log.jsonl --out $RES/sudoku9-gpu.pt > $RES/sudoku_gpu.txt 2>&1
tail -c 1500 $RES/sudoku_gpu.txt; rm -f $RES/sudoku-ckpt.pt
step 50 $B --device cuda --seed 1 tracformer train --text data/kjv/kjv.txt --architecture tracformer --train-steps 100000 --max-minutes 0.5 --validate-every 200 --log $RES/tracformer_gpu_log.jsonl --out $RES/tracformer-gpu.pt > $RES/tracformer_gpu.txt 2>&1
tail -c 1500 $RES/tracformer_gpu.txt
finish 0
