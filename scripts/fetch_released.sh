#!/usr/bin/env bash
# Installs the released packages moefin builds and reads (docs/design/released.md), pinned by
# version and sha256, and is quick when they are there (called by scripts/setup.sh):
# flashinfer-python 0.7.2.post1  the released CUDA sources (finalize, permute, activation, routing)
# and the headers they include (CUTLASS, CCCL, spdlog) flashinfer-cubin 0.6.13        the trtllm-gen
# batched-GEMM export headers, flashinferMetaInfo.h and the batched-GEMM cubins
# nvidia-cuda-cuobjdump 13.5.37  cuobjdump and nvdisasm (the machines' CUDA lacks them)
# nvidia-cuda-nvdisasm 13.5.37 `pip download --no-deps` puts the wheels into
# ${MOEFIN_CACHE_DIR:-$HOME/.cache/moefin}/wheels (no torch, nothing installed into any Python);
# each wheel's sha256 is checked against the value pinned below. Only the parts moefin uses are
# unpacked, once per cache, into <cache>/unpacked/<package>-<version>/, and the checkout sees them
# as .deps/flashinfer/python/   csrc/fused_moe/trtllm_backend/, csrc/nv_internal/include/, include/,
# cutlass/include/, cutlass/tools/util/include/, cccl/{cub,libcudacxx/include,thrust}/,
# spdlog/include/ (the wheel's flashinfer/data/ prefix removed), LICENSE .deps/flashinfer/cubin/
# batched_gemm/ (the wheel's batched-GEMM artifact folder: *.cubin, checksums.txt,
# include/flashinferMetaInfo.h, include/trtllmGen_bmm_export/...), and include/flashinfer/trtllm/
# batched_gemm/trtllmGen_bmm_export/ (a copy of those headers under the name the released sources
# include them by) .deps/tools/bin/           cuobjdump, nvdisasm (copied: they are small and travel
# with .deps) The two flashinfer folders are links into the cache: unpacked they are ~270 MB, more
# than a GPU call may carry, and every checkout of the machine shares them.
# scripts/device_prepare.sh copies the few MB the build includes (nvcc -M) into .deps/gpu/ for the
# GPU machine. Without a registry (offline) it fails with one line and exit 1; the build then leaves
# the adapter out and its tests report themselves skipped. Exit 2: bad usage. usage:
# scripts/fetch_released.sh [--check]   (--check: only say whether everything is there)
set -euo pipefail
cd "$(dirname "$0")/.."

check_only=0
case ${1:-} in
  "") ;;
  --check) check_only=1 ;;
  -h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "fetch_released: unknown argument '$1' (usage: scripts/fetch_released.sh [--check])" >&2
     exit 2 ;;
esac

cache=${MOEFIN_CACHE_DIR:-$HOME/.cache/moefin}
wheels=$cache/wheels
unpacked=$cache/unpacked

# name==version, wheel file, sha256 (the files PyPI serves for these versions).
specs=(
  "flashinfer-python==0.7.2.post1|flashinfer_python-0.7.2.post1-py3-none-any.whl|bfdc18b9e1e4d8d0730fe4343dc0e284cd0c160086de80f99888bc4867922d49"
  "flashinfer-cubin==0.6.13|flashinfer_cubin-0.6.13-py3-none-any.whl|41e4848c2d09d220e8394489b2fb6cfec6b6ad09f897b5ab8b39fc23055f6c24"
  "nvidia-cuda-cuobjdump==13.5.37|nvidia_cuda_cuobjdump-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl|38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58"
  "nvidia-cuda-nvdisasm==13.5.37|nvidia_cuda_nvdisasm-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl|d3fdbdd49fa53e2e4aacd3db8259d052bd2b049ececdcb69e92e083c6728e7ca"
)
py_dir=$unpacked/flashinfer-python-0.7.2.post1
cubin_dir=$unpacked/flashinfer-cubin-0.6.13
# The batched-GEMM artifact inside flashinfer-cubin (its content hash and build names).
bmm_artifact=flashinfer_cubin/cubins/d2c5915bf45ae64308a947824c14966c2718a292/batched_gemm-91e0ba0-896b90b
# What the checkout must show when everything is in place.
want=(.deps/flashinfer/python/csrc/fused_moe/trtllm_backend/trtllm_fused_moe_dev_kernel.cu
      .deps/flashinfer/python/include/flashinfer/trtllm/fused_moe/DevKernel.h
      .deps/flashinfer/cubin/include/flashinfer/trtllm/batched_gemm/trtllmGen_bmm_export/trtllm/gen/DtypeDecl.h
      .deps/flashinfer/cubin/batched_gemm/include/flashinferMetaInfo.h
      .deps/tools/bin/cuobjdump .deps/tools/bin/nvdisasm)

complete() {
  local f
  for f in "${want[@]}"; do [[ -e $f ]] || return 1; done
  [[ -f $py_dir/.complete && -f $cubin_dir/.complete ]]
}

if complete; then
  ((check_only)) && echo "fetch_released: installed (.deps/flashinfer -> $unpacked)"
  exit 0
fi
if ((check_only)); then
  echo "fetch_released: not installed (run scripts/fetch_released.sh)"
  exit 1
fi

pick_python() {
  local p
  for p in .venv/bin/python python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -m pip --version >/dev/null 2>&1; then
      echo "$p"
      return 0
    fi
  done
  return 1
}
python=$(pick_python) || {
  echo "fetch_released: no Python with pip found (run scripts/setup.sh first)" >&2
  exit 1
}

mkdir -p "$wheels" "$unpacked"
exec 9>"$cache/.fetch.lock"
flock 9 # one fetch at a time per cache: checkouts of one machine share it

sha_ok() { [[ -f $1 ]] && [[ $(sha256sum "$1" | cut -d' ' -f1) == "$2" ]]; }

for spec in "${specs[@]}"; do
  IFS='|' read -r req file sha <<<"$spec"
  path=$wheels/$file
  sha_ok "$path" "$sha" && continue
  rm -f "$path"
  echo "fetch_released: downloading $req"
  if ! err=$("$python" -m pip download --no-deps --only-binary=:all: --disable-pip-version-check \
      --retries 1 --timeout 20 -q -d "$wheels" "$req" 2>&1); then
    last=$(printf '%s\n' "$err" | grep -v '^\s*$' | tail -1)
    echo "fetch_released: cannot download $req from the package index (offline?): $last" >&2
    exit 1
  fi
  if ! sha_ok "$path" "$sha"; then
    got=$( [[ -f $path ]] && sha256sum "$path" | cut -d' ' -f1 || echo "no file $file")
    rm -f "$path"
    echo "fetch_released: $file: sha256 $got is not the pinned $sha" >&2
    exit 1
  fi
done

# Extracts the members of a wheel under the given prefixes into a folder, prefix `strip` removed.
extract() { # wheel dest strip prefix...
  "$python" - "$@" <<'EOF'
import os, sys, zipfile
wheel, dest, strip, prefixes = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
n = 0
with zipfile.ZipFile(wheel) as z:
    for info in z.infolist():
        name = info.filename
        if info.is_dir() or not any(name.startswith(p) for p in prefixes):
            continue
        rel = name[len(strip):] if name.startswith(strip) else name
        if rel.startswith("/") or ".." in rel.split("/"):
            sys.exit(f"fetch_released: {wheel}: unsafe member name {name}")
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with z.open(info) as src, open(target, "wb") as out:
            out.write(src.read())
        mode = (info.external_attr >> 16) & 0o777
        if mode:
            os.chmod(target, mode)
        n += 1
if n == 0:
    sys.exit(f"fetch_released: {wheel}: nothing under {prefixes}")
EOF
}

if [[ ! -f $py_dir/.complete ]]; then
  echo "fetch_released: unpacking the flashinfer-python sources moefin builds"
  tmp=$py_dir.tmp.$$
  rm -rf "$tmp"
  d=flashinfer/data/
  extract "$wheels/flashinfer_python-0.7.2.post1-py3-none-any.whl" "$tmp" "$d" \
    "${d}csrc/fused_moe/trtllm_backend/" "${d}csrc/nv_internal/include/" "${d}include/" \
    "${d}cutlass/include/" "${d}cutlass/tools/util/include/" "${d}cccl/cub/" \
    "${d}cccl/libcudacxx/include/" "${d}cccl/thrust/" "${d}spdlog/include/"
  extract "$wheels/flashinfer_python-0.7.2.post1-py3-none-any.whl" "$tmp" \
    flashinfer_python-0.7.2.post1.dist-info/licenses/ flashinfer_python-0.7.2.post1.dist-info/licenses/
  touch "$tmp/.complete"
  rm -rf "$py_dir"
  mv "$tmp" "$py_dir"
fi
if [[ ! -f $cubin_dir/.complete ]]; then
  echo "fetch_released: unpacking the flashinfer-cubin batched-GEMM artifact"
  tmp=$cubin_dir.tmp.$$
  rm -rf "$tmp"
  extract "$wheels/flashinfer_cubin-0.6.13-py3-none-any.whl" "$tmp/batched_gemm" \
    "$bmm_artifact/" "$bmm_artifact/"
  # The name the released sources include these headers by (FlashInfer's JIT makes it a link).
  inc=$tmp/include/flashinfer/trtllm/batched_gemm
  mkdir -p "$inc"
  cp -r "$tmp/batched_gemm/include/trtllmGen_bmm_export" "$inc/"
  touch "$tmp/.complete"
  rm -rf "$cubin_dir"
  mv "$tmp" "$cubin_dir"
fi

mkdir -p .deps/flashinfer .deps/tools/bin
for pair in "python|$py_dir" "cubin|$cubin_dir"; do
  IFS='|' read -r name target <<<"$pair"
  link=.deps/flashinfer/$name
  if [[ -e $link && ! -L $link ]]; then
    rm -rf "$link" # an older real folder: replaced by the shared unpack
  fi
  ln -sfn "$target" "$link"
done
tools=$(mktemp -d)
trap 'rm -rf "$tools"' EXIT
extract "$wheels/nvidia_cuda_cuobjdump-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl" \
  "$tools" nvidia/cu13/bin/ nvidia/cu13/bin/cuobjdump
extract "$wheels/nvidia_cuda_nvdisasm-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl" \
  "$tools" nvidia/cu13/bin/ nvidia/cu13/bin/nvdisasm
install -m 0755 "$tools/cuobjdump" "$tools/nvdisasm" .deps/tools/bin/

complete || { echo "fetch_released: unpacked, but ${want[*]} are not all there" >&2; exit 1; }
echo "fetch_released: installed flashinfer-python 0.7.2.post1, flashinfer-cubin 0.6.13," \
  "cuobjdump/nvdisasm 13.5.37 (.deps/flashinfer -> $unpacked)"
