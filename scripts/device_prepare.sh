#!/usr/bin/env bash
# Run HERE (a Debian machine with a registry) before each GPU-machine call: downloads the Debian
# packages the GPU machine lacks (Kokkos, compiled Boost libraries and their headers,
# nlohmann-json) into .deps/debs, records the commit being sent in .deps/git_commit (the GPU
# machine gets the working tree without .git), and, when scripts/fetch_released.sh has installed
# the released FlashInfer packages, copies the files of them the build compiles (the nvcc -M
# closure of every compile command that reads them, a few MB) into .deps/gpu/flashinfer.
# .deps is git-ignored and travels through the device tool's `carry` list (its links to the
# unpacked packages travel as links, not as the ~270 MB they point to); scripts/device_build.sh
# unpacks it there. Idempotent.
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
echo "device_prepare: $(du -sh .deps | cut -f1) in .deps, commit $commit"
