#!/usr/bin/env bash
# Run HERE (a Debian machine with a registry) before each GPU-machine call: downloads the Debian
# packages the GPU machine lacks (Kokkos, compiled Boost libraries and their headers,
# nlohmann-json) into .deps/debs, records the commit being sent in .deps/git_commit (the GPU
# machine gets the working tree without .git), and, when scripts/fetch_released.sh has installed
# the released FlashInfer packages, copies the files of them the build compiles (the nvcc -M
# closure of every compile command that reads them, a few MB) into .deps/gpu/flashinfer.
# .deps is git-ignored and travels through the device tool's `carry` list (its links to the
# unpacked packages travel as links, not as the ~270 MB they point to); scripts/device_build.sh
# unpacks it there. Idempotent. MOEFIN_PREBUILT=1 also carries binaries built here (below).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/debs
cd .deps/debs
pkgs=(libtrilinos-kokkos-dev libtrilinos-kokkos-13.2
      libboost1.74-dev libboost-program-options1.74-dev libboost-program-options1.74.0
      libboost-test1.74-dev libboost-test1.74.0 nlohmann-json3-dev)
need=()
for p in "${pkgs[@]}"; do
  compgen -G "${p}_*.deb" >/dev/null || need+=("$p")
done
if ((${#need[@]})); then
  apt-get download "${need[@]}"
fi
cd ../..
if [[ -e .deps/flashinfer/python/csrc && -e .deps/flashinfer/cubin/include ]]; then
  build=${MOEFIN_BUILD_DIR:-build}
  # (Re)configure only, for a current compile_commands.json; the closure needs no build.
  if [[ -f $build/CMakeCache.txt ]]; then
    cmake "$build" >/dev/null
  else
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
  fi
  python3 scripts/flashinfer_closure.py "$build" .deps/flashinfer .deps/gpu/flashinfer
else
  rm -rf .deps/gpu/flashinfer
  echo "device_prepare: released FlashInfer packages not installed (scripts/fetch_released.sh);" \
    "the GPU build leaves them out"
fi
commit=$(git rev-parse --short=12 HEAD)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
echo "$commit" > .deps/git_commit
# MOEFIN_PREBUILT=1: build moefin and the gpu tests here (sm_90, the build dir's configuration)
# and carry them, stripped, in .deps/prebuilt.tar.xz; scripts/device_build.sh then uses them instead of
# building on the GPU machine. A dirty tree is built as it is now: do not edit it between this
# and the device call. MOEFIN_PREBUILT_TARGETS="moefin test_decode_gpu ..." packs only those (each
# test binary adds about 0.8 MB to the 9 MB of the full set; a call carries at most 64 MiB with
# the tree, whose tracked files are about 51 MB): the call's MOEFIN_BUILD_TARGETS must be among them.
rm -rf .deps/prebuilt .deps/prebuilt.tar.xz
if [[ ${MOEFIN_PREBUILT:-0} == 1 ]]; then
  build=${MOEFIN_BUILD_DIR:-build}
  archs=$(sed -n 's/^CMAKE_CUDA_ARCHITECTURES:STRING=//p' "$build/CMakeCache.txt")
  [[ ,${archs//;/,}, == *,90,* || ,${archs//;/,}, == *,90a,* ]] ||
    { echo "device_prepare: $build is configured for '$archs', not sm_90" >&2; exit 1; }
  mapfile -t tests < <(scripts/gpu_tests.sh --list)
  extra=()
  [[ -n $(sed -n 's/^MOEFIN_FLASHINFER_ROOT:PATH=//p' "$build/CMakeCache.txt") ]] &&
    extra=(test_flashinfer_adapter)
  if [[ -n ${MOEFIN_PREBUILT_TARGETS:-} ]]; then
    read -r -a wanted <<< "$MOEFIN_PREBUILT_TARGETS"
    [[ " ${wanted[*]} " == *" moefin "* ]] ||
      { echo "device_prepare: MOEFIN_PREBUILT_TARGETS must name moefin" >&2; exit 1; }
    for t in "${wanted[@]}"; do
      [[ $t == moefin || " ${tests[*]} ${extra[*]} " == *" $t "* ]] ||
        { echo "device_prepare: '$t' is neither moefin nor a GPU test (scripts/gpu_tests.sh --list)" >&2; exit 1; }
    done
    tests=() extra=()
    for t in "${wanted[@]}"; do [[ $t == moefin ]] || tests+=("$t"); done
  fi
  targets=(moefin "${tests[@]}" "${extra[@]}")
  echo "device_prepare: building ${targets[*]} in $build"
  nice -n 5 cmake --build "$build" -j2 $(printf -- '--target %s ' "${targets[@]}") >/dev/null
  mkdir -p .deps/prebuilt/tests
  strip -o .deps/prebuilt/moefin "$build/moefin"
  for t in "${tests[@]}" "${extra[@]}"; do
    strip -o ".deps/prebuilt/tests/$t" "$build/tests/$t"
  done
  echo "$archs" > .deps/prebuilt/arch
  echo "$commit" > .deps/prebuilt/git_commit
  # The executables share most of their bytes (every one links the kernels): one xz stream
  # (-9: a 64 MiB window) makes ~170 MB about 8 MB, within what a device call carries.
  tar -C .deps/prebuilt -cf - . | xz -T1 -9 > .deps/prebuilt.tar.xz
  rm -rf .deps/prebuilt
  echo "device_prepare: prebuilt $(du -sh .deps/prebuilt.tar.xz | cut -f1) (xz) for $commit"
  # The prebuilt binaries need only the shared libraries: .deps/debs_rt (hard links, 1 MB)
  # carries them where the whole of .deps/debs (12 MB, mostly Boost's headers) would not fit.
  rm -rf .deps/debs_rt
  mkdir -p .deps/debs_rt
  ln -f .deps/debs/libtrilinos-kokkos-13.2_*.deb .deps/debs/libboost-program-options1.74.0_*.deb \
    .deps/debs/libboost-test1.74.0_*.deb .deps/debs_rt/
fi
echo "device_prepare: $(du -sh .deps | cut -f1) in .deps, commit $commit"
