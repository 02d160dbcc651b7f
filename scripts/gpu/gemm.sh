#!/usr/bin/env bash
# The decode GEMM and routing runs on the GPU machine, from the repository root (carry: .deps).
# At most GEMM_BUDGET_S seconds (default 240: build ~1.5 min, tests ~0.5, routing ~0.3, GEMMs
# ~0.5-1, the torch peer up to what leaves a minute, the sanitizer and the 2-CTA run in that
# minute). In $OUT:
#   gemm_log.txt       everything printed, a line "done: PHASE" per finished phase, the GPU
#   ctest_gpu.txt      test_decode_gpu (split-K GEMM vs the Kokkos reference for bf16 and fp4,
#                      every e2m1 code and e4m3 scale dequantized exactly, the device quantizer
#                      bit for bit its host twin, the decode routing bitwise the block kernel and
#                      its layout the reference, the PDL knobs) and test_chain_kernels
#   routing_sweep.h5   moefin sweep routing: block vs fast routing, T = 1..16, the three shapes
#   gemm_sweep.h5      moefin sweep gemm: GEMM1/GEMM2 x bf16/fp4 x tiled/splitk x isolated/pdl,
#                      T = 1..16, the three shapes, checked first, with the copy and read
#                      bandwidth of the same run
#   gemm_2cta.h5       the same for splitk with two CTAs per SM (T = 1, 4, 16, isolated): whether
#                      more warps per SM help
#   layer_peer.h5      experiments/chain/peers_layer_torch.py: the PyTorch whole layer, /layer_sweep
#   sanitizer.txt      compute-sanitizer memcheck/racecheck/synccheck/initcheck over the decode
#                      GEMM (bf16, fp4, every PDL knob, weights before the wait) and the decode
#                      routing tests: exit codes and summaries
#   summary.txt        the tables of the four result files and the sanitizer's exits (printed
#                      last as well)
# Budget: GEMM_BUDGET_S seconds (default 240) for the whole call; a phase that does not fit is
# skipped and says so. GEMM_PHASES selects phases (default: build test routing gemm peer sanitize
# gemm2).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out/gemm}
budget=${GEMM_BUDGET_S:-240}
phases=${GEMM_PHASES:-build test routing gemm peer sanitize gemm2}
mkdir -p "$out"
log=$out/gemm_log.txt
touch "$log"
say() { echo "[gemm $(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
mark_done() { echo "done: $1" >> "$log"; }
# A run's --max-minutes that leaves $1 seconds of the budget to the phases after it (at least 20).
minutes_leaving() { awk "BEGIN {s = $(left) - $1; print (s < 20 ? 20 : s) / 60}"; }
prefix=$PWD/.deps/prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=build-device/moefin
say "phases: $phases; budget ${budget}s"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader >> "$log" 2>&1

# run PHASE NEED_S CMD...: runs CMD with what is left of the budget, or skips it.
run() {
  local phase=$1 need=$2
  shift 2
  if (($(left) < need)); then
    say "$phase: $(left)s left, needs ~${need}s: skipped"
    return 2
  fi
  say "$phase: $*"
  timeout --signal=INT $(($(left) - 5)) "$@" >> "$log" 2>&1
  local rc=$?
  say "$phase: exit $rc"
  return $rc
}

for phase in $phases; do
  case $phase in
  build)
    say "build: scripts/device_build.sh (moefin, test_decode_gpu, test_chain_kernels)"
    if MOEFIN_BUILD_TARGETS="moefin test_decode_gpu test_chain_kernels" \
        scripts/device_build.sh >> "$log" 2>&1; then mark_done build; else
      say "build FAILED (log above)"; exit 1; fi
    ;;
  test)
    (($(left) < 60)) && { say "test: skipped (budget)"; continue; }
    say "test: scripts/gpu_tests.sh 'test_decode_gpu|test_chain_kernels'"
    scripts/gpu_tests.sh --timeout $(($(left) - 5)) 'test_decode_gpu|test_chain_kernels' \
      > "$out/ctest_gpu.txt" 2>&1
    rc=$?
    tail -6 "$out/ctest_gpu.txt" | tee -a "$log"
    ((rc == 0)) && mark_done test
    ;;
  routing)
    run routing 30 "$bin" sweep routing --out "$out/routing_sweep.h5" && mark_done routing
    ;;
  gemm)
    run gemm 60 "$bin" sweep gemm --out "$out/gemm_sweep.h5" \
      --max-minutes "$(minutes_leaving 60)" && mark_done gemm
    ;;
  gemm2)
    run gemm2 20 "$bin" sweep gemm --out "$out/gemm_2cta.h5" --tokens 1,4,16 --variants splitk \
      --modes isolated --ctas-per-sm 2 --check-tokens none && mark_done gemm2
    ;;
  peer)
    run peer 30 env PYTHONUNBUFFERED=1 python3 experiments/chain/peers_layer_torch.py \
      --out "$out/layer_peer.h5" --max-minutes "$(minutes_leaving 60)" &&
      mark_done peer
    ;;
  sanitize)
    # Small cases, every PDL knob (fp4 with row-major and tiled scales, and lean): each tool gets
    # at most 60 s and only what the budget leaves.
    san=$out/sanitizer.txt
    : > "$san"
    sanitizer=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    cases=splitk_skips_tiles_of_no_expert_and_is_deterministic_under_every_pdl_knob
    cases+=:fast_routing_gives_the_same_arrays_under_every_pdl_knob
    clean=1
    for tool in memcheck racecheck synccheck initcheck; do
      (($(left) < 70)) && { echo "$tool: skipped (budget)" >> "$san"; clean=0; continue; }
      tlog=/tmp/gemm_sanitize_$tool.log
      echo "\$ $sanitizer --tool $tool test_decode_gpu --run_test=$cases" >> "$san"
      timeout 60 "$sanitizer" --tool "$tool" --error-exitcode 3 build-device/tests/test_decode_gpu \
        --run_test="$cases" > "$tlog" 2>&1
      rc=$?
      echo "exit $rc" >> "$san"
      ((rc == 0)) || clean=0
      grep -E "SUMMARY|Error|error|Hazard|hazard|No errors|failure|not supported" "$tlog" |
        tail -6 >> "$san"
      # Some runtimes refuse the device to the sanitizer (a gVisor machine): no use trying on.
      if grep -q "not supported" "$tlog"; then
        echo "the sanitizer refused the device" >> "$san"
        break
      fi
    done
    cat "$san" >> "$log"
    ((clean)) && mark_done sanitize
    ;;
  *)
    say "unknown phase '$phase'"
    ;;
  esac
done
{
  [[ -f $out/routing_sweep.h5 ]] && "$bin" sweep routing --print "$out/routing_sweep.h5"
  [[ -f $out/gemm_sweep.h5 ]] && "$bin" sweep gemm --print "$out/gemm_sweep.h5"
  [[ -f $out/gemm_2cta.h5 ]] && "$bin" sweep gemm --print "$out/gemm_2cta.h5"
  [[ -f $out/layer_peer.h5 ]] && "$bin" sweep layer --print "$out/layer_peer.h5" | tail -20
  [[ -f $out/sanitizer.txt ]] && grep -E "^exit|SUMMARY|refused|skipped" "$out/sanitizer.txt"
} > "$out/summary.txt" 2>&1
say "finished; done: $(sed -n 's/^done: //p' "$log" | tr '\n' ' ')"
tail -c 9000 "$out/summary.txt"
