#!/usr/bin/env bash
# Run HERE (a Debian machine with a registry): downloads the Debian packages the GPU machine lacks
# (Kokkos, compiled Boost libraries and their headers, nlohmann-json) into .deps/debs, which is
# git-ignored and travels to the GPU machine through the device tool's `carry` list.
# The GPU machine unpacks them with scripts/device_build.sh. Idempotent.
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
du -sh .
