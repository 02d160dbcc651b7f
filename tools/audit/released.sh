#!/usr/bin/env bash
# The released MoE chain audited from its binaries (docs/design/released.md):
#   1. the pinned wheels flashinfer-python 0.7.2.post1 and flashinfer-cubin 0.6.13 (pip download
#      --no-deps into ${MOEFIN_CACHE_DIR:-$HOME/.cache/moefin}/wheels, unpacked beside them into
#      released/), unless FLASHINFER_PYTHON_DIR / FLASHINFER_CUBIN_DIR name unpacked copies;
#   2. the released routing (custom block kernels) and dev kernels (permute, activation,
#      finalize) compiled from the wheel's sources with nvcc -cubin for sm_100a and sm_90
#      (the build glue is this file and shim/);
#   3. the parameter layouts (struct_layout.py) of the GEMMs' KernelParams and of the dev and
#      routing kernels' params;
#   4. moefin audit of every NVFP4 batched-GEMM cubin of the cubin wheel (E2m1 in the name),
#      grouped by threads per CTA (flashinferMetaInfo.h), and of the compiled kernels;
#   5. the launches file of the released flow (released_launches.py) and the verdict for every
#      choice of GEMM1 and GEMM2 tactic (released_chain.py: the tactics grouped into classes of
#      equal PDL facts, moefin audit --chain over one tactic per class, then over every choice
#      of random tactics without the classes to check the grouping).
# Writes into OUTDIR (default out/audit/released): facts JSON and logs; then into
# studies/released_binaries_audit/ (the study of the released binaries):
# released_nvfp4_launches.json and released_audit.h5 (tools/audit/released_summary.py).
# Cost on 2 cores: compiling the released sources takes about 25 minutes of CPU time the first
# time (the routing block file dominates; the cubins are kept in OUTDIR/cubins and reused); the
# audit of the 1015 GEMM cubins (MOEFIN_JOBS parallel processes) and the chain runs: the
# seconds are in released_audit.h5's attributes and docs/reference/audit-files.md.
# Usage: tools/audit/released.sh [OUTDIR]      (MOEFIN_BUILD_DIR: the moefin build, default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
out=${1:-out/audit/released}
build=${MOEFIN_BUILD_DIR:-build}
jobs=${MOEFIN_JOBS:-2}
cache=${MOEFIN_CACHE_DIR:-$HOME/.cache/moefin}
py_version=0.7.2.post1
study_dir=studies/released_binaries_audit
cubin_version=0.6.13
mkdir -p "$out/cubins" "$out/layouts" "$cache/wheels" "$cache/released"
log=$out/released_log.txt
: > "$log"
say() { echo "[released $(date -u +%H:%M:%S)] $*" | tee -a "$log"; }

# 1. The wheels.
unpack() { # wheel dest members-prefix...
  local wheel=$1 dest=$2
  shift 2
  python3 - "$wheel" "$dest" "$@" <<'PY'
import os, sys, zipfile
wheel, dest, prefixes = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for n in z.namelist():
        if any(n.startswith(p) for p in prefixes) and not n.endswith("/"):
            z.extract(n, dest)
open(os.path.join(dest, ".unpacked"), "w").close()
PY
}
fetch() { # requirement glob
  compgen -G "$cache/wheels/$2" >/dev/null && return 0
  say "downloading $1"
  python3 -m pip download -q --disable-pip-version-check --no-deps -d "$cache/wheels" "$1"
}
py_dir=${FLASHINFER_PYTHON_DIR:-}
if [[ -z $py_dir ]]; then
  fetch "flashinfer-python==$py_version" "flashinfer_python-$py_version-*.whl"
  py_dir=$cache/released/flashinfer_python-$py_version
  if [[ ! -f $py_dir/.unpacked ]]; then
    say "unpacking flashinfer-python $py_version (sources and headers)"
    unpack "$(compgen -G "$cache/wheels/flashinfer_python-$py_version-*.whl" | head -1)" "$py_dir" \
      flashinfer/data/csrc/ flashinfer/data/include/ flashinfer/data/cutlass/include/ \
      flashinfer/data/cccl/ flashinfer/data/spdlog/include/
  fi
fi
cubin_dir=${FLASHINFER_CUBIN_DIR:-}
if [[ -z $cubin_dir ]]; then
  fetch "flashinfer-cubin==$cubin_version" "flashinfer_cubin-$cubin_version-*.whl"
  cubin_dir=$cache/released/flashinfer_cubin-$cubin_version
  if [[ ! -f $cubin_dir/.unpacked ]]; then
    say "unpacking flashinfer-cubin $cubin_version (batched GEMM cubins and headers)"
    unpack "$(compgen -G "$cache/wheels/flashinfer_cubin-$cubin_version-*.whl" | head -1)" \
      "$cubin_dir" flashinfer_cubin/cubins/
  fi
fi
data=$py_dir/flashinfer/data
bmm=$(compgen -G "$cubin_dir/flashinfer_cubin/cubins/*/batched_gemm-*" | head -1)
[[ -d $data/csrc && -d $bmm/include ]] || { echo "released: no flashinfer sources in $py_dir or no batched_gemm in $cubin_dir" >&2; exit 1; }
say "flashinfer-python: $py_dir; batched GEMM cubins: $bmm"

# 2. The released kernels, compiled from the wheel's sources.
[[ -x $build/moefin ]] || scripts/build.sh >> "$log" 2>&1
moefin=$build/moefin
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
shim=$out/include
mkdir -p "$shim/flashinfer/trtllm/batched_gemm"
# The sources include the batched-GEMM export headers under the path the installed package maps
# them to; point that path at the cubin wheel's copy.
ln -sfn "$bmm/include/trtllmGen_bmm_export" "$shim/flashinfer/trtllm/batched_gemm/trtllmGen_bmm_export"
inc=(-I"$PWD/tools/audit/shim" -I"$data/include" -I"$data/csrc" -I"$data/csrc/nv_internal"
     -I"$data/csrc/nv_internal/include" -I"$data/cutlass/include" -I"$data/cccl"
     -I"$data/spdlog/include" -I"$shim" -I"$bmm/include/trtllmGen_bmm_export")
src=$data/csrc/fused_moe/trtllm_backend
compile() { # name source arch
  local cubin=$out/cubins/$1.$3.cubin
  [[ -s $cubin && $cubin -nt $2 ]] && return 0
  say "nvcc -cubin $1 for $3"
  "$nvcc" -cubin -arch="$3" -std=c++17 --expt-relaxed-constexpr -w "${inc[@]}" -o "$cubin" "$2" \
    >> "$log" 2>&1 || { say "nvcc failed for $1 $3 (log above)"; exit 1; }
}
pids=()
for arch in sm_100a sm_90; do
  compile routing_custom_block "$src/trtllm_fused_moe_routing_custom_block.cu" $arch &
  pids+=($!)
  compile dev_kernel "$src/trtllm_fused_moe_dev_kernel.cu" $arch &
  pids+=($!)
  for p in "${pids[@]}"; do wait "$p"; done
  pids=()
done

# 3. Parameter layouts.
layout=tools/audit/struct_layout.py
python3 $layout --header "$bmm/include/trtllmGen_bmm_export/KernelParamsDecl.h" \
  --prelude $'#include <cuda.h>\n#include <cstdint>' -I "$(dirname "$nvcc")/../include" \
  --struct batchedGemm::KernelParams --kernel bmm_=params:KernelParams \
  --source "flashinfer-cubin $cubin_version trtllmGen_bmm_export/KernelParamsDecl.h" \
  --out "$out/layouts/bmm_kernel_params.json"
python3 $layout --compiler "$nvcc" "${inc[@]}" --flag=--expt-relaxed-constexpr --flag=-w \
  --header "$data/include/flashinfer/trtllm/fused_moe/DevKernel.h" \
  --header "$data/include/flashinfer/trtllm/fused_moe/RoutingKernel.h" \
  --header "$data/include/flashinfer/trtllm/fused_moe/RoutingCustomPolicy.cuh" \
  --struct 'moe::dev::finalize::KernelParams<cutlass::bfloat16_t, cutlass::bfloat16_t, 4, false, true>=FinalizeParams' \
  --struct 'moe::dev::routing::routingCustom::KernelParams<float, __nv_bfloat16, 256, 8, moe::dev::routing::TopKExpertSelect<moe::dev::routing::NoOpPreprocess, moe::dev::routing::SoftmaxPostprocess>>=RoutingParams' \
  --kernel 3dev8finalize=params:FinalizeParams --kernel routingIndices=params:RoutingParams \
  --source "flashinfer-python $py_version DevKernel.h, RoutingKernel.h" \
  --out "$out/layouts/dev_kernel_params.json"

# 4. Every NVFP4 GEMM cubin, grouped by threads per CTA; the compiled kernels.
python3 tools/audit/released_launches.py --metainfo "$bmm/include/flashinferMetaInfo.h" \
  --cubins "$bmm" --groups "$out/gemm_groups.txt" --out "$study_dir"/released_nvfp4_launches.json
machine="$(nproc) cores; load average before the scan: $(cut -d' ' -f1-3 /proc/loadavg)"
start=$(date +%s)
: > "$out/gemm_facts.list"
while read -r threads files; do
  say "auditing $(wc -w <<<"$files") GEMM cubins of $threads threads"
  # shellcheck disable=SC2086
  "$moefin" audit $files --threads "$threads" --layout "$out/layouts/bmm_kernel_params.json" \
    --jobs "$jobs" --json "$out/gemm_facts_$threads.json" -q >> "$log" 2>&1
  echo "$out/gemm_facts_$threads.json" >> "$out/gemm_facts.list"
done < "$out/gemm_groups.txt"
gemm_seconds=$(( $(date +%s) - start ))
machine="$machine, after: $(cut -d' ' -f1-3 /proc/loadavg)"
say "GEMM cubins audited in ${gemm_seconds} s ($machine)"
# One kernel alone: the first cubin of the largest block size's group (warp by warp, one job).
read -r one_threads one_cubin _ < <(tail -1 "$out/gemm_groups.txt")
t0=$(date +%s.%N)
"$moefin" audit "$one_cubin" --threads "$one_threads" --layout "$out/layouts/bmm_kernel_params.json" \
  --jobs 1 --json "$out/one_kernel.json" -q >> "$log" 2>&1
one_seconds=$(python3 -c "import sys; print('%.2f' % (float(sys.argv[2]) - float(sys.argv[1])))" \
  "$t0" "$(date +%s.%N)")
say "one GEMM cubin audited in ${one_seconds} s: $(basename "$one_cubin")"
for arch in sm_100a sm_90; do
  "$moefin" audit "$out/cubins/routing_custom_block.$arch.cubin" "$out/cubins/dev_kernel.$arch.cubin" \
    --layout "$out/layouts/dev_kernel_params.json" --jobs "$jobs" --json "$out/kernels_$arch.json" -q \
    >> "$log" 2>&1
done

# 5. The released flow, for every GEMM1 x GEMM2 tactic: classes of equal facts, the verifier per
# class pair, and a sample of choices without the classes.
py=${PYTHON:-.venv/bin/python}
"$py" tools/audit/released_chain.py --work "$out" --launches "$study_dir"/released_nvfp4_launches.json \
  --bmm "$bmm" --moefin "$moefin" --jobs "$jobs" \
  --kernel-cubins "$out/cubins/routing_custom_block.sm_100a.cubin" "$out/cubins/dev_kernel.sm_100a.cubin" \
  --layout "$out/layouts/bmm_kernel_params.json" --layout "$out/layouts/dev_kernel_params.json" \
  | tee -a "$log"
"$py" tools/audit/released_summary.py --out "$study_dir"/released_audit.h5 \
  --work "$out" --launches "$study_dir"/released_nvfp4_launches.json --python-version "$py_version" \
  --cubin-version "$cubin_version" --bmm "$bmm" --gemm-seconds "$gemm_seconds" --nvcc "$nvcc" \
  --compile-command "nvcc -cubin -arch=ARCH -std=c++17 --expt-relaxed-constexpr -w (include path: tools/audit/released.sh) SOURCE" \
  --one-kernel-seconds "$one_seconds" --one-kernel-cubin "$(basename "$one_cubin")" --machine "$machine"
say "done: $study_dir/released_audit.h5 (moefin show $study_dir/released_audit.h5 --table released_chain)"
