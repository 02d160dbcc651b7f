#!/usr/bin/env bash
# Every test on a fresh machine: set up, build, the C++ suites (CTest: labels unit and gpu; gpu
# tests report "Skipped" without a GPU) and the Python suites (pytest, notebooks included).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${MOEFIN_BUILD_DIR:-build}
(cd "$build" && ctest --output-on-failure -j"${MOEFIN_JOBS:-2}")
export MOEFIN_BINARY="$PWD/$build/moefin"
.venv/bin/python -m pytest -q
