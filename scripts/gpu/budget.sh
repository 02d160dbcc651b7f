# Budget helpers of the GPU scripts that build first and budget the runs after the build
# (finalize_fast.sh, fused.sh, released_chain.sh): sourced, not run. The script sets `tag` (the
# log prefix), `log` (the log file), `budget` (seconds after the build) and `budget_hint` (what
# a skipped phase's line suggests) first; SECONDS is the clock.
say() { echo "[$tag ${SECONDS}s] $*" | tee -a "$log"; }
run_start=0 # set by build_device: the budget counts from the end of the build
left() { echo $((budget - (SECONDS - run_start))); }
fits() { # seconds what: true when that much is left of the budget
  if (($(left) < $1)); then
    say "skipped: $2 needs ~$1 s, $(left) s left ($budget_hint)"
    return 1
  fi
}
logged() { # limit_s command...: the command's output into the log, its status returned
  local limit=$1
  shift
  say "\$ $*"
  timeout --signal=INT "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  say "exit $rc$( ((rc == 124)) && echo ' (timed out)')"
  return $rc
}

# scripts/device_build.sh (MOEFIN_BUILD_TARGETS as the caller exported it; on failure the log's
# tail and exit 1), then `build` and `bin` of build-device, its libraries on LD_LIBRARY_PATH, the
# budget's clock started and the GPU in the log.
build_device() {
  say "start: budget ${budget}s after the build"
  if ! scripts/device_build.sh >>"$log" 2>&1; then
    tail -60 "$log"
    exit 1
  fi
  prefix=$PWD/.deps/prefix
  export LD_LIBRARY_PATH=$prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  build=${MOEFIN_BUILD_DIR:-build-device}
  bin=$PWD/$build/moefin
  run_start=$SECONDS
  say "built in ${SECONDS}s"
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader >>"$log" 2>&1
}
