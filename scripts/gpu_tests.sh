#!/usr/bin/env bash
# Runs the gpu-labelled test binaries of a build directory without ctest (the GPU machine may
# hold prebuilt binaries only, without CMake's test files): every build/tests/<name> whose name
# matches the extended regex PATTERN (default: every gpu test), one line per test, exit 77 counted
# as skipped (tests/CMakeLists.txt: SKIP_RETURN_CODE 77), the test's output on failure.
#   scripts/gpu_tests.sh [--build DIR] [--timeout S] [PATTERN]
#   scripts/gpu_tests.sh --list      the names of the gpu tests, one a line
# Exit status: 0 when every test that ran passed, 1 when one failed, 2 on bad usage or when no
# test matched.
set -uo pipefail
build=build-device
limit=300
pattern=
list=0
while (($#)); do
  case $1 in
  --build) build=${2:?--build needs a directory}; shift 2 ;;
  --timeout) limit=${2:?--timeout needs seconds}; shift 2 ;;
  --list) list=1; shift ;;
  -h | --help) sed -n 2,9p "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  -*) echo "gpu_tests.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  *) pattern=$1; shift ;;
  esac
done
cd "$(dirname "$0")/.."
# The gpu tests, by name, from the one place that labels them.
mapfile -t names < <(sed -nE 's/^ *moefin_test\(([a-z0-9_]+) LABEL gpu.*/\1/p' tests/CMakeLists.txt)
if ((list)); then
  printf '%s\n' "${names[@]}"
  exit 0
fi
[[ -n $pattern ]] && mapfile -t names < <(printf '%s\n' "${names[@]}" | grep -E "$pattern")
if ((${#names[@]} == 0)); then
  echo "gpu_tests.sh: no gpu test matches '${pattern}'" >&2
  exit 2
fi
passed=0 failed=0 skipped=0 missing=0
for t in "${names[@]}"; do
  exe=$build/tests/$t
  if [[ ! -x $exe ]]; then
    echo "MISSING  $t ($exe not built)"
    missing=$((missing + 1))
    continue
  fi
  out=$(mktemp)
  SECONDS=0
  timeout --signal=INT "$limit" "$exe" >"$out" 2>&1
  rc=$?
  case $rc in
  0) echo "PASSED   $t (${SECONDS}s)"; passed=$((passed + 1)) ;;
  77) echo "SKIPPED  $t: $(tail -1 "$out")"; skipped=$((skipped + 1)) ;;
  *) echo "FAILED   $t (exit $rc, ${SECONDS}s)"; tail -40 "$out"; failed=$((failed + 1)) ;;
  esac
  rm -f "$out"
done
echo "gpu tests: $passed passed, $failed failed, $skipped skipped, $missing not built"
((failed == 0 && missing == 0))
