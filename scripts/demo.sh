#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, run `moefin demo` (arguments pass through).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
exec "${MOEFIN_BUILD_DIR:-build}/moefin" demo "$@"
