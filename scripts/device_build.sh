#!/usr/bin/env bash
# Run ON THE GPU MACHINE (bare image, no registry): unpacks the carried .deps/debs into the prefix
# .deps/prefix (dpkg -x, never into /), then configures and builds moefin for sm_90 into
# build-device, with the released FlashInfer kernels when device_prepare.sh sent their files
# (.deps/gpu/flashinfer). Prints the environment line to source before running the binary.
#   device call:  scripts/device_build.sh && <your commands>      (carry: .deps)
# MOEFIN_BUILD_TARGETS limits the build to some targets. Prebuilt binaries carried in
# .deps/prebuilt (see below) are used instead of a build when they match the tree's commit.
set -euo pipefail
cd "$(dirname "$0")/.."
prefix=$PWD/.deps/prefix
if [[ ! -f $prefix/.unpacked ]]; then
  mkdir -p "$prefix"
  # .deps/debs_rt: the shared libraries only, for prebuilt binaries (device_prepare.sh).
  shopt -s nullglob
  for deb in .deps/debs/*.deb .deps/debs_rt/*.deb; do dpkg -x "$deb" "$prefix"; done
  shopt -u nullglob
  touch "$prefix/.unpacked"
fi
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The commit device_prepare.sh recorded, for every result file's git_commit (the tree here may
# sit in a checkout of another commit).
[[ -f .deps/git_commit ]] && export MOEFIN_GIT_COMMIT=$(cat .deps/git_commit)
build=${MOEFIN_BUILD_DIR:-build-device}
# Prebuilt binaries (.deps/prebuilt.tar.xz: scripts/device_prepare.sh with MOEFIN_PREBUILT=1
# built them for sm_90 on the set-up machine, for the commit it recorded): used as build-device when they are of this commit
# and run here, which saves the GPU machine the ~5 minutes of a cold build. Anything else (no
# prebuilt set, another commit, a binary that does not load, MOEFIN_PREBUILT=0) builds from
# source as below.
pre=.deps/prebuilt
lacks() { # the targets of MOEFIN_BUILD_TARGETS that $build does not hold
  local t
  for t in ${MOEFIN_BUILD_TARGETS:-}; do
    [[ -x $build/$t || -x $build/tests/$t ]] || echo "$t"
  done
}
# Prebuilt binaries already in place (an earlier call of this script): done, when they hold
# every target asked for.
if [[ -f $build/.prebuilt && ${MOEFIN_PREBUILT:-1} != 0 ]]; then
  mapfile -t missing < <(lacks)
  if ((${#missing[@]} == 0)); then
    echo "device_build: prebuilt binaries of $(cat "$build/.prebuilt") in $build"
    exit 0
  fi
  echo "device_build: the prebuilt set lacks ${missing[*]}; building from source"
  rm -rf "$build"
fi
if [[ ${MOEFIN_PREBUILT:-1} != 0 && -f $pre.tar.xz && ! -d $pre ]]; then
  # python3's lzma, since a bare image may lack the xz tool.
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
    "$pre.tar.xz" "$pre" || rm -rf "$pre"
fi
if [[ ${MOEFIN_PREBUILT:-1} != 0 && -f $pre/git_commit && ! -f $build/CMakeCache.txt ]]; then
  if [[ -f .deps/git_commit && $(cat "$pre/git_commit") == "$(cat .deps/git_commit)" ]]; then
    mkdir -p "$build/tests"
    cp "$pre/moefin" "$build/moefin"
    [[ -d $pre/tests ]] && cp "$pre"/tests/* "$build/tests/"
    mapfile -t missing < <(lacks)
    if ((${#missing[@]})); then
      echo "device_build: the prebuilt set lacks ${missing[*]}; building from source"
    elif "$build/moefin" info >"$build.prebuilt.log" 2>&1; then
      cp "$pre/git_commit" "$build/.prebuilt"
      echo "device_build: prebuilt binaries of $(cat "$pre/git_commit") in $build" \
        "($(ls "$build/tests" | wc -l) tests; built for $(cat "$pre/arch" 2>/dev/null))"
      exit 0
    fi
    echo "device_build: the prebuilt moefin does not run here; building from source:"
    tail -3 "$build.prebuilt.log"
  else
    echo "device_build: prebuilt binaries are of $(cat "$pre/git_commit"), the tree of" \
      "$(cat .deps/git_commit 2>/dev/null || echo '?'); building from source"
  fi
  rm -rf "$build"
fi
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
