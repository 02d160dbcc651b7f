#!/usr/bin/env bash
# Every test on a fresh machine: set up, build, the C++ suites (CTest: labels unit and gpu; gpu
# tests report "Skipped" without a GPU), the Python suites (pytest, notebooks included) and the
# sanitizer job (scripts/sanitize.sh: an ASan+UBSan host build running the unit tests and the
# fuzz corpus; MOEFIN_SANITIZE=0 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${MOEFIN_BUILD_DIR:-build}
(cd "$build" && ctest --output-on-failure -j"${MOEFIN_JOBS:-2}")
export MOEFIN_BINARY="$PWD/$build/moefin"
.venv/bin/python -m pytest -q
# The ASan+UBSan job (a second build and every unit test under the sanitizers, ~20 minutes on
# 2 cores) runs when MOEFIN_SANITIZE=1; CI keeps to the main build.
if [[ ${MOEFIN_SANITIZE:-0} != 0 ]]; then
  scripts/sanitize.sh
fi
