#!/usr/bin/env bash
# Installs every build and run dependency of structdiff from Debian packages.
# Safe to run twice: apt-get skips what is already installed.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-openmp
  libcli11-dev nlohmann-json3-dev libstb-dev zlib1g-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  dataset-fashion-mnist
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
