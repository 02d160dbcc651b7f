#!/usr/bin/env bash
# The fast finalize paths on the GPU machine (issue 15), from the repository root with .deps
# carried: builds, checks small_batch_v2 and its ablations against the Kokkos reference, measures
# its geometry candidates, fills its policy table from them, then times it against moefin's
# small_batch and the released kernel in the same interleaved rounds. In $OUT: finalize_fast_log.txt
# everything printed: the gpu tests of the lean and new paths, the check summary, compute-sanitizer,
# the tables, the summary (last) finalize_fast_check.h5       moefin check finalize: small_batch_v2,
# its ablations and a set of geometry candidates against the reference (poisoned outputs)
# finalize_fast_candidates.h5  the policy measurement: small_batch_v2's geometry candidates at T =
# 1..8, H = 1024..7168, K = 6..32 (bf16), modes a and b with the entry trigger (mode b with the exit
# trigger when it fits) small_batch_v2_table.hpp     the table tools/small_batch_v2_policy.py made
# from it (commit it as kernels/finalize/small_batch_v2_table.hpp); moefin is rebuilt with it before
# the comparison finalize_fast_sweep.h5       the comparison in the same interleaved rounds (7 of
# 100 launches), modes a, b, c, hot L2, K = 6..32, bf16, the regime's default H x T:
# $FINALIZE_FAST_VARIANTS plus each name of $FINALIZE_FAST_RELEASED this build registers (else a
# note), with the launch floor and copy bandwidth of the run finalize_fast_race.h5        race
# matrix cells of the chain with small_batch_v2 (all-early and seed-after, metadata before the wait,
# delays 0 and 25 us) Variables: FINALIZE_FAST_VARIANTS   comparison list (default: small_batch,
# small_batch_v2 and its five ablations); the registry baselines (scalar) are added by the sweep
# FINALIZE_FAST_RELEASED   released kernels to add when registered (default fi_small_batch; comma
# list, e.g. fi_small_batch,fi_scalar) FINALIZE_FAST_SKIP       phases to leave out, comma list of
# tests, check, sanitize, candidates, compare, race (e.g. "compare,race" to measure the policy in
# one call and time the rebuilt table in the next) FINALIZE_FAST_CAND_TOKENS  token counts of the
# candidate sweep (default 1,2,3,4,5,6,7,8; 'regime' = the regime's 1,2,4..256 plus each H's last T,
# to extend the table beyond T = 8); FINALIZE_FAST_CAND_ALSO = variants timed in the same rounds as
# the candidates (e.g. fi_small_batch,small_batch: what the table has to beat), none by default
# FINALIZE_FAST_CAND_MAX_S   cap of the candidate sweep in seconds (default 65)
# FINALIZE_FAST_CAND_PRIOR   earlier candidate files the table is made from as well (space list;
# this run's rows win where both measured a shape) FINALIZE_FAST_ROUNDS, FINALIZE_FAST_LAUNCHES  the
# comparison's rounds and launches per graph (default 7 and 100; the runs before 2026-12-04 took 5
# and 50, where some geometries in mode a never reached the slow state that longer graphs settle
# into: studies/small_batch_v2_vs_released/) FINALIZE_FAST_BUDGET_S   seconds of runs after the
# build (default 300); each phase is skipped with a line in the log when it does not fit, the sweeps
# stop cleanly at --max-minutes; FINALIZE_FAST_RESUME_DIR = a copy of an earlier $OUT continues its
# files Time: the build (scripts/device_build.sh: 2-3 minutes on 16 cores from scratch, seconds when
# build-device is current) plus at most FINALIZE_FAST_BUDGET_S (5 minutes by default): gpu tests <=
# 60 s, check <= 35 s, memcheck <= 25 s, candidates <= 70 s, table and rebuild <= 40 s, comparison
# <= 100 s, race cells <= 25 s; the exit-trigger candidates (<= 35 s) and more sanitizers only where
# the budget leaves them time (the sweeps' --estimate: ~0.3 min each).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
: "${OUT:?set OUT to the folder whose files come back}"
budget=${FINALIZE_FAST_BUDGET_S:-300}
prev=${FINALIZE_FAST_RESUME_DIR:-}
variants=${FINALIZE_FAST_VARIANTS:-small_batch,small_batch_v2,small_batch_v2_late_trigger,small_batch_v2_no_shuffle,small_batch_v2_no_broadcast,small_batch_v2_anchor,small_batch_v2_fi_geometry}
released=${FINALIZE_FAST_RELEASED:-fi_small_batch}
mkdir -p "$OUT"
if [[ -n $prev && -d $prev ]]; then
  for f in "$prev"/finalize_fast_*.h5; do [[ -f $f ]] && cp "$f" "$OUT/"; done
fi
log=$OUT/finalize_fast_log.txt
work=$(mktemp -d)
SECONDS=0
tag=finalize_fast
budget_hint="raise FINALIZE_FAST_BUDGET_S or resume"
# shellcheck source=scripts/gpu/budget.sh
source scripts/gpu/budget.sh
# --max-minutes for a sweep: CAP seconds, or what is left after RESERVE seconds for the later
# phases if that is less; never under 0.3 minutes (0 would mean no limit).
minutes() { # reserve_s cap_s
  awk -v s="$(($(left) - $1))" -v cap="$2" \
    'BEGIN { if (s > cap) s = cap; m = s / 60; if (m < 0.3) m = 0.3; printf "%.2f", m }'
}
io() { [[ -f $1 ]] && echo "--resume $1" || echo "--out $1"; }
skip=,${FINALIZE_FAST_SKIP:-},
want() { # phase: false (with a line) when FINALIZE_FAST_SKIP names it
  [[ $skip != *,$1,* ]] && return 0
  say "skipped: $1 (FINALIZE_FAST_SKIP)"
  return 1
}

build_device

# Released kernels: the names this build registers join the comparison.
for name in ${released//,/ }; do
  if "$bin" sweep finalize --variants "$name" --hidden 1024 --tokens 1 --top-k 8 \
    --estimate >/dev/null 2>&1; then
    variants+=,$name
    say "$name is registered: timed in the same rounds"
  else
    say "note: $name is not registered in this build: the comparison has no $name rows"
  fi
done
say "comparison variants: $variants"

# 1. Correctness: the gpu tests of the lean instantiations and small_batch_v2, then the check.
if want tests && fits 60 "gpu tests"; then
  logged 40 "$build/tests/test_finalize_fast_gpu" --log_level=test_suite
  logged 20 "$build/tests/test_finalize_gpu"
fi
check=$OUT/finalize_fast_check.h5
v2_names=small_batch_v2,small_batch_v2_late_trigger,small_batch_v2_no_shuffle
v2_names+=,small_batch_v2_no_broadcast,small_batch_v2_anchor,small_batch_v2_fi_geometry,small_batch_v2_fi_layout
if want check && fits 35 check; then
  # shellcheck disable=SC2046
  logged 35 "$bin" check finalize --variants "$v2_names" --hidden 1024,2880,7168 \
    --tokens 1,3,8,64 --top-k 1,5,6,8,16,22,32,33,64 --weights bf16,fp32,none \
    --routings uniform,uniform/ep2,hot --max-minutes 0.4 $(io "$check")
fi

# 2. compute-sanitizer on a small check of small_batch_v2 (shuffles, the anchor store, the shared
# memory of the no-shuffle ablation and of the released lane layout): memcheck first, the others
# when the budget allows.
cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
tools=()
want sanitize && tools=(memcheck racecheck synccheck initcheck)
for tool in "${tools[@]}"; do
  if [[ $tool == memcheck ]]; then need=25; else need=$((25 + 210)); fi
  fits $need "compute-sanitizer $tool" || continue
  timeout 25 "$cs" --tool "$tool" --error-exitcode 9 "$bin" check finalize --variants \
    small_batch_v2,small_batch_v2_no_shuffle,small_batch_v2_no_broadcast,small_batch_v2_fi_layout --hidden 2880 \
    --tokens 1,5 --top-k 6,33 --weights fp32 --routings uniform/ep2 --out "$work/san_$tool.h5" \
    >"$work/san_$tool.log" 2>&1
  rc=$?
  say "compute-sanitizer $tool (small_batch_v2): exit $rc$( ((rc == 124)) && echo ' (timed out)')"
  grep -E "ERROR SUMMARY|RACECHECK SUMMARY|check finalize:" "$work/san_$tool.log" | tee -a "$log"
done

# 3. The policy measurement, then the table and a rebuild with it.
cand=$OUT/finalize_fast_candidates.h5
# shellcheck disable=SC2054
grid=(--hidden 1024,2048,2880,3584,4096,5120,6144,7168 --tokens "${FINALIZE_FAST_CAND_TOKENS:-1,2,3,4,5,6,7,8}"
      --top-k 6,8,10,16,22,32 --weights bf16 --l2 hot --rounds 3 --launches 30 --repeat-shapes 0)
# Seconds the phases after the candidates need (the table, the comparison, the race cells).
later=15
[[ $skip != *,compare,* ]] && later=140
cand_s=${FINALIZE_FAST_CAND_MAX_S:-65} # the candidate sweep's cap in seconds
if want candidates && fits $((cand_s + 5)) "candidate sweep"; then
  # shellcheck disable=SC2046
  logged $((cand_s + 15)) "$bin" sweep finalize --variants "small_batch_v2/candidates${FINALIZE_FAST_CAND_ALSO:+,$FINALIZE_FAST_CAND_ALSO}" --modes a,b "${grid[@]}" \
    --max-minutes "$(minutes "$later" "$cand_s")" $(io "$cand")
fi
# The exit trigger of every candidate in mode b, only when it leaves the later phases their time.
if [[ -f $cand ]] && [[ $skip != *,candidates,* ]] && fits $((35 + later)) "candidate sweep (exit trigger)"; then
  logged 40 "$bin" sweep finalize --variants small_batch_v2/candidates/exit --modes b \
    "${grid[@]}" --max-minutes "$(minutes "$later" 30)" --resume "$cand"
fi
table=$OUT/small_batch_v2_table.hpp
# Run in $OUT so that the table's provenance names the file as it comes back (with its sha256).
if [[ -f $cand && $skip != *,candidates,* ]] && (cd "$OUT" && python3 "$OLDPWD/tools/small_batch_v2_policy.py" ${FINALIZE_FAST_CAND_PRIOR:-} "$(basename "$cand")" \
  --out "$table") >>"$log" 2>&1; then
  cp "$table" kernels/finalize/small_batch_v2_table.hpp
  if [[ -f $build/CMakeCache.txt ]]; then
    logged 60 cmake --build "$build" --target moefin -j"$(nproc)" &&
      say "moefin rebuilt with the measured table ($(grep -c 'Trigger::' "$table") entries)"
  else
    say "prebuilt binaries: not rebuilt here; the comparison uses the table moefin was built" \
      "with (commit small_batch_v2_table.hpp and prebuild again to time the new one)"
  fi
elif [[ $skip == *,candidates,* ]]; then
  say "candidates skipped: the comparison uses the table moefin was built with"
else
  say "policy table not filled (no candidate file or no usable rows): the comparison uses the rule"
fi

# 4. The comparison, same rounds, modes a, b, c, with the launch floor of the run.
sweep=$OUT/finalize_fast_sweep.h5
if want compare && fits 60 "comparison sweep"; then
  # shellcheck disable=SC2046
  logged 120 "$bin" sweep finalize --variants "$variants" --modes a,b,c --l2 hot \
    --top-k 6,8,10,16,22,32 --weights bf16 --rounds "${FINALIZE_FAST_ROUNDS:-7}" \
    --launches "${FINALIZE_FAST_LAUNCHES:-100}" --repeat-shapes 4 \
    --max-minutes "$(minutes 25 100)" $(io "$sweep")
fi

# 5. Race matrix cells of the chain with small_batch_v2 (its pre-wait reads and trigger).
if want race && fits 20 "race matrix (small_batch_v2)"; then
  logged 25 "$bin" race --finalize small_batch_v2 --presets all-early,seed-after --meta before \
    --delay-ns 0,25000 --iterations 100 --out "$OUT/finalize_fast_race.h5"
fi

# Summary (last): the tables and what came back.
{
  [[ -f $sweep ]] && "$bin" sweep finalize --print "$sweep"
  [[ -f $OUT/finalize_fast_race.h5 ]] && "$bin" race --print "$OUT/finalize_fast_race.h5"
} >>"$log" 2>&1
say "files:"
ls -la "$OUT" | tee -a "$log"
grep -hE '^check finalize:|^(wrote|incomplete)' "$log" | tail -6
grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY|\*\*\* No errors|failure' "$log" | sort | uniq -c
[[ -f $sweep ]] && "$bin" sweep finalize --print "$sweep" | grep -A14 '^small_batch_v2 vs'
say "done in ${SECONDS}s"
