# Sourced by the experiment scripts: the binary they run, and a pool of background jobs.
# shellcheck shell=bash

bin=${STRUCTDIFF:-build/src/structdiff}

# parse_options "--minutes --train-steps" "$@": each "--NAME VALUE" sets the variable NAME (dashes
# as underscores), whose default the script has set; an unknown option or one without a value
# exits 2. What follows the options is left in the array `arguments`.
parse_options() {
  local known=" $1 "
  shift
  while [[ $# -gt 0 && $1 == --* ]]; do
    [[ $known == *" $1 "* ]] || { echo "unknown option $1; the options are:$known" >&2; exit 2; }
    [[ $# -ge 2 ]] || { echo "$1 needs a value" >&2; exit 2; }
    local name=${1#--}
    printf -v "${name//-/_}" '%s' "$2"
    shift 2
  done
  arguments=("$@")
}
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
