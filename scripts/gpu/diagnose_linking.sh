#!/usr/bin/env bash
# Why std::filesystem bound to libtorch on the GPU image: builds one test program there, then shows
# its dependencies, link line, bindings and the exported symbols (docs/results/gpu.md, "Third lease").
# Usage: device tool run, carry [".devdeps"]: bash scripts/gpu/diagnose_linking.sh
set -uo pipefail
export RES=$OUT; TARGETS=test_runtime_linking scripts/gpu/build.sh build-cuda 200 > $OUT/build.txt 2>&1; echo "build rc=$?"
T=build-cuda/tests/test_runtime_linking
ls -la $T
readelf -d $T | grep -E 'NEEDED|RUNPATH|RPATH'
cmake --build build-cuda --target test_runtime_linking -v -- -t commands test_runtime_linking 2>/dev/null | grep -E ' -o tests/test_runtime_linking' | head -2 | cut -c1-3000
$T 2>&1 | tail -12
LD_DEBUG=bindings $T --gtest_filter='*Binds*' 2>&1 | grep -E 'split_cmpts|remove_all' | head -6
LD_DEBUG=libs $T --gtest_filter='*Binds*' 2>&1 | grep -E 'calling init|find library' | head -20
ldd $T | head -12
g++ -dumpspecs | grep -n 'as-needed' | head -3
readelf -V $(ldd $T | awk '/libstdc\+\+/{print $3}') | grep -c GLIBCXX
nm -D --defined-only $(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib/libtorch_cpu.so"))') | grep -c _ZNSt10filesystem
nm -D --with-symbol-versions $(python3 -c 'import torch,os;print(os.path.join(os.path.dirname(torch.__file__),"lib/libtorch_cpu.so"))') | grep _M_split_cmpts | head -3
nm -D --with-symbol-versions $T | grep -E 'split_cmpts|remove_all' | head
