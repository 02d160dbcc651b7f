#!/usr/bin/env bash
# The one-CTA wide and tiles kernels built without the two-CTA register cap (B) beside the
# binaries of the tree (A), on the GPU machine from the repository root, A-B-A. The wide and
# tiles kernels of one CTA per SM (DecodePolicy::wide_stages(1) stages: `sweep gemm`'s wide and
# tiles candidates without cta2, and the chains run with --ctas-per-sm 1) were compiled with
# __launch_bounds__(256, 2), which capped them at 128 registers and made ptxas spill 32-52 bytes
# at tile 16 (stores plus loads); B bounds them for one CTA (142-170 registers, no spill). The
# two-CTA kernels are the same code in both. Carry: .deps/debs_rt, .deps/git_commit (A's commit) and
# .deps/prebuilt.tar.xz: A's prebuilt set and, in its folder bounds/, B's moefin, test_decode_gpu,
# test_chain_equivalence and git_commit, built for sm_90 at the commit that changed the bounds
# (one xz stream: the two sets share most bytes).
# Correctness first: B's test_decode_gpu (the wide and tiles kernels bit for bit the row-major
# one, at one and two CTAs per SM) and test_chain_equivalence. Then `sweep gemm` of fp4 at one
# CTA per SM, tile 16, T = 1, 2, 4, 8, 16, splitk and the candidates tiles and tiles+lean (splitk,
# whose kernel B leaves as it was, is the control), A, B, A (gemm_a1.h5, gemm_b2.h5, gemm_a3.h5);
# then `sweep layer` fp4 at tile 16, T = 1, 2, 4, 8, 16, at its defaults, two CTAs per SM (a
# second control: the kernels B leaves as they were), A, B, A (layer_a1.h5, layer_b2.h5,
# layer_a3.h5). Phase race (not in the default): the chain's race benchmark cell on fp4 weights
# (`moefin race --presets all-early --meta before --delay-ns 25000`, its default one CTA per SM,
# which runs the one-CTA kernels), A, B, A, each with the cells' timelines (--stamps:
# race_{a1,b2,a3}.h5). In $OUT: bounds_log.txt, bounds_run.tar.gz (the folder run: the tests'
# outputs, the result files, summary.txt), bounds_run_summary.txt. Variables: BOUNDS_BUDGET_S
# (default 150) seconds after the build (test and sweep ran in 26 s on an H100); BOUNDS_PHASES
# (default "test sweep"; any of test, sweep, race).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
out=${OUT:-out/bounds}
budget=${BOUNDS_BUDGET_S:-150}
phases="build ${BOUNDS_PHASES:-test sweep}"
for ph in $phases; do
  [[ " build test sweep race " == *" $ph "* ]] ||
    { echo "bounds.sh: unknown phase '$ph' (BOUNDS_PHASES: test, sweep, race)" >&2; exit 2; }
done
has() { [[ " $phases " == *" $1 "* ]]; }
mkdir -p "$out/run"
log=$out/bounds_log.txt
: > "$log"
tag=bounds
# shellcheck source=scripts/gpu/phases.sh
source scripts/gpu/phases.sh
start_log
build_phase "moefin test_decode_gpu test_chain_equivalence"
bdir=.deps/prebuilt/bounds
[[ -x $bdir/moefin ]] || { say "no B binaries in $bdir (.deps/prebuilt.tar.xz's bounds/)"; exit 1; }
a_commit=$(cat .deps/git_commit) b_commit=$(cat "$bdir/git_commit")
say "A: build-device of $a_commit; B: $bdir of $b_commit"
"$bdir/moefin" info > /dev/null 2>> "$log" || { say "B's moefin does not run here"; exit 1; }
for t in test_decode_gpu test_chain_equivalence; do
  has test || break
  say "test B: $t"
  timeout 150 "$bdir/$t" > "$out/run/b_$t.txt" 2>&1
  rc=$?
  tail -2 "$out/run/b_$t.txt" | tee -a "$log"
  say "test B $t: exit $rc"
  ((rc == 0)) || { say "B fails its test: no timings"; pack_part run run; exit 0; }
done
# aba PHASE NAME NEED STEP BASE ARGS...: under PHASE, `moefin ARGS` with A's binary, B's, A's
# again, into $out/run/NAME_{a1,b2,a3}.h5, run i leaving (3 - i) * STEP + BASE seconds for the
# runs after it. A and B name their own commit in their files (built in).
aba() {
  local phase=$1 name=$2 need=$3 step=$4 base=$5 i=1 ab exe
  shift 5
  has "$phase" || return 0
  for ab in a b a; do
    if [[ $ab == a ]]; then exe=$bin; else exe=$bdir/moefin; fi
    run "$name-$ab$i" "$need" $(((3 - i) * step + base)) "$exe" "$@" \
      --out "$out/run/${name}_$ab$i.h5"
    i=$((i + 1))
  done
}
aba race race 10 0 0 race --presets all-early --meta before --delay-ns 25000 \
  --weights-format fp4 --stamps
aba sweep gemm 15 15 75 sweep gemm --shapes top-8,top-16,top-22 --tokens 1,2,4,8,16 --gemms 1,2 \
  --formats fp4 --variants splitk --modes pdl --candidates tiles,tiles+lean --tile-m 16 \
  --check-tokens 1 --rounds 5
aba sweep layer 20 25 0 sweep layer --tokens 1,2,4,8,16 --weights-format fp4 --tile-m 16
{
  for kind in race gemm layer; do
    for f in "$out"/run/${kind}_*.h5; do
      [[ -f $f ]] || continue
      echo "== ${f##*/}"
      if [[ $kind == race ]]; then "$bin" race --print "$f"; else "$bin" sweep "$kind" --print "$f"; fi
    done
  done
} > "$out/run/summary.txt" 2>&1
pack_part run run
say "finished"
