#!/usr/bin/env bash
# Run HERE (a Debian machine with a registry) before each GPU-machine call: downloads the Debian
# packages the GPU machine lacks (Kokkos, compiled Boost libraries and their headers,
# nlohmann-json) into .deps/debs, and records the commit being sent in .deps/git_commit (the GPU
# machine gets the working tree without .git). .deps is git-ignored and travels through the
# device tool's `carry` list; scripts/device_build.sh unpacks it there. Idempotent.
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
commit=$(git rev-parse --short=12 HEAD)
git diff --quiet HEAD -- 2>/dev/null || commit="$commit-dirty"
echo "$commit" > .deps/git_commit
echo "device_prepare: $(du -sh .deps | cut -f1) in .deps, commit $commit"
