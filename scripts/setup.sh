#!/usr/bin/env bash
# Installs every build and run dependency of structdiff: Debian packages (compilers, the C++
# libraries, data sets), then a Python environment in .venv with PyTorch 2 from PyPI (the pin is
# python/requirements.txt), whose libtorch the CMake build uses, and the nvcc of that PyTorch's
# CUDA release, so the CUDA kernels are compiled (nothing CUDA needs a GPU to build).
# Safe to run twice: apt-get and pip skip what is installed, pip reuses its download cache.
set -euo pipefail
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

packages=(
  build-essential cmake ninja-build ccache pkg-config python3 python3-venv
  libcli11-dev nlohmann-json3-dev libstb-dev zlib1g-dev libssl-dev
  libgtest-dev libgmock-dev libbenchmark-dev libgloo-dev
  dataset-fashion-mnist bible-kjv
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
echo "setup.sh: Debian packages installed"

# PyTorch from PyPI in .venv. Its Linux wheel is a CUDA build of several GB: pip's cache keeps the
# download for the next clone or CI run.
venv="$repo_root/.venv"
if [[ ! -x "$venv/bin/python" ]]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$repo_root/python/requirements.txt"
cuda_toolkit=$("$venv/bin/python" -m pip show cuda-toolkit 2>/dev/null | sed -n 's/^Version: //p')
if [[ -n "$cuda_toolkit" ]]; then
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "cuda-toolkit[nvcc]==$cuda_toolkit"
fi
echo "setup.sh: $("$venv/bin/python" -c 'import torch; print("torch", torch.__version__)') in $venv" \
     "${cuda_toolkit:+(nvcc of CUDA toolkit $cuda_toolkit beside it)}"

# MNIST is committed (data/mnist/, its source and checksums in data/mnist/README.md).
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
