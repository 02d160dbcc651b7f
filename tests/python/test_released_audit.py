"""results/audit/released_audit.h5 (scripts/audit/released.sh): its structure and provenance, the
chain's counts against the launches file, and, where the cubin wheel is unpacked
(FLASHINFER_CUBIN_DIR or released.sh's cache), a fixed handful of its GEMM rows reproduced by
auditing those cubins again."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import h5py
import pytest

from conftest import ROOT, run

sys.path.insert(0, str(ROOT / "scripts" / "audit"))
from released_summary import facts_columns  # noqa: E402  (the committed rows' columns)

DATA = ROOT / "results" / "audit"
FILE = DATA / "released_audit.h5"
LAUNCHES = DATA / "released_nvfp4_launches.json"
FACTS = ("waits_every_path", "wait_before_trigger", "trigger", "waiting_warps", "pre_wait_reads",
         "post_trigger_writes", "routing_reads_before_wait", "routing_reads_before_any_sync")


def table(f, name):
    t = f[name]["table"][()]
    return [{k: (v.decode() if isinstance(v, bytes) else int(v)) for k, v in zip(t.dtype.names, r)}
            for r in t]


@pytest.fixture(scope="module")
def released():
    with h5py.File(FILE, "r") as f:
        return ({k: str(v) for k, v in f.attrs.items()},
                {g: table(f, g) for g in f.keys()})


def test_provenance_names_the_packages_and_tools(released):
    attrs, _ = released
    assert attrs["moefin_schema"] == "moefin-results/1"
    assert attrs["flashinfer_python_version"] == "0.7.2.post1"
    assert attrs["flashinfer_cubin_version"] == "0.6.13"
    assert "13.5" in attrs["nvdisasm_version"] and "13.5" in attrs["cuobjdump_version"]


def test_every_nvfp4_cubin_is_audited_and_matches_the_wheel(released):
    attrs, t = released
    gemm = t["released_gemm"]
    assert len(gemm) == int(attrs["gemm_cubins"]) > 1000
    assert all("E2m1" in r["cubin"] for r in gemm)
    assert all(r["wheel_checksum_ok"] == 1 for r in gemm)
    assert all(len(r["key"]) == 64 for r in gemm)
    # Every tactic the launches file offers each GEMM launch is a row with that launch.
    launches = json.loads(LAUNCHES.read_text())
    for la in launches["launches"]:
        if isinstance(la["kernel"], list):
            have = sum(r["flow_launch"] == la["name"] for r in gemm)
            assert have == len(la["kernel"]), la["name"]


def test_chain_counts_cover_every_tactic_choice(released):
    attrs, t = released
    if "released_chain" not in t:
        pytest.skip("the file holds no chain verdict (moefin audit --chain did not run)")
    launches = json.loads(LAUNCHES.read_text())
    choices = 1
    for la in launches["launches"]:
        if isinstance(la["kernel"], list):
            choices *= len(la["kernel"])
    assert int(attrs["chain_choices"]) == choices
    per_check = {}
    for r in t["released_chain"]:
        assert r["of"] == choices
        per_check[r["check"]] = per_check.get(r["check"], 0) + r["choices"]
    assert len(per_check) == len(launches["check"]) + 1  # the checks and the whole chain
    assert all(n == choices for n in per_check.values()), per_check


def test_compiled_released_kernels_cover_both_architectures(released):
    _, t = released
    archs = {r["arch"] for r in t["released_kernels"]}
    assert archs == {"sm_90", "sm_100a"}
    small = [r for r in t["released_kernels"] if "finalizeKernelSmallBatch" in r["kernel"]]
    assert {r["arch"] for r in small} == {"sm_90", "sm_100a"}


def cubin_dir():
    for base in filter(None, [os.environ.get("FLASHINFER_CUBIN_DIR"),
                              str(pathlib.Path(os.environ.get("MOEFIN_CACHE_DIR", pathlib.Path.home()
                                                              / ".cache" / "moefin"))
                                  / "released" / "flashinfer_cubin-0.6.13")]):
        found = sorted(pathlib.Path(base).glob("flashinfer_cubin/cubins/*/batched_gemm-*"))
        if found:
            return found[0]
    return None


def test_a_handful_of_rows_reproduce_from_the_cubins(released, moefin, tmp_path):
    bmm = cubin_dir()
    if bmm is None:
        pytest.skip("flashinfer-cubin 0.6.13 not unpacked (scripts/audit/released.sh fetches it)")
    layout = tmp_path / "bmm.json"
    header = bmm / "include" / "trtllmGen_bmm_export" / "KernelParamsDecl.h"
    nvcc = os.environ.get("CUDACXX") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run([sys.executable, str(ROOT / "scripts/audit/struct_layout.py"), "--header",
                    str(header), "--prelude", "#include <cuda.h>\n#include <cstdint>", "-I",
                    str(pathlib.Path(nvcc).resolve().parent.parent / "include"), "--struct",
                    "batchedGemm::KernelParams", "--kernel", "bmm_=params:KernelParams",
                    "--source", "test", "--out", str(layout)], check=True, cwd=ROOT)
    _, t = released
    rows = sorted(t["released_gemm"], key=lambda r: r["cubin"])
    # One of each block size, fixed by position in the sorted table.
    picked = {}
    for r in rows:
        picked.setdefault(r["threads"], r)
    for r in picked.values():
        out = tmp_path / (r["key"] + ".json")
        run(moefin, "audit", bmm / r["cubin"], "--threads", r["threads"], "--layout", layout,
            "--json", out, "-q")
        ks = [k for k in json.loads(out.read_text())["kernels"]
              if not k["name"].endswith("GetSmemSize")]
        assert len(ks) == 1 and ks[0]["sha256"] == r["key"]
        now = facts_columns(ks[0])
        for c in FACTS:
            assert now[c] == r[c], (r["cubin"], c)
