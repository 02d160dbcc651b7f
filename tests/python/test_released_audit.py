"""studies/released_binaries_audit/released_audit.h5 (tools/audit/released.sh): its structure and
provenance, the chain's counts against the launches file, and, where the cubin wheel is installed
(FLASHINFER_CUBIN_DIR, .deps by scripts/setup.sh, or released.sh's cache), a fixed handful of its
GEMM rows reproduced by auditing those cubins again."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import h5py
import pytest

from conftest import ROOT, run

sys.path.insert(0, str(ROOT / "tools" / "audit"))
from released_summary import facts_columns  # noqa: E402  (the committed rows' columns)

DATA = ROOT / "studies" / "released_binaries_audit"
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


def gemm_launches(launches):
    return [la for la in launches["launches"] if isinstance(la["kernel"], list)]


def test_chain_counts_cover_every_tactic_choice(released):
    attrs, t = released
    launches = json.loads(LAUNCHES.read_text())
    choices = 1
    for la in gemm_launches(launches):
        choices *= len(la["kernel"])
    assert choices == 161 * 171
    assert int(attrs["chain_choices"]) == choices
    per_check = {}
    for r in t["released_chain"]:
        assert r["of"] == choices
        per_check[r["check"]] = per_check.get(r["check"], 0) + r["choices"]
    assert len(per_check) == len(launches["check"]) + 1  # the checks and the whole chain
    assert all(n == choices for n in per_check.values()), per_check
    assert int(attrs["chain_class_pairs"]) * len(per_check) == len(t["released_chain"])


def test_every_tactic_is_in_one_class_of_its_facts(released):
    _, t = released
    launches = json.loads(LAUNCHES.read_text())
    gemm = {r["key"]: r for r in t["released_gemm"]}
    classes = {(r["launch"], r["class"]): r for r in t["released_chain_classes"]}
    tactics = t["released_chain_tactics"]
    for la in gemm_launches(launches):
        mine = [r for r in tactics if r["launch"] == la["name"]]
        assert sorted(r["tactic"] for r in mine) == sorted(a["kernel"] for a in la["kernel"])
        for (launch, ci), c in classes.items():
            if launch == la["name"]:
                assert c["tactics"] == sum(r["class"] == ci for r in mine)
        for r in mine:
            row, c = gemm[r["key"]], classes[(la["name"], r["class"])]
            assert row["flow_launch"] == la["name"]
            for col in ("waits_every_path", "wait_before_trigger", "trigger", "pre_wait_reads",
                        "pre_wait_writes", "post_trigger_writes"):
                assert row[col] == c[col], (r["tactic"], col)
    # Each pair's choices are its classes' sizes multiplied.
    for r in t["released_chain"]:
        assert r["choices"] == (classes[("gemm1", r["gemm1_class"])]["tactics"] *
                                classes[("gemm2", r["gemm2_class"])]["tactics"])


def expected_outcome(launches, row, classes):
    """The ordering rule of docs/design/pdl.md on the classes' facts: a pre-wait read of routing's
    output is ordered through the first kernel in between that waits before it triggers, every
    kernel before that one waiting on every path; no such read when the class has none."""
    names = [la["name"] for la in launches["launches"]]
    reader = row["check"].split(" ")[0]
    buffer = row["check"].split(" ")[2]
    if reader in ("gemm1", "gemm2"):
        la = launches["launches"][names.index(reader)]
        params = {p for p, b in la["params"].items() if b == buffer}
        reads = classes[(reader, row[reader + "_class"])]["pre_wait_reads"].split(";")
        if not params & set(reads):
            return "none", ""
    between = names[names.index("routing") + 1:names.index(reader)]
    for k in between:
        c = classes[(k, row[k + "_class"])]
        if c["wait_before_trigger"]:
            return "ordered", k
        if not c["waits_every_path"]:
            break
    return "race", None


def test_chain_verdicts_follow_the_kernels_facts(released):
    _, t = released
    launches = json.loads(LAUNCHES.read_text())
    classes = {(r["launch"], r["class"]): r for r in t["released_chain_classes"]}
    for r in t["released_chain"]:
        if r["check"] == "whole chain":
            assert r["verdict"] in ("ordered", "race")
            continue
        verdict, link = expected_outcome(launches, r, classes)
        assert r["verdict"] == verdict, r["key"]
        if verdict == "ordered":
            assert r["link"] == link, r["key"]
        elif verdict == "race":
            assert r["link"].startswith("missing: "), r["key"]


def test_sampled_choices_agree_without_the_classes(released):
    attrs, t = released
    sample = t["released_chain_sample"]
    assert len(sample) == int(attrs["chain_sample_choices"]) >= 200
    assert int(attrs["chain_sample_disagreements"]) == 0
    assert all(r["agrees"] == 1 for r in sample)
    member = {(r["launch"], r["tactic"]): r["class"] for r in t["released_chain_tactics"]}
    for r in sample:
        for g in ("gemm1", "gemm2"):
            assert member[(g, r[g + "_tactic"])] == r[g + "_class"]
    assert len({(r["gemm1_tactic"], r["gemm2_tactic"]) for r in sample}) == len(sample)


def test_scan_times_are_recorded(released):
    attrs, _ = released
    assert float(attrs["gemm_audit_wall_seconds"]) > 0
    assert float(attrs["one_kernel_audit_seconds"]) > 0
    assert "cores" in attrs["audit_machine"] and "load average" in attrs["audit_machine"]


def test_compiled_released_kernels_cover_both_architectures(released):
    _, t = released
    archs = {r["arch"] for r in t["released_kernels"]}
    assert archs == {"sm_90", "sm_100a"}
    small = [r for r in t["released_kernels"] if "finalizeKernelSmallBatch" in r["kernel"]]
    assert {r["arch"] for r in small} == {"sm_90", "sm_100a"}


def cubin_dir():
    """The batched-GEMM folder (cubins, include/trtllmGen_bmm_export/): in an unpacked wheel that
    FLASHINFER_CUBIN_DIR names, else where scripts/setup.sh installs it (scripts/fetch_released.sh),
    else in released.sh's cache."""
    def in_wheel(base):
        found = sorted(pathlib.Path(base).glob("flashinfer_cubin/cubins/*/batched_gemm-*"))
        return found[0] if found else None

    if os.environ.get("FLASHINFER_CUBIN_DIR"):
        return in_wheel(os.environ["FLASHINFER_CUBIN_DIR"])
    installed = ROOT / ".deps" / "flashinfer" / "cubin" / "batched_gemm"
    if (installed / "include" / "trtllmGen_bmm_export").is_dir():
        return installed
    cache = pathlib.Path(os.environ.get("MOEFIN_CACHE_DIR",
                                        pathlib.Path.home() / ".cache" / "moefin"))
    return in_wheel(cache / "released" / "flashinfer_cubin-0.6.13")


def test_a_handful_of_rows_reproduce_from_the_cubins(released, moefin, tmp_path):
    bmm = cubin_dir()
    if bmm is None:
        pytest.skip("flashinfer-cubin 0.6.13 not found (in FLASHINFER_CUBIN_DIR if set, else in "
                    ".deps, where scripts/setup.sh installs it)")
    layout = tmp_path / "bmm.json"
    header = bmm / "include" / "trtllmGen_bmm_export" / "KernelParamsDecl.h"
    nvcc = os.environ.get("CUDACXX") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    subprocess.run([sys.executable, str(ROOT / "tools/audit/struct_layout.py"), "--header",
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
