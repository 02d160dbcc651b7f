#!/usr/bin/env bash
# The released FlashInfer kernels on the GPU machine, from the repository root (carry: .deps,
# after scripts/fetch_released.sh and scripts/device_prepare.sh ran here: they put the few MB of
# released sources and headers the build compiles into .deps/gpu/flashinfer). Everything lands
# in $OUT (6 files):
#   released_log.txt       everything printed, a "[released Ns]" line per step, the summary last
#   released_build.txt     moefin info --check; registers, spills and shared memory of every
#                          released kernel as built for sm_90a (cuobjdump --dump-resource-usage,
#                          from .deps/tools/bin); the adapter's host test
#   released_gpu_test.txt  test_flashinfer_gpu at --log_level=message: each released finalize
#                          kernel (fi_scalar, fi_vecload, fi_small_batch, fi_deepseek_fp8,
#                          fi_dispatch) against the Kokkos reference on poisoned outputs with PDL
#                          on and off, the largest error per kernel, the dispatcher's choice,
#                          graph capture
#   released_check.h5      moefin check finalize of the released variants (fi_scalar,
#                          fi_small_batch, fi_vecload, fi_dispatch) beside moefin's scalar,
#                          small_batch, vecload over the seed's grid (4608 configurations, about
#                          70 s) against the Kokkos reference (/finalize_check; at most 2 min)
#   released_sweep.h5      moefin sweep finalize of moefin's and the released variants in the
#                          same interleaved rounds, modes a, b, c, L2 hot (/finalize_sweep):
#                          the seed's grid (H 1024 ... 7168 or $RELEASED_SWEEP_HIDDEN, every
#                          top-K, the regime's token counts, bf16 and fp32 weights: 1152 shapes
#                          x 6 variants, about 1.5 min (moefin's 6-variant sweep of the same
#                          grid took 87 s on the H200); at most what is left of the budget (it
#                          goes H by H, stops cleanly and says "incomplete")
#   released_table.txt     moefin sweep finalize --print of it: the seed table for moefin's and
#                          the released kernels (fi_small_batch vs fi_scalar), the ablation, and
#                          the faithfulness (scalar / fi_scalar, small_batch / fi_small_batch,
#                          vecload / fi_vecload per mode and top-K)
# Takes about 7-8 minutes (one call): the build ~3-4 (the released dev-kernel unit is the
# longest, about 1.5 min on 16 cores; seconds when build-device is current), the tests under 1,
# the check about 1.2, the sweep about 1.5. RELEASED_BUDGET_S (default 540) bounds the whole call; a step that
# no longer fits is skipped with a line saying so. The released variants are in this build's
# registry (the package is there), so scripts/gpu/finalize.sh on the same build also runs them
# in its default check and sweep lists.
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
  [[ -z $obj ]] && obj=$build/moefin # prebuilt binaries: the same kernels, in the executable
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
  limit=$(($(left) - 30))
  ((limit > 150)) && limit=150 # it takes under a minute; the rest is the check's and the sweep's
  say "test_flashinfer_gpu (limit ${limit}s)"
  timeout --signal=INT "$limit" "$build/tests/test_flashinfer_gpu" --log_level=message \
    >"$gpu" 2>&1
  say "test_flashinfer_gpu: exit $?"
else
  say "test_flashinfer_gpu: skipped, $(left)s left"
fi

bin=$build/moefin
check=$OUT/released_check.h5
sweep=$OUT/released_sweep.h5
table=$OUT/released_table.txt
released=fi_scalar,fi_small_batch,fi_vecload
moefin_roles=${RELEASED_MOEFIN_VARIANTS:-scalar,small_batch,vecload} # moefin variants timed beside them
# Minutes for a step that leaves $2 seconds for what follows, at most $1 minutes.
minutes_for() {
  awk -v cap="$1" -v s="$(($(left) - $2))" 'BEGIN { m = s / 60; if (m > cap) m = cap;
    printf "%.2f", m }'
}
enough() { awk -v m="$1" 'BEGIN { exit !(m >= 0.5) }'; }

m=$(minutes_for 2 120)
if enough "$m"; then
  say "check finalize ($m min)"
  "$bin" check finalize --variants "$released,fi_dispatch,$moefin_roles" --max-minutes "$m" \
    --out "$check" >>"$log" 2>&1
  rc=$?
  say "check finalize: exit $rc ($(grep -h -E '^(check finalize:|incomplete)' "$log" | tail -1))"
else
  say "check finalize: skipped, $(left)s left"
fi

m=$(minutes_for 60 20)
if enough "$m"; then
  say "sweep finalize ($m min)"
  hidden=()
  [[ -n ${RELEASED_SWEEP_HIDDEN:-} ]] && hidden=(--hidden "$RELEASED_SWEEP_HIDDEN")
  "$bin" sweep finalize --variants "$moefin_roles,$released" --modes a,b,c --l2 hot \
    "${hidden[@]}" --max-minutes "$m" --out "$sweep" >>"$log" 2>&1
  rc=$?
  say "sweep finalize: exit $rc ($(grep -h -E '^(wrote|incomplete)' "$log" | tail -1))"
  [[ -f $sweep ]] && "$bin" sweep finalize --print "$sweep" >"$table" 2>&1
else
  say "sweep finalize: skipped, $(left)s left"
fi

say "summary:"
{
  grep -E "^running on|^max error|No errors detected|failure|error:|SKIPPED" "$gpu" 2>/dev/null |
    head -20
  tail -3 "$info"
  grep -h -E "^(fi_|scalar|small_batch|vecload) .*[0-9]" "$log" 2>/dev/null | tail -8
  [[ -f $table ]] && grep -A12 -E "^faithfulness, .*, mode a" "$table" | head -14
  [[ -f $table ]] && grep -A12 -E "^fi_small_batch vs fi_scalar, mode a" "$table" | head -14
} | tee -a "$log"
say "done"
