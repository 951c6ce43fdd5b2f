#!/usr/bin/env bash
# Downloads (here, where apt works) the Debian development packages that a GPU machine's image
# lacks into .devdeps/ (kept out of git by .git/info/exclude), for scripts/gpu/build.sh to unpack
# there. Usage: scripts/gpu/fetch_deps.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .devdeps
grep -qx '/.devdeps/' .git/info/exclude 2>/dev/null || echo '/.devdeps/' >> .git/info/exclude
cd .devdeps
apt-get download libcli11-dev nlohmann-json3-dev libstb-dev libstb0 zlib1g zlib1g-dev libssl-dev \
  libssl3 libgtest-dev libgmock-dev libbenchmark-dev libbenchmark1debian libgloo-dev
ls
