#!/usr/bin/env bash
# The seed's full finalize grid sharded over every GPU of the machine through one launcher, then
# merged. Runs ON THE GPU MACHINE from the repository root (carry: .deps; for a second call also
# the first call's $OUT as out/sharded-prev, see SHARD_RESUME_DIR). Phases, in this order, each
# marked "done: PHASE" in the log so that a second call skips it:
#   build   scripts/device_build.sh, then the host test of the shard logic (ctest test_shard)
#   check   moefin check finalize (full grid, 4608 configurations) sharded over the GPUs and
#           merged; its rows must equal data/h200/h200_finalize_check.h5's (keys, axes, pass):
#           correctness before timing
#   grid    moefin sweep finalize --modes a,b,c --l2 hot (the seed's grid, 1152 shapes, 20736
#           rows) sharded and merged; its wall time against one GPU (the same loop took 86.4 s
#           on one H200, data/h200/h200_finalize_log.txt) and each shard's own seconds
#   spread  (two GPUs or more) the same subset of the grid on GPU 0 and GPU 1 at the same time:
#           B/A per configuration beside each GPU's own repeat noise (is one H200 like another?)
# Launcher: mpirun -np N when it is installed, else N processes with OMPI_COMM_WORLD_RANK/SIZE/
# LOCAL_RANK set by hand (SHARD_LAUNCHER=mpirun|hand forces one); every process takes --shard
# env, so one GPU makes one shard and still goes through merge (the smoke test).
# Time: the build 10 s when kept, ~3-4 min on a fresh machine; after it, about 20 + 70/N s
# (check) + 25 + 90/N s (grid) + 40 s (spread, N >= 2): ~3.5 min on one GPU, ~2.5 min on two,
# ~1.5 min on eight. SHARD_BUDGET_S (default 540) bounds the call: a phase that does not fit is
# left for the next call, whose sweeps resume from the shard files (sharded_shards.tar.gz).
# SHARD_GPUS overrides the GPU count (nvidia-smi -L). SHARD_SELFTEST=1 runs every phase but the
# build with host-only `moefin sweep synthetic` grids (tests/python/test_sharded_script.py;
# SHARD_SELFTEST_STOP=K stops each grid process after K configurations, as a budget would).
# $OUT (7 files):
#   sharded_log.txt             everything printed, nvidia-smi before and after the grid
#   sharded_summary.json        GPUs, launcher, wall and per-shard seconds, speedup, spread
#   sharded_finalize_sweep.h5   the merged grid (the file to commit; partial if the budget ended)
#   sharded_finalize_check.h5   the merged check
#   sharded_spread_gpu0.h5, sharded_spread_gpu1.h5   the subset measured on each of two GPUs
#   sharded_shards.tar.gz       every shard file (re-merge, or resume in a second call)
# The merged files are plain HDF5 (about 12 MB the check, 10 MB the grid); `h5repack -f GZIP=6`
# shrinks them about tenfold before they are committed, as data/h200's were.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
: "${OUT:?set OUT to the folder whose files come back}"
budget=${SHARD_BUDGET_S:-540}
prev=${SHARD_RESUME_DIR:-out/sharded-prev}
selftest=${SHARD_SELFTEST:-0}
py=${SHARD_PYTHON:-python3}
work=${SHARD_WORK:-out/sharded-work}
mkdir -p "$OUT" "$work"
log=$OUT/sharded_log.txt
if [[ -d $prev ]]; then
  [[ -f $prev/sharded_log.txt && ! -f $log ]] && cp "$prev/sharded_log.txt" "$log"
  [[ -f $prev/sharded_shards.tar.gz ]] && tar -xzf "$prev/sharded_shards.tar.gz" -C "$work"
  for f in "$prev"/sharded_*.h5; do
    [[ -f $f && ! -e $OUT/$(basename "$f") ]] && cp "$f" "$OUT/"
  done
fi
touch "$log"
SECONDS=0
say() { echo "[sharded $(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
is_done() { grep -qx "done: $1" "$log"; }
mark_done() { echo "done: $1" >> "$log"; }
minutes() { awk -v s="$1" 'BEGIN { printf "%.2f", (s > 30 ? s : 30) / 60 }'; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

if ((selftest)); then
  bin=${MOEFIN_BINARY:-build/moefin}
  n=${SHARD_GPUS:-2}
  # shellcheck disable=SC2054 # commas: moefin's list syntax inside one word
  check_args=(sweep synthetic --sizes 1-30 --variants base,slow)
  check_ref_table=synthetic_sweep
  check_axes=n,variant
  grid_args=(sweep synthetic --sizes 1-60)
  [[ -n ${SHARD_SELFTEST_STOP:-} ]] && grid_args+=(--stop-after "$SHARD_SELFTEST_STOP")
  spread_args=(sweep synthetic --sizes 1-20)
  spread_table=synthetic_sweep spread_metric=median
  single_s=""
else
  prefix=$PWD/.deps/prefix
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  bin=$PWD/build-device/moefin
  n=${SHARD_GPUS:-$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')}
  ((n >= 1)) || n=1
  check_args=(check finalize)
  check_ref_table=finalize_check
  check_axes=variant,H,T,K,hidden_padded,weights,routing,pass,unwritten,nan
  # shellcheck disable=SC2054
  grid_args=(sweep finalize --modes a,b,c --l2 hot)
  # shellcheck disable=SC2054
  spread_args=(sweep finalize --modes a,b,c --l2 hot --hidden 1024,4096,7168 --top-k 1,8,32
               --repeat-shapes 8)
  spread_table=finalize_sweep spread_metric=median_us
  # The single-GPU time of the same loop, as the committed run's log recorded it.
  single_s=$(sed -n 's/^\[sweep finalize\] 1152 configurations in \([0-9.]*\)s (0 already.*/\1/p' \
    data/h200/h200_finalize_log.txt | head -1)
fi
launcher=${SHARD_LAUNCHER:-$(command -v mpirun >/dev/null 2>&1 && echo mpirun || echo hand)}
say "GPUs: $n; launcher: $launcher; budget ${budget}s; selftest: $selftest; done before:" \
  "$(sed -n 's/^done: //p' "$log" | tr '\n' ' ')"
((selftest)) || nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,clocks.max.sm,power.limit,temperature.gpu \
  --format=csv >> "$log" 2>&1

# Runs `moefin ARGS --shard env` as N processes through the launcher, into $work/NAME.shard-*;
# resumes when shard files of NAME exist. Sets wall_s.
launch() { # name seconds args...
  local name=$1 seconds=$2
  shift 2
  local base=$work/$name.h5 io=(--out "$work/$name.h5")
  compgen -G "$work/$name.shard-*-of-$n.h5" > /dev/null && io=(--resume "$base")
  local args=("$@" --shard env --max-minutes "$(minutes $((seconds - 15)))" "${io[@]}")
  local t0 rc=0
  say "$name: $launcher x $n: moefin ${args[*]}"
  t0=$(now)
  if [[ $launcher == mpirun ]]; then
    local opts=(-np "$n" --oversubscribe --bind-to none --tag-output)
    ((EUID == 0)) && opts+=(--allow-run-as-root) # OpenMPI refuses root unless told
    [[ -n ${LD_LIBRARY_PATH:-} ]] && opts+=(-x LD_LIBRARY_PATH)
    timeout --signal=INT "$seconds" mpirun "${opts[@]}" "$bin" "${args[@]}" >> "$log" 2>&1 ||
      rc=$?
  else
    local pids=() i
    for ((i = 0; i < n; i++)); do
      OMPI_COMM_WORLD_RANK=$i OMPI_COMM_WORLD_SIZE=$n OMPI_COMM_WORLD_LOCAL_RANK=$i \
        timeout --signal=INT "$seconds" "$bin" "${args[@]}" > "$work/$name.rank$i.log" 2>&1 &
      pids+=($!)
    done
    for i in "${!pids[@]}"; do
      wait "${pids[$i]}" || rc=$?
      sed "s/^/[rank $i] /" "$work/$name.rank$i.log" >> "$log"
    done
  fi
  wall_s=$(elapsed "$t0" "$(now)")
  say "$name: exit $rc after ${wall_s}s"
  return $rc
}

# Merges $work/NAME.shard-*-of-N.h5 into $OUT/FILE; partial (and not done) when incomplete.
merge_into() { # name file
  local out=$OUT/$2
  rm -f "$out"
  if "$bin" merge "$out" "$work/$1".shard-*-of-"$n".h5 >> "$log" 2>&1; then
    say "$1: merged into $out"
    return 0
  fi
  rm -f "$out"
  "$bin" merge "$out" "$work/$1".shard-*-of-"$n".h5 --allow-partial >> "$log" 2>&1
  say "$1: incomplete (see the merge report above); partial file $out; a next call resumes"
  return 1
}

pack() { (cd "$work" && tar -czf - ./*.shard-*.h5 2> /dev/null) > "$OUT/sharded_shards.tar.gz"; }

# build
if ! ((selftest)) && ! is_done build; then
  say "build: scripts/device_build.sh"
  if ! scripts/device_build.sh >> "$log" 2>&1; then
    say "build: FAILED"
    tail -40 "$log"
    exit 1
  fi
  if (cd build-device && ctest -R '^test_shard$' --output-on-failure) >> "$log" 2>&1; then
    mark_done build
  else
    say "build: test_shard FAILED"
  fi
fi

# check: correctness first
if ! is_done check; then
  need=$((20 + 70 / n))
  if (($(left) < need + 30)); then
    say "check: $(left)s left, needs ~${need}s: left for the next call"
  else
    launch check $(($(left) - 20)) "${check_args[@]}"
    check_rc=$?
    if merge_into check sharded_finalize_check.h5; then
      ref=data/h200/h200_finalize_check.h5
      if ((selftest)); then
        ref=$work/check_ref.h5
        rm -f "$ref"
        "$bin" "${check_args[@]}" --out "$ref" >> "$log" 2>&1
      fi
      if "$py" analysis/shards.py same "$ref" "$OUT/sharded_finalize_check.h5" \
        --table "$check_ref_table" --axes "$check_axes" >> "$log" 2>&1 && ((check_rc == 0)); then
        say "check: every row as in $ref; every check passed"
        mark_done check
      else
        say "check: FAILED (exit $check_rc, or rows differ from $ref; see above)"
      fi
    fi
  fi
fi

# grid: the timing
if is_done check && ! is_done grid; then
  need=$((25 + 90 / n))
  if (($(left) < need + 30)); then
    say "grid: $(left)s left, needs ~${need}s: left for the next call"
  else
    reserve=$((n >= 2 ? 60 : 10))
    launch grid $(($(left) - reserve)) "${grid_args[@]}"
    echo "grid_wall_s: $wall_s" >> "$log"
    ((selftest)) || nvidia-smi --query-gpu=index,clocks.sm,power.draw,temperature.gpu \
      --format=csv >> "$log" 2>&1
    merge_into grid sharded_finalize_sweep.h5 && mark_done grid
  fi
fi

# spread: one GPU against another on the same configurations, at the same time
if is_done grid && ! is_done spread; then
  if ((n < 2)); then
    say "spread: needs two GPUs, this machine has $n: skipped"
  elif (($(left) < 60)); then
    say "spread: $(left)s left, needs ~40s: left for the next call"
  else
    pids=()
    for g in 0 1; do
      f=$work/spread_gpu$g.h5
      rm -f "$work/spread_gpu$g".shard-0-of-1.h5
      CUDA_VISIBLE_DEVICES=$g timeout --signal=INT $(($(left) - 20)) "$bin" "${spread_args[@]}" \
        --shard 0/1 --out "$f" > "$work/spread_gpu$g.log" 2>&1 &
      pids+=($!)
    done
    rc=0
    for g in 0 1; do
      wait "${pids[$g]}" || rc=$?
      sed "s/^/[GPU $g] /" "$work/spread_gpu$g.log" >> "$log"
      cp "$work/spread_gpu$g.shard-0-of-1.h5" "$OUT/sharded_spread_gpu$g.h5"
    done
    if ((rc == 0)) && "$py" analysis/shards.py spread "$OUT/sharded_spread_gpu0.h5" \
      "$OUT/sharded_spread_gpu1.h5" --table "$spread_table" --metric "$spread_metric" \
      --json "$work/spread.json" 2>&1 | tee -a "$log"; then
      mark_done spread
    else
      say "spread: FAILED (exit $rc)"
    fi
  fi
fi

# summary
pack
wall=$(sed -n 's/^grid_wall_s: //p' "$log" | tail -1)
grid_json=null spread_json=null
if [[ -f $OUT/sharded_finalize_sweep.h5 ]]; then
  "$py" analysis/shards.py summary "$OUT/sharded_finalize_sweep.h5" ${wall:+--wall-s "$wall"} \
    ${single_s:+--single-s "$single_s"} --json "$work/grid.json" 2>&1 | tee -a "$log"
  [[ -f $work/grid.json ]] && grid_json=$(cat "$work/grid.json")
fi
[[ -f $work/spread.json ]] && spread_json=$(cat "$work/spread.json")
cat > "$OUT/sharded_summary.json" << EOF
{"gpus": $n, "launcher": "$launcher", "selftest": $selftest,
 "done": "$(sed -n 's/^done: //p' "$log" | tr '\n' ' ')",
 "single_gpu_loop_s": ${single_s:-null},
 "grid": $grid_json,
 "spread": $spread_json}
EOF
say "summary: $OUT/sharded_summary.json; phases done: $(sed -n 's/^done: //p' "$log" | tr '\n' ' ')"
find "$OUT" -maxdepth 1 -type f -printf '%10s %f\n' | sort -k2 | tee -a "$log"
