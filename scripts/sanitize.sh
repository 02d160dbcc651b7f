#!/usr/bin/env bash
# The sanitizer job: a host-only build (no CUDA) with AddressSanitizer and UndefinedBehavior-
# Sanitizer (-fno-sanitize-recover=all: the first report aborts), then every unit test in it,
# the fuzz corpus (test_fuzz) and the kill tests included. Any report fails the job: a test
# process dies, and test_fuzz counts the reports of the moefin processes it starts.
#
#   scripts/sanitize.sh            # build into ${MOEFIN_ASAN_BUILD_DIR:-build-asan}, run the tests
#
# On the 2-core CI machine the first build takes 6-14 minutes and the tests up to 13
# (docs/design/robustness.md); later runs rebuild only what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${MOEFIN_ASAN_BUILD_DIR:-build-asan}
jobs=${MOEFIN_JOBS:-2}
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer -g -O1"
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMOEFIN_ENABLE_CUDA=OFF \
    -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
fi
start=$(date +%s)
cmake --build "$build" -j"$jobs"
built=$(date +%s)
# Leaks count as reports too; a report stops the process (the tests then fail).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The kill tests check which files survive a SIGKILL, which the sanitizers do not change: 10 kills
# per writer here (the instrumented writers still run and are killed), the 50 of the issue in the
# main build.
export MOEFIN_KILLS=${MOEFIN_KILLS:-10}
(cd "$build" && ctest --output-on-failure -L unit -j"$jobs")
echo "sanitize: build $((built - start)) s, tests $(($(date +%s) - built)) s (ASan+UBSan, host only)"
