#!/usr/bin/env bash
# Fetches the released packages moefin reads, pinned, from PyPI (pip download --no-deps, cached in
# ${MOEFIN_CACHE_DIR:-$HOME/.cache/moefin}/wheels) and unpacks what the build and the audit use
# into .deps/ (git-ignored). Idempotent; scripts/setup.sh calls it.
#   tools: cuobjdump and nvdisasm (nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm) -> .deps/tools/bin,
#          for `moefin audit` (the CUDA install of the GPU machines lacks them).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${MOEFIN_CACHE_DIR:-$HOME/.cache/moefin}/wheels
mkdir -p "$cache" .deps/tools/bin

tools_version=13.5.37
fetch() { # requirement wheel-glob
  compgen -G "$cache/$2" >/dev/null && return 0
  echo "fetch_released: downloading $1"
  python3 -m pip download -q --disable-pip-version-check --no-deps -d "$cache" "$1"
}
fetch "nvidia-cuda-cuobjdump==$tools_version" "nvidia_cuda_cuobjdump-$tools_version-*.whl"
fetch "nvidia-cuda-nvdisasm==$tools_version" "nvidia_cuda_nvdisasm-$tools_version-*.whl"
stamp=.deps/tools/.version
if [[ ! -x .deps/tools/bin/cuobjdump || ! -x .deps/tools/bin/nvdisasm ||
      $(cat "$stamp" 2>/dev/null) != "$tools_version" ]]; then
  for tool in cuobjdump nvdisasm; do
    wheel=$(compgen -G "$cache/nvidia_cuda_${tool}-$tools_version-*.whl" | head -1)
    # The wheel (a zip) holds nvidia/cu13/bin/<tool>; take that one file.
    python3 - "$wheel" "$tool" .deps/tools/bin <<'PY'
import os, sys, zipfile
wheel, tool, dest = sys.argv[1:]
with zipfile.ZipFile(wheel) as z:
    names = [n for n in z.namelist() if n.endswith("/bin/" + tool)]
    if not names:
        sys.exit("fetch_released: %s holds no bin/%s" % (wheel, tool))
    with z.open(names[0]) as src, open(os.path.join(dest, tool), "wb") as out:
        out.write(src.read())
os.chmod(os.path.join(dest, tool), 0o755)
PY
  done
  echo "$tools_version" > "$stamp"
  echo "fetch_released: cuobjdump and nvdisasm $tools_version in .deps/tools/bin"
fi
