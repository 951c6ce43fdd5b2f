#!/usr/bin/env bash
# On a GPU machine (the device tool's; see docs/results/gpu.md): unpacks the Debian packages that
# scripts/gpu/fetch_deps.sh put in .devdeps/ and builds structdiff against the image's CUDA
# libtorch (PyTorch's). Logs go to $RES (default $OUT).
# Usage: scripts/gpu/build.sh BUILD_DIR [build seconds]   (TARGETS="a b" builds only those)
set -uo pipefail
build=${1:-build-cuda}
limit=${2:-420}
log=${RES:-${OUT:-/tmp/out}}
mkdir -p "$log"
{
  uname -a; head -3 /etc/os-release; g++ --version | head -1; cmake --version | head -1
  nvcc --version | tail -2; nvidia-smi -L; nproc; command -v ccache ninja
  python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.utils.cmake_prefix_path, torch._C._GLIBCXX_USE_CXX11_ABI)'
  ls /usr/include/zlib.h /usr/include/openssl/sha.h /usr/lib/x86_64-linux-gnu/libcrypto.so* 2>&1
} > "$log/probe.txt" 2>&1
mkdir -p /tmp/deps
for f in .devdeps/*.deb; do dpkg -x "$f" /tmp/deps; done
ln -sf /tmp/deps/lib/x86_64-linux-gnu/libz.so.1.2.13 /tmp/deps/usr/lib/x86_64-linux-gnu/libz.so
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)')
export CUDACXX=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
cmake -S . -B "$build" -G Ninja -DCMAKE_PREFIX_PATH="$torch_prefix;/tmp/deps/usr" \
  -DOPENSSL_ROOT_DIR=/tmp/deps/usr -DZLIB_ROOT=/tmp/deps/usr -DSTB_INCLUDE_DIR=/tmp/deps/usr/include/stb \
  ${CMAKE_EXTRA:-} > "$log/configure.log" 2>&1
echo "configure rc=$?" | tee -a "$log/configure.log"
start=$(date +%s)
timeout "$limit" cmake --build "$build" -j"$(nproc)" ${TARGETS:+--target $TARGETS} -- -k 0 > "$log/build.log" 2>&1
rc=$?
echo "build rc=$rc in $(( $(date +%s) - start )) s" | tee -a "$log/build.log"
grep -E 'error|FAILED' "$log/build.log" | head -60
exit $rc
