#!/usr/bin/env bash
# The released FlashInfer kernels on the GPU machine, from the repository root (carry: .deps,
# after scripts/fetch_released.sh and scripts/device_prepare.sh ran here: they put the few MB of
# released sources and headers the build compiles into .deps/gpu/flashinfer). Everything lands
# in $OUT (3 files):
#   released_log.txt       everything printed, a "[released Ns]" line per step, the summary last
#   released_build.txt     moefin info --check; registers, spills and shared memory of every
#                          released kernel as built for sm_90a (cuobjdump --dump-resource-usage,
#                          from .deps/tools/bin); the adapter's host test
#   released_gpu_test.txt  test_flashinfer_gpu at --log_level=message: each released finalize
#                          kernel (fi_scalar, fi_vecload, fi_small_batch, fi_deepseek_fp8,
#                          fi_dispatch) against the Kokkos reference on poisoned outputs with PDL
#                          on and off, the largest error per kernel, the dispatcher's choice,
#                          graph capture
# Takes about 4-5 minutes: the build ~3-4 (the released dev-kernel unit is the longest, about
# 1.5 min on 16 cores), the tests under 1. RELEASED_BUDGET_S (default 540) bounds the whole call;
# a step that no longer fits is skipped with a line saying so.
set -uo pipefail
cd "$(dirname "$0")/../.."
: "${OUT:?set OUT to the folder whose files come back}"
budget=${RELEASED_BUDGET_S:-540}
mkdir -p "$OUT"
log=$OUT/released_log.txt
info=$OUT/released_build.txt
gpu=$OUT/released_gpu_test.txt
SECONDS=0
say() { echo "[released ${SECONDS}s] $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }

say "start (budget ${budget}s)"
if [[ ! -f .deps/gpu/flashinfer/MANIFEST ]]; then
  say "no .deps/gpu/flashinfer: run scripts/fetch_released.sh and scripts/device_prepare.sh" \
    "on the set-up machine, then carry .deps"
  exit 1
fi
say "released files carried: $(wc -l < .deps/gpu/flashinfer/MANIFEST)"
# ON: a missing or broken released build fails here instead of skipping the adapter's tests.
export MOEFIN_CMAKE_ARGS="-DMOEFIN_WITH_FLASHINFER=ON ${MOEFIN_CMAKE_ARGS:-}"
if ! scripts/device_build.sh >>"$log" 2>&1; then
  say "build failed"
  tail -60 "$log"
  exit 1
fi
say "built"
prefix=$PWD/.deps/prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
build=${MOEFIN_BUILD_DIR:-build-device}

{
  echo "== moefin info --check"
  "$build/moefin" info --check
  echo "== released kernels as built (sm_90a): registers, spills, shared memory"
  obj=$(find "$build" -name 'flashinfer_dispatch.cu.o' | head -1)
  if [[ -x .deps/tools/bin/cuobjdump && -n $obj ]]; then
    # One line per bf16 instantiation without a second input: kernel<TypeExpW, unroll, 2nd, pdl>.
    demangle() { if command -v c++filt >/dev/null; then c++filt; else cat; fi; }
    .deps/tools/bin/cuobjdump --dump-resource-usage "$obj" 2>&1 |
      awk '/Function/ {name = $2} /REG:/ {print name, $1, $2, $3, $4}' |
      grep -E 'KernelParamsIN7cutlass10bfloat16_t' | demangle |
      sed -E 's/^void moe::dev::[a-z]+::([A-Za-z]+)<.*\(moe::dev::[a-z]+::KernelParams<cutlass::bfloat16_t, ([^)]*)>\):/\1<\2>:/' |
      grep -v ', true, ' | sort -u
  else
    echo "cuobjdump (.deps/tools/bin) or the object is missing"
  fi
  echo "== test_flashinfer_adapter"
  "$build/tests/test_flashinfer_adapter" --log_level=test_suite 2>&1 | tail -20
} >"$info" 2>&1
say "build facts: $(grep -cE 'REG' "$info") kernels listed"

if (($(left) > 60)); then
  say "test_flashinfer_gpu (limit $(($(left) - 30))s)"
  timeout --signal=INT $(($(left) - 30)) "$build/tests/test_flashinfer_gpu" --log_level=message \
    >"$gpu" 2>&1
  say "test_flashinfer_gpu: exit $?"
else
  say "test_flashinfer_gpu: skipped, $(left)s left"
fi

say "summary:"
{
  grep -E "^running on|^max error|No errors detected|failure|error:|SKIPPED" "$gpu" 2>/dev/null |
    head -20
  tail -3 "$info"
} | tee -a "$log"
say "done"
