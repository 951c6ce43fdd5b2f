# Sourced by the experiment scripts: the binary they run, and a pool of background jobs.
# shellcheck shell=bash

bin=${STRUCTDIFF:-build/src/structdiff}
# Runs share the machine: idle OpenMP threads must sleep, not spin.
export OMP_WAIT_POLICY=PASSIVE

pool_size=1
pool_running=0
# pool_start P: at most P jobs at once from here on.
pool_start() {
  pool_size=$1
  pool_running=0
}
# pool_run COMMAND...: runs COMMAND in the background, first waiting for a job to end while the
# pool is full (a failed job stops the script, as under set -e).
pool_run() {
  "$@" &
  pool_running=$((pool_running + 1))
  if ((pool_running >= pool_size)); then
    wait -n
    pool_running=$((pool_running - 1))
  fi
}
