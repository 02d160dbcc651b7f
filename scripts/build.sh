#!/usr/bin/env bash
# Configures (once) and builds moefin into ${MOEFIN_BUILD_DIR:-build}. CUDA is on when nvcc is
# found (a CUDA build compiles and tests every host part too, and skips GPU tests without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MOEFIN_BUILD_DIR:-build}
jobs=${MOEFIN_JOBS:-2}
if [[ ! -f $build/CMakeCache.txt ]]; then
  cuda=ON
  if ! command -v nvcc >/dev/null 2>&1 && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
    echo "build: no nvcc found, building without CUDA (host parts only)"
    cuda=OFF
  fi
  [[ -x /usr/local/cuda/bin/nvcc ]] && export CUDACXX=${CUDACXX:-/usr/local/cuda/bin/nvcc}
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DMOEFIN_ENABLE_CUDA=$cuda \
    ${MOEFIN_CMAKE_ARGS:-} >/dev/null
fi
cmake --build "$build" -j"$jobs"
