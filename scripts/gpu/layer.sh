#!/usr/bin/env bash
# The layer chain with the decode GEMMs (--weights-format bf16, fp4) on the GPU machine, from the
# repository root (carry: .deps). Binaries of build-device only (scripts/device_build.sh first;
# no ctest, test binaries called directly). At most LAYER_BUDGET_S seconds (default 300: build
# ~0-90 s, gpu tests ~30, equivalence sized to ~60, race ~20, the layer sweep what is left but
# 50 s, then the torch peer, sweep gemm and sweep routing in what remains). A phase that does
# not fit is skipped and says so; a run cut by the budget is stopped with SIGINT and keeps its
# finished rows. In $OUT (8 files; 9 with layer-nibbles, one more than a device call takes back:
# scripts/gpu/wpack.sh's sweep part packs them in one archive):
#   layer_log.txt      everything printed, "done: PHASE" per finished phase, the GPU, the
#                      equivalence sizing (routings/s of the pilot and the count it chose)
#   gpu_tests.txt      scripts/gpu_tests.sh: test_decode_gpu, test_chain_kernels,
#                      test_chain_equivalence
#   equivalence.h5     moefin equivalence, top-8 and top-22, T = 1, 2, 4, 8, 16, seed-after and
#                      safe, bf16 and fp4 (decode GEMMs): N routings per (shape, format, preset, T),
#                      N = 2000 (10,000 per shape and preset) when the pilot's rate allows, else
#                      fewer (the log says how many); output vs the Kokkos reference chain
#   race.tar           race_bf16.h5, race_fp4.h5: moefin race, all-early, metadata before the
#                      wait, 25 us delay in routing (the benchmark cell and its neighbours)
#   layer_sweep.h5     moefin sweep layer, the three seed shapes, T = 1, 8, 16, 32, 64, 128,
#                      bf16 and fp4, new vs previous finalize, seed-after vs seed-before
#   layer_sweep_nibbles.h5  (phase layer-nibbles, not a default) the fp4 rows of layer_sweep.h5
#                      again with the values as nibbles (--fp4-values nibbles; the chain's
#                      default is packed), a run of its own
#   layer_sweep_single.h5  (phase layer-single, not a default) the same with the packed values'
#                      GEMMs launched single (--fp4-gemm single; the chain's default is wide)
#   layer_peer.h5      experiments/chain/peers_layer_torch.py: the PyTorch layer, /layer_sweep
#   gemm_routing.tar   gemm_sweep.h5 (moefin sweep gemm: weight-stream bandwidth against the
#                      copy bandwidth of the same run) and routing_sweep.h5 (moefin sweep routing:
#                      block, fast and, in a build with them, the released routing kernel beside
#                      them, ratio_vs_released)
#   summary.txt        the tables (sweep layer --print with --peers, equivalence, race), printed
#                      last as well
# LAYER_PHASES selects phases (default: build test equivalence race layer peer gemm routing);
# LAYER_TOKENS the sweep's token counts. The whole layer sweep (sweep layer --list: ~220 s for
# 144 rows) does not fit beside the rest in 300 s: the default call keeps the rows it finished;
# LAYER_PHASES="build layer peer" LAYER_BUDGET_S=300 runs it alone.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out/layer}
budget=${LAYER_BUDGET_S:-300}
phases=${LAYER_PHASES:-build test equivalence race layer peer gemm routing}
tokens=${LAYER_TOKENS:-1,8,16,32,64,128}
mkdir -p "$out"
out=$(cd "$out" && pwd) # absolute: the tar calls below run in $tmp
log=$out/layer_log.txt
touch "$log"
tag=layer
# shellcheck source=scripts/gpu/phases.sh
source scripts/gpu/phases.sh
minutes_leaving() { awk "BEGIN {s = $(left) - $1; print (s < 20 ? 20 : s) / 60}"; }
tmp=$(mktemp -d)
start_log

for phase in $phases; do
  case $phase in
  build)
    say "build: scripts/device_build.sh"
    if MOEFIN_BUILD_TARGETS="moefin test_decode_gpu test_chain_kernels test_chain_equivalence" \
        scripts/device_build.sh >> "$log" 2>&1; then mark_done build; else
      say "build FAILED (log above)"; exit 1; fi
    ;;
  test)
    (($(left) < 60)) && { say "test: skipped (budget)"; continue; }
    say "test: scripts/gpu_tests.sh 'test_decode_gpu|test_chain_kernels|test_chain_equivalence'"
    scripts/gpu_tests.sh --timeout $(($(left) - 30)) \
      'test_decode_gpu|test_chain_kernels|test_chain_equivalence' > "$out/gpu_tests.txt" 2>&1
    rc=$?
    tail -6 "$out/gpu_tests.txt" | tee -a "$log"
    ((rc == 0)) && mark_done test
    ;;
  equivalence)
    # Size the run from a pilot: the slowest cell (top-22, T = 16) in bf16.
    run equivalence-pilot 15 120 "$bin" equivalence --shapes top-22 --tokens 16 --presets safe \
      --weights-format bf16 --routings 500 --out "$tmp/pilot.h5" || continue
    rate=$("$bin" equivalence --print "$tmp/pilot.h5" | awk '$1 ~ /top-22/ {print $NF}' | head -1)
    # 2 shapes x 2 formats x 2 presets x 5 token counts = 40 rows; ~60 s at the pilot's rate.
    per=$(awk -v r="${rate:-0}" 'BEGIN {n = int(r * 60 / 40 / 250) * 250;
      if (n > 2000) n = 2000; if (n < 250) n = 250; print n}')
    say "equivalence: pilot ${rate:-?} routings/s; $per routings per (shape, format, preset, T)"
    run equivalence 30 110 "$bin" equivalence --shapes top-8,top-22 --tokens 1,2,4,8,16 \
      --presets seed-after,safe --weights-format bf16,fp4 --routings "$per" \
      --out "$out/equivalence.h5" && mark_done equivalence
    ;;
  race)
    for f in bf16 fp4; do
      run "race-$f" 10 90 "$bin" race --presets all-early --meta before --delay-ns 25000 \
        --weights-format "$f" --out "$tmp/race_$f.h5" && mark_done "race-$f"
    done
    (cd "$tmp" && ls race_*.h5 > /dev/null 2>&1 && tar cf "$out/race.tar" race_*.h5)
    ;;
  layer)
    run layer 45 50 "$bin" sweep layer --tokens "$tokens" --weights-format bf16,fp4 \
      --out "$out/layer_sweep.h5" && mark_done layer
    ;;
  layer-nibbles)
    run layer-nibbles 20 45 "$bin" sweep layer --tokens "$tokens" --weights-format fp4 \
      --fp4-values nibbles --out "$out/layer_sweep_nibbles.h5" && mark_done layer-nibbles
    ;;
  layer-single)
    run layer-single 20 45 "$bin" sweep layer --tokens "$tokens" --weights-format fp4 \
      --fp4-gemm single --out "$out/layer_sweep_single.h5" && mark_done layer-single
    ;;
  peer)
    run peer 25 20 env PYTHONUNBUFFERED=1 python3 experiments/chain/peers_layer_torch.py \
      --out "$out/layer_peer.h5" --max-minutes "$(minutes_leaving 25)" && mark_done peer
    ;;
  gemm)
    run gemm 15 8 "$bin" sweep gemm --out "$tmp/gemm_sweep.h5" --max-minutes \
      "$(minutes_leaving 10)" && mark_done gemm
    ;;
  routing)
    run routing 8 0 "$bin" sweep routing --out "$tmp/routing_sweep.h5" && mark_done routing
    ;;
  *)
    say "unknown phase '$phase'"
    ;;
  esac
done
(cd "$tmp" && ls gemm_sweep.h5 routing_sweep.h5 > /dev/null 2>&1 &&
  tar cf "$out/gemm_routing.tar" $(ls gemm_sweep.h5 routing_sweep.h5 2>/dev/null))
{
  peers=()
  [[ -f $out/layer_peer.h5 ]] && peers=(--peers "$out/layer_peer.h5")
  [[ -f $out/layer_sweep.h5 ]] && "$bin" sweep layer --print "$out/layer_sweep.h5" "${peers[@]}"
  [[ -f $out/layer_sweep_nibbles.h5 ]] && "$bin" sweep layer --print "$out/layer_sweep_nibbles.h5"
  [[ -f $out/layer_sweep_single.h5 ]] && "$bin" sweep layer --print "$out/layer_sweep_single.h5"
  [[ -f $out/equivalence.h5 ]] && "$bin" equivalence --print "$out/equivalence.h5"
  for f in bf16 fp4; do
    [[ -f $tmp/race_$f.h5 ]] && { echo "race, $f weights:"; "$bin" race --print "$tmp/race_$f.h5" | tail -8; }
  done
  [[ -f $tmp/gemm_sweep.h5 ]] && "$bin" sweep gemm --print "$tmp/gemm_sweep.h5" | tail -40
  [[ -f $tmp/routing_sweep.h5 ]] && "$bin" sweep routing --print "$tmp/routing_sweep.h5"
  tail -4 "$out/gpu_tests.txt" 2>/dev/null
} > "$out/summary.txt" 2>&1
rm -rf "$tmp"
say "finished; done: $(sed -n 's/^done: //p' "$log" | tr '\n' ' ')"
tail -c 9000 "$out/summary.txt"
