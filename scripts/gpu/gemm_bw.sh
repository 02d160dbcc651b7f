#!/usr/bin/env bash
# Decode GEMM weight-stream bandwidth against the copy bandwidth (issue 17) on the GPU machine,
# from the repository root (carry: .deps). About 3-4 minutes after the build (scripts/device_build.sh:
# seconds with prebuilt binaries of this commit, ~5 minutes cold): test_decode_gpu ~30-60 s (the
# tiled-scale and lean kernels double its fp4 runs), then one `moefin sweep gemm` of ~60-120 s. Correctness first: test_decode_gpu (split-K vs the Kokkos
# reference, every forced split, bf16 and fp4, two CTAs per SM and the deep fp4 pipeline bitwise
# the default launch), and the sweep checks every GEMM configuration,
# the candidates included, against the reference at T = 1 and 4 before it times anything.
# In $OUT (4 files):
#   gemm_bw_log.txt      everything printed, "done: PHASE" per finished phase, the GPU
#   decode_gpu_test.txt  build-device/tests/test_decode_gpu
#   gemm_bw.h5           moefin sweep gemm: top-8, top-16, top-22 x GEMM1, GEMM2 x bf16, fp4 x
#                        T = 1, 2, 4, 8, 16: tiled, splitk (isolated, pdl), splitk_loads, every
#                        candidate of --candidates (kernels/gemm/decode_candidates.hpp: forced
#                        splits ks1..ks8, cta2 = two CTAs per SM, their combinations, deep =
#                        fp4 with twice the stages in flight, tscale = fp4 scales in 16 x 128
#                        tiles staged with 16-byte copies, alone, with cta2 and with lean
#                        activation loads (tscale+lean), in both modes;
#                        sk+loads+cta2 isolated) and the read floor (a plain streaming read
#                        of each launch's bytes), in the same interleaved rounds, with the copy and
#                        read bandwidth at the start and the end; /gemm_check: the checks
#   summary.txt          the sweep's tables; last, per (shape, GEMM, format) the % of the copy
#                        bandwidth of every variant/candidate at each T and the best GEMM per T
#                        (printed last as well)
# How to read it: a candidate that beats splitk in its mode at the T it targets is a policy to
# adopt (the chain keeps the current one until a measured table picks); `read` is the floor of any
# kernel reading that many bytes in this protocol (fixed launch costs included), `sk+loads+cta2`
# against `sk+cta2` is the math's share with two CTAs per SM.
# Variables: GEMM_BW_BUDGET_S (default 300) seconds for the phases after the build, each phase
# skipped when it does not fit and the sweep stopped cleanly between (shape, T) groups
# (--max-minutes); GEMM_BW_PHASES (default: build test sweep); GEMM_BW_CANDIDATES (default
# "default"); GEMM_BW_TOKENS (default 1,2,4,8,16); GEMM_BW_TILES (default 16: the routing tile
# rows, a list runs one sweep per tile into gemm_bw_tile<N>.h5); GEMM_BW_VARIANTS (default
# tiled,splitk); GEMM_BW_FORMATS (default bf16,fp4); GEMM_BW_CTAS (default 0: each variant's
# policy; --ctas-per-sm of the sweep, 2 runs every variant and candidate with two CTAs per SM);
# GEMM_BW_BIN (default build-device/moefin; the
# host dry run uses build/moefin with GEMM_BW_PHASES=sweep, which stops at "needs a CUDA device").
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-out/gemm_bw}
budget=${GEMM_BW_BUDGET_S:-300}
phases=${GEMM_BW_PHASES:-build test sweep}
candidates=${GEMM_BW_CANDIDATES:-default}
tokens=${GEMM_BW_TOKENS:-1,2,4,8,16}
tiles=${GEMM_BW_TILES:-16}
variants=${GEMM_BW_VARIANTS:-tiled,splitk}
formats=${GEMM_BW_FORMATS:-bf16,fp4}
ctas=${GEMM_BW_CTAS:-0}
mkdir -p "$out"
log=$out/gemm_bw_log.txt
touch "$log"
tag=gemm_bw
# shellcheck source=scripts/gpu/phases.sh
source scripts/gpu/phases.sh
bin=${GEMM_BW_BIN:-$bin}
say "phases: $phases; budget ${budget}s after the build; candidates: $candidates; T = $tokens"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader \
  >> "$log" 2>&1

sweep_args=(sweep gemm --shapes top-8,top-16,top-22 --tokens "$tokens" --gemms 1,2
  --formats "$formats" --variants "$variants" --modes isolated,pdl --candidates "$candidates"
  --ctas-per-sm "$ctas" --read-floor --check-tokens 1,4 --rounds 5)

for phase in $phases; do
  case $phase in
  build)
    build_phase "moefin test_decode_gpu"
    ;;
  test)
    test_phase test_decode_gpu "$out/decode_gpu_test.txt"
    ;;
  sweep)
    # One sweep per routing tile of GEMM_BW_TILES, each in its own file (gemm_bw.h5 for the
    # default tile 16 alone, else gemm_bw_tile<N>.h5), the budget shared between them.
    ntiles=$(wc -w <<< "${tiles//,/ }")
    for tile in ${tiles//,/ }; do
      file=$out/gemm_bw.h5
      [[ $tiles != 16 ]] && file=$out/gemm_bw_tile$tile.h5
      args=("${sweep_args[@]}" --tile-m "$tile")
      # The configurations and the expected GPU time first: a bad flag stops here, on any host.
      "$bin" "${args[@]}" --estimate 2>&1 | tee -a "$log"
      ((${PIPESTATUS[0]} == 0)) || { say "sweep: the flags were refused (above)"; continue; }
      (($(left) < 40)) && { say "sweep tile $tile: $(left)s left, needs ~40s: skipped"; continue; }
      minutes=$(awk "BEGIN {print ($(left) - 15) / 60 / $ntiles}")
      say "sweep: $bin ${args[*]} --max-minutes $minutes --out $file"
      timeout --signal=INT $(($(left) - 5)) "$bin" "${args[@]}" --max-minutes "$minutes" \
        --out "$file" >> "$log" 2>&1
      rc=$?
      say "sweep tile $tile: exit $rc"
      ((rc == 0)) && mark_done "sweep-tile$tile"
      ntiles=$((ntiles > 1 ? ntiles - 1 : 1))
    done
    ;;
  *)
    say "unknown phase '$phase'"
    ;;
  esac
done
{
  found=0
  for f in "$out"/gemm_bw*.h5; do
    [[ -f $f ]] || continue
    found=1
    echo "== $(basename "$f")"
    "$bin" sweep gemm --print "$f"
  done
  ((found)) || echo "no gemm_bw*.h5: the sweep did not run (gemm_bw_log.txt says why)"
  [[ -f $out/decode_gpu_test.txt ]] && { echo; echo "test_decode_gpu:"; tail -2 "$out/decode_gpu_test.txt"; }
} > "$out/summary.txt" 2>&1
say "finished; done: $(sed -n 's/^done: //p' "$log" | tr '\n' ' ')"
# Last, from the copy-fraction tables (summary.txt has them whole): per (shape, GEMM, format) the
# T header, the current splitk, the read floor and the best GEMM per T.
awk '/^weight-stream bandwidth as %/ {p = 1} p && (/^[^ ]/ || /^  (variant|splitk |read|best:)/)' \
  "$out/summary.txt" | tail -c 9000
tail -3 "$out/summary.txt" | grep -q "test_decode_gpu" && tail -3 "$out/summary.txt"
exit 0
