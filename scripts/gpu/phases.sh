# Phase helpers of the GPU scripts that run moefin commands within a budget (layer.sh,
# layerfix.sh, gemm_bw.sh, routing.sh, ncu.sh): sourced, not run. The script sets `tag` (the log
# prefix), `log` (the log file) and `budget` (seconds) first; SECONDS is the clock.
say() { echo "[$tag $(date -u +%H:%M:%S) +${SECONDS}s] $*" | tee -a "$log"; }
left() { echo $((budget - SECONDS)); }
mark_done() { echo "done: $1" >> "$log"; }

# run PHASE NEED_S LEAVE_S CMD...: runs CMD within the budget less LEAVE_S (seconds kept for the
# phases after it), stopped with SIGINT at the limit so that it keeps its finished rows; or skips
# it with a line when fewer than NEED_S seconds would be left. Returns CMD's status, 2 if skipped.
run() {
  local phase=$1 need=$2 leave=$3
  shift 3
  if (($(left) - leave < need)); then
    say "$phase: $(left)s left, needs ~${need}s (+${leave}s for later phases): skipped"
    return 2
  fi
  say "$phase: $*"
  timeout --signal=INT $(($(left) - leave - 5)) "$@" >> "$log" 2>&1
  local rc=$?
  say "$phase: exit $rc"
  return $rc
}

# The unpacked libraries of scripts/device_build.sh and the binary every phase runs.
prefix=$PWD/.deps/prefix
export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=build-device/moefin

# The first lines of the log: the phases, the budget and the GPU.
start_log() {
  say "phases: $phases; budget ${budget}s"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader >> "$log" 2>&1
}

# build_phase TARGETS: scripts/device_build.sh of these targets (prebuilt binaries in seconds, a
# cold build in minutes), "done: build" in the log, or the script stops; then the budget starts
# (SECONDS=0: it counts the runs, not the build).
build_phase() {
  say "build: scripts/device_build.sh ($1)"
  if MOEFIN_BUILD_TARGETS="$1" scripts/device_build.sh >> "$log" 2>&1; then
    mark_done build
  else
    say "build FAILED (log above)"
    exit 1
  fi
  SECONDS=0
}

# test_phase TEST FILE: build-device/tests/TEST (at most 150 s) into FILE, its last lines in the
# log, "done: test" when it passes; skipped with a line when less than 100 s of the budget is left.
test_phase() {
  (($(left) < 100)) && { say "test: $(left)s left, needs ~100s: skipped"; return 2; }
  say "test: build-device/tests/$1"
  timeout 150 "build-device/tests/$1" > "$2" 2>&1
  local rc=$?
  tail -3 "$2" | tee -a "$log"
  say "test: exit $rc"
  ((rc == 0)) && mark_done test
  return $rc
}

# pack_part NAME DIR...: the summaries (summary.txt, sanitizer.txt) of $out/DIR... into
# $out/${tag}_NAME_summary.txt, the folders into $out/${tag}_NAME.tar.gz (then removed): the
# multi-part scripts (wpack.sh, wide.sh) return two files a part, under the tool's 8.
pack_part() {
  local name=$1 d f
  shift
  for d in "$@"; do
    for f in "$out/$d"/summary.txt "$out/$d"/sanitizer.txt; do
      [[ -f $f ]] && { echo "== $d/${f##*/}"; cat "$f"; }
    done
  done > "$out/${tag}_${name}_summary.txt"
  tar czf "$out/${tag}_$name.tar.gz" -C "$out" "$@" && rm -rf "${@/#/$out/}"
  say "finished: $out/${tag}_$name.tar.gz"
}
