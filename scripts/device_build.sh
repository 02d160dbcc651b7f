#!/usr/bin/env bash
# Run ON THE GPU MACHINE (bare image, no registry): unpacks the carried .deps/debs into the prefix
# .deps/prefix (dpkg -x, never into /), then configures and builds moefin for sm_90 into
# build-device, with the released FlashInfer kernels when device_prepare.sh sent their files
# (.deps/gpu/flashinfer). Prints the environment line to source before running the binary.
#   device call:  scripts/device_build.sh && <your commands>      (carry: .deps)
# MOEFIN_BUILD_TARGETS limits the build to some targets.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$PWD/.deps/prefix
if [[ ! -f $prefix/.unpacked ]]; then
  mkdir -p "$prefix"
  for deb in .deps/debs/*.deb; do dpkg -x "$deb" "$prefix"; done
  touch "$prefix/.unpacked"
fi
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The commit device_prepare.sh recorded, for every result file's git_commit (the tree here may
# sit in a checkout of another commit).
[[ -f .deps/git_commit ]] && export MOEFIN_GIT_COMMIT=$(cat .deps/git_commit)
build=${MOEFIN_BUILD_DIR:-build-device}
flashinfer=()
[[ -f .deps/gpu/flashinfer/MANIFEST ]] && flashinfer=(-DMOEFIN_FLASHINFER_ROOT="$PWD/.deps/gpu/flashinfer")
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix/usr" \
    -DCMAKE_CUDA_ARCHITECTURES="${MOEFIN_CUDA_ARCHS:-90}" \
    -DCMAKE_POLICY_VERSION_MINIMUM=3.5 \
    -DCMAKE_BUILD_RPATH="$prefix/usr/lib/x86_64-linux-gnu" "${flashinfer[@]}" \
    ${MOEFIN_CMAKE_ARGS:-} > "$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
fi
# MOEFIN_BUILD_TARGETS (space-separated) builds only those targets, e.g. "moefin test_decode_gpu".
targets=()
for t in ${MOEFIN_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j"$(nproc)" "${targets[@]}" > "$build.build.log" 2>&1 ||
  { tail -60 "$build.build.log"; exit 1; }
echo "device_build: built $build/moefin"
