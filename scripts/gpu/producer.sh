#!/usr/bin/env bash
# Mode b of `sweep finalize` with the producer of docs/design/experiments.md (launched with the PDL
# attribute, waiting at entry, as GEMM2) on the GPU machine, from the repository root with .deps
# carried: what the producer changes, then small_batch_v2's geometry candidates in mode b for its
# policy table (mode a does not involve the producer: the table keeps the committed candidate
# files' mode a). In $OUT:
#   producer_log.txt                everything printed, the summary (last)
#   producer_pdl_wait.h5            a small grid (H 2048, 5120, 7168; T 1, 4, 16, 64; K 8, 22, 32;
#   producer_plain.h5               bf16) in mode b with --producer pdl-wait and with --producer
#                                   plain (the protocol before 2026-12-04), same variants: the
#                                   seed's kernels with and without their early trigger,
#                                   small_batch_v2 and its late-trigger ablation, the released
#                                   small-batch kernel
#   producer_candidates.h5          every small_batch_v2 geometry candidate (entry trigger, both
#                                   lane layouts; then the exit trigger) beside fi_small_batch in
#                                   mode b, T = 3, 5, 6, 7
#   producer_candidates_regime.h5   the same over the regime's token counts (T = 1, 2, 4 .. 256 and
#                                   each H's last T)
#   producer_candidates_a*.h5       with PRODUCER_CAND_MODE=a: the same two in mode a
# Variables: PRODUCER_BUDGET_S (seconds of runs after the build, default 240; a phase that does not
# fit is skipped with a line in the log); PRODUCER_SKIP (comma list of phases to leave out:
# compare, candidates); PRODUCER_CAND_MODE (the candidates' mode, default b; with a the files are
# producer_candidates_a*.h5 and no exit-trigger pass runs), PRODUCER_CAND_ROUNDS and
# PRODUCER_CAND_LAUNCHES (default 3 and 30; mode a of the table of 2026-12-04 ran 5 x 100: graphs
# of 30-50 launches missed a slow state some geometries settle into in longer ones,
# studies/small_batch_v2_vs_released/).
# Time: seconds for the prebuilt binaries (MOEFIN_PREBUILT=1 scripts/device_prepare.sh), then
# about 3 minutes (the sweeps' --estimate lines in the log say how long each should take).
# Then, here: tools/small_batch_v2_policy.py <the candidate files, mode a's and mode b's>
# (studies/small_batch_v2_policy/README.md names the files of today's table).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
: "${OUT:?set OUT to the folder whose files come back}"
budget=${PRODUCER_BUDGET_S:-240}
mkdir -p "$OUT"
log=$OUT/producer_log.txt
SECONDS=0
tag=producer
budget_hint="raise PRODUCER_BUDGET_S"
# shellcheck source=scripts/gpu/budget.sh
source scripts/gpu/budget.sh
export MOEFIN_BUILD_TARGETS=moefin
skip=,${PRODUCER_SKIP:-},
cmode=${PRODUCER_CAND_MODE:-b}
[[ $cmode == a || $cmode == b ]] || { echo "PRODUCER_CAND_MODE must be a or b" >&2; exit 2; }
build_device

# 1. The same configurations in mode b under both producers.
small=(--hidden 2048,5120,7168 --tokens 1,4,16,64 --top-k 8,22,32 --weights bf16 --l2 hot
       --rounds 5 --launches 50 --repeat-shapes 0)
cmp=scalar,small_batch,small_batch_late_trigger,small_batch_v2,small_batch_v2_late_trigger,fi_small_batch
for producer in pdl-wait plain; do
  if [[ $skip != *,compare,* ]] && fits 30 "mode b, --producer $producer"; then
    logged 60 "$bin" sweep finalize --variants "$cmp" --modes b --producer "$producer" "${small[@]}" \
      --out "$OUT/producer_${producer//-/_}.h5"
  fi
done

# 2. small_batch_v2's candidates in mode b (entry trigger, both layouts, the released kernel in
# the same rounds), then the exit trigger, for the policy table.
grid=(--hidden 1024,2048,2880,3584,4096,5120,6144,7168 --top-k 6,8,10,16,22,32 --weights bf16
      --l2 hot --rounds "${PRODUCER_CAND_ROUNDS:-3}" --launches "${PRODUCER_CAND_LAUNCHES:-30}"
      --repeat-shapes 0 --modes "$cmode")
for part in regime 3,5,6,7; do
  [[ $skip == *,candidates,* ]] && break
  f=$OUT/producer_candidates$([[ $cmode == a ]] && echo _a)$([[ $part == regime ]] && echo _regime).h5
  if fits 50 "candidates in mode $cmode, T = $part"; then
    logged 150 "$bin" sweep finalize --variants \
      small_batch_v2/candidates,small_batch_v2/candidates/w,fi_small_batch --tokens "$part" \
      "${grid[@]}" --max-minutes 2 --out "$f"
  fi
  if [[ $cmode == b && -f $f ]] && fits 25 "exit-trigger candidates in mode b, T = $part"; then
    logged 60 "$bin" sweep finalize --variants small_batch_v2/candidates/exit --tokens "$part" \
      "${grid[@]}" --max-minutes 0.8 --resume "$f"
  fi
done

# Summary (last): what the producer changes, per variant, median over the small grid.
for producer in pdl_wait plain; do
  f=$OUT/producer_$producer.h5
  [[ -f $f ]] && "$bin" sweep finalize --print "$f" | sed -n '/^small_batch vs scalar, mode b/,/^$/p' |
    tee -a "$log"
done
say "files:"
ls -la "$OUT" | tee -a "$log"
say "done in ${SECONDS}s"
