#!/usr/bin/env python3
"""results/audit/released_audit.h5 from a run of scripts/audit/released.sh: the facts of every
audited NVFP4 batched-GEMM cubin and every compiled released kernel (with the package versions,
tool versions and each cubin's sha256), and the chain's verdict over every choice of GEMM tactics.

A moefin result file (schema moefin-results/1, data/README.md): `moefin show FILE` lists it,
`moefin show FILE --table released_gemm` (released_kernels, released_chain,
released_chain_racing) prints a table as CSV."""
import argparse
import datetime
import glob
import json
import os
import pathlib
import subprocess
import sys

import h5py
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "experiments" / "finalize"))
import peers_torch  # noqa: E402  (the moefin-results/1 root attributes of a file not from moefin)

# The GEMMs' KernelParams fields that point to buffers the released routing writes
# (released_launches.py maps them; trtllm_fused_moe_runner.cu passes them).
ROUTING_OUTPUTS = ("params.ptrRouteMap", "params.ptrNumNonExitingCtas",
                   "params.ptrTotalNumPaddedTokens", "params.ptrCtaIdxXyToBatchIdx",
                   "params.ptrCtaIdxXyToMnLimit")


def names(entries, pick=lambda a: True):
    return sorted({e["param"] or "(untraced)" for e in entries if pick(e)})


def joined(v):
    return ";".join(v)


def facts_columns(k):
    pre = k["pre_wait"]
    reads = [a for a in pre if a["kind"] != "write"]
    routing = [a for a in reads if a["param"] in ROUTING_OUTPUTS]
    return {
        "waits_every_path": int(k["waits_every_path"]),
        "wait_before_trigger": int(k["wait_before_trigger"]),
        "trigger": k["trigger"],
        "warps": int(k["warps"] or 0),
        "waiting_warps": " ".join(str(w) for w in k["waiting_warps"]),
        "pre_wait_reads": joined(names(reads)),
        "pre_wait_writes": joined(names([a for a in pre if a["kind"] != "read"])),
        "post_trigger_writes": joined(names(k["post_trigger_writes"])),
        "switches": joined(s["param"] + " " + s["test"] + " (" + s["decided_by"] + ")"
                           for s in k["switches"]),
        "routing_reads_before_wait": joined(names(routing)),
        "routing_reads_before_any_sync": joined(names(routing, lambda a: a["before_any_sync"])),
        "routing_read_instructions": joined(
            sorted({i for a in routing for i in a["instructions"]})),
    }


def write_table(f, group, description, rows):
    """A kind "table" group (data/README.md): key, sample_offset, sample_count, then the row
    dicts' columns in their order (int -> int64, str -> fixed string of the longest value)."""
    cols = list(rows[0].keys())
    fields = [("key", "S160"), ("sample_offset", "<i8"), ("sample_count", "<i8")]
    for c in cols:
        if c == "key":
            continue
        if isinstance(rows[0][c], str):
            n = max(1, max(len(r[c].encode()) for r in rows)) + 1
            fields.append((c, "S%d" % n))
        else:
            fields.append((c, "<i8"))
    dt = np.dtype(fields)
    a = np.zeros(len(rows), dtype=dt)
    keys = set()
    for i, r in enumerate(rows):
        if r["key"] in keys or len(r["key"].encode()) >= 160:
            sys.exit("released_summary: %s: bad or duplicate key %s" % (group, r["key"]))
        keys.add(r["key"])
        for c in cols:
            a[i][c] = r[c].encode() if isinstance(r[c], str) else r[c]
    g = f.create_group(group)
    g.attrs["kind"] = "table"
    g.attrs["experiment"] = group
    g.attrs["description"] = description
    g.create_dataset("table", data=a, maxshape=(None,), chunks=(max(1, min(len(rows), 256)),))
    g.create_dataset("samples", shape=(0,), maxshape=(None,), chunks=(1024,), dtype="<f8")


def tool_line(path, flag="--version"):
    try:
        out = subprocess.run([path, flag], capture_output=True, text=True, timeout=60).stdout
        return [l for l in out.splitlines() if l.strip()][-1]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="the HDF5 file to write (replaced)")
    ap.add_argument("--work", required=True, help="released.sh's OUTDIR")
    ap.add_argument("--launches", required=True)
    ap.add_argument("--python-version", required=True)
    ap.add_argument("--cubin-version", required=True)
    ap.add_argument("--bmm", required=True, help="the batched_gemm-* directory audited")
    ap.add_argument("--gemm-seconds", type=float, default=0)
    ap.add_argument("--nvcc", default="nvcc")
    ap.add_argument("--compile-command", default="")
    args = ap.parse_args()

    shipped = {}
    cks = os.path.join(args.bmm, "checksums.txt")
    if os.path.exists(cks):
        for line in open(cks):
            parts = line.split()
            if len(parts) == 2:
                shipped[os.path.basename(parts[1])] = parts[0]
    launches = json.load(open(args.launches))
    role = {}
    for la in launches["launches"]:
        if isinstance(la["kernel"], list):
            for alt in la["kernel"]:
                role[alt["kernel"]] = la["name"]

    # Every NVFP4 GEMM cubin (each holds its kernel and a GetSmemSize helper entry, which
    # returns the kernel's shared-memory size and has no PDL instruction).
    gemm, seconds, tools = [], 0.0, {}
    for f in sorted(glob.glob(os.path.join(args.work, "gemm_facts_*.json"))):
        j = json.load(open(f))
        seconds += j["seconds"]
        tools = j["tools"]
        for k in j["kernels"]:
            if k["name"].endswith("GetSmemSize"):
                continue
            cubin = os.path.basename(k["cubin"])
            r = {"key": k["sha256"], "cubin": cubin,
                 "wheel_checksum_ok": int(shipped.get(cubin) == k["sha256"]),
                 "threads": 32 * int(k["warps"] or 0),
                 "flow_launch": role.get(k["name"], "none")}
            r.update(facts_columns(k))
            gemm.append(r)
    if not gemm:
        sys.exit("released_summary: no GEMM facts in %s" % args.work)
    gemm.sort(key=lambda r: r["cubin"])

    kernels = []
    for f in sorted(glob.glob(os.path.join(args.work, "kernels_*.json"))):
        for i, k in enumerate(json.load(open(f))["kernels"]):
            r = {"key": "%s,%s,%d" % (k["arch"], os.path.basename(k["cubin"]).split(".")[0], i),
                 "arch": k["arch"], "cubin": os.path.basename(k["cubin"]),
                 "cubin_sha256": k["sha256"], "kernel": k["short_name"],
                 "symbol": k["name"]}
            r.update(facts_columns(k))
            kernels.append(r)

    chain_file = os.path.join(args.work, "chain.json")
    chain = json.load(open(chain_file)) if os.path.exists(chain_file) else {
        "choices": 0, "distinct_chains": 0, "checks": [], "verdicts": {}}
    choices = int(chain["choices"])
    checks, racing = [], []
    for c in chain["checks"]:
        for outcome, count in c["outcomes"].items():
            checks.append({"key": "%s: %s" % (c["check"], outcome)[:150], "check": c["check"],
                           "outcome": outcome, "choices": int(count), "of": choices})
        for launch, alts in c["racing_alternatives"].items():
            for a in alts:
                racing.append({"key": "%s|%s|%d" % (c["check"][:60], launch, len(racing)),
                               "check": c["check"], "launch": launch, "tactic": a})
    for v, count in chain["verdicts"].items():
        checks.append({"key": "whole chain: %s" % v, "check": "whole chain", "outcome": v,
                       "choices": int(count), "of": choices})

    prov = peers_torch.provenance(0)
    prov.update({
        "moefin_version": "scripts/audit/released.sh",
        "command_line": " ".join(["released_summary.py"] + sys.argv[1:]),
        "seed": "none",
        "compiler": "none",
        "cuda_compiler_version": tool_line(args.nvcc),
        "cuda_architectures": "sm_100a,sm_90 (compiled released kernels); sm_100f (GEMM cubins)",
        "gpu_note": "no GPU: facts read from the binaries",
        "flashinfer_python_version": args.python_version,
        "flashinfer_cubin_version": args.cubin_version,
        "batched_gemm_dir": os.path.relpath(args.bmm, os.path.dirname(os.path.dirname(
            os.path.dirname(args.bmm)))),
        "cuobjdump_version": tools.get("cuobjdump", "unknown"),
        "nvdisasm_version": tools.get("nvdisasm", "unknown"),
        "released_compile_command": args.compile_command,
        "launches_file": os.path.relpath(args.launches, ROOT),
        "gemm_cubins": str(len(gemm)),
        "gemm_audit_seconds": "%.1f" % seconds,
        "gemm_audit_wall_seconds": "%.0f" % args.gemm_seconds,
        "chain_choices": str(choices),
        "chain_distinct": str(chain["distinct_chains"]),
    })
    tmp = args.out + ".tmp"
    with h5py.File(tmp, "w") as f:
        for k, v in prov.items():
            f.attrs[k] = str(v)
        write_table(f, "released_gemm",
                    "every NVFP4 batched-GEMM cubin of flashinfer-cubin (E2m1 in the name), "
                    "audited warp by warp at its threads per CTA: key = the cubin's sha256; "
                    "flow_launch = the launch of released_nvfp4_launches.json it is a tactic of; "
                    "routing_* = pre-wait reads of fields that point to routing outputs "
                    "(before_any_sync: before any barrier and the thread's wait)", gemm)
        write_table(f, "released_kernels",
                    "the released routing block and dev kernels compiled from flashinfer-python "
                    "for sm_100a and sm_90 (released_compile_command)", kernels)
        if checks:
            write_table(f, "released_chain",
                        "moefin audit --chain over the launches file: each checked read's "
                        "outcome and the number of GEMM1 x GEMM2 tactic choices giving it", checks)
        if racing:
            write_table(f, "released_chain_racing",
                        "the tactics of the choices in which a checked read races", racing)
    os.replace(tmp, args.out)
    print("released_summary: %d GEMM cubins (%d wait before they trigger, %d read a routing "
          "output before their wait), %d compiled kernels, %d tactic choices -> %s"
          % (len(gemm), sum(r["wait_before_trigger"] for r in gemm),
             sum(bool(r["routing_reads_before_wait"]) for r in gemm), len(kernels), choices,
             args.out))


if __name__ == "__main__":
    main()
