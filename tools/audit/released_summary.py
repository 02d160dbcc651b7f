#!/usr/bin/env python3
"""studies/released_binaries_audit/released_audit.h5 from a run of tools/audit/released.sh: the
facts of every audited NVFP4 batched-GEMM cubin and every compiled released kernel (with the
package versions, tool versions and each cubin's sha256), and the chain's verdict over every choice of GEMM tactics
(released_chain.py's classes of tactics, the verifier's verdict per class pair, the sample checked
without the classes).

A moefin result file (schema moefin-results/1, docs/reference/result-files.md): `moefin show FILE`
lists it, `moefin show FILE --table released_gemm` (released_kernels, released_chain,
released_chain_classes, released_chain_tactics, released_chain_sample) prints a table as CSV."""
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


def link_of(outcome):
    """The kernel that orders a checked read, or the missing link of a race (the words of
    moefin audit --chain's outcome line)."""
    if " through " in outcome:
        return outcome.split(" through ", 1)[1]
    if outcome.startswith("RACE") and ": " in outcome:
        return "missing: " + outcome.split(": ", 1)[1]
    return ""


def chain_rows(chain, sha_of_cubin):
    """The tables of released_chain.py's result: per (class pair, check) rows, the classes, the
    tactics' membership, the end-to-end sample."""
    launches = chain["gemm_launches"]
    cls = chain["classes"]

    def pair_key(c):
        return " ".join("%s:c%d" % (launches[i], ci) for i, ci in enumerate(c))

    pairs = []
    for p in chain["pairs"]:
        cols = {"%s_class" % launches[i]: ci for i, ci in enumerate(p["classes"])}
        for check, c in zip(chain["checks"], p["checks"]):
            pairs.append(dict({"key": "%s: %s" % (pair_key(p["classes"]), check)}, **cols,
                              check=check, verdict=c["verdict"], outcome=c["outcome"],
                              link=link_of(c["outcome"]), choices=p["choices"],
                              of=chain["choices"]))
        pairs.append(dict({"key": "%s: whole chain" % pair_key(p["classes"])}, **cols,
                          check="whole chain", verdict=p["verdict"], outcome=p["verdict"],
                          link="", choices=p["choices"], of=chain["choices"]))
    classes, tactics = [], []
    for li, la in enumerate(cls):
        for ci, c in enumerate(la["classes"]):
            row = {"key": "%s:c%d" % (la["launch"], ci), "launch": la["launch"], "class": ci,
                   "tactics": len(c["members"]), "representative": c["members"][0]["kernel"]}
            row.update(c["facts"])
            classes.append(row)
            for a in c["members"]:
                cubin = "B" + a["kernel"][1:] + ".cubin"
                tactics.append({"key": sha_of_cubin[cubin], "launch": la["launch"], "class": ci,
                                "tactic": a["kernel"], "threads": int(a.get("threads", 0))})
    sample = []
    for i, x in enumerate(chain["sample"]):
        row = {"key": "%d" % i}
        for li, t in enumerate(x["tactics"]):
            row["%s_tactic" % launches[li]] = t
            row["%s_class" % launches[li]] = x["classes"][li]
        row.update({"verdict": x["verdict"],
                    "outcomes": ";".join(c["outcome"] for c in x["checks"]),
                    "agrees": int(x["agrees"])})
        sample.append(row)
    return pairs, classes, tactics, sample


def write_table(f, group, description, rows):
    """A kind "table" group (docs/reference/result-files.md): key, sample_offset, sample_count, then
    the row dicts' columns in their order (int -> int64, str -> fixed string of the longest
    value)."""
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
    # gzip 6, as the GPU result files are repacked (h5repack -f GZIP=6): a twentieth of the bytes.
    g.create_dataset("table", data=a, maxshape=(None,), chunks=(max(1, min(len(rows), 256)),),
                     compression="gzip", compression_opts=6)
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
    ap.add_argument("--one-kernel-seconds", type=float, default=0,
                    help="wall seconds of moefin audit over one GEMM cubin (--jobs 1)")
    ap.add_argument("--one-kernel-cubin", default="none")
    ap.add_argument("--machine", default="unknown",
                    help="where the scan ran: cores and load averages")
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

    chain_file = os.path.join(args.work, "chain_classes.json")
    chain = json.load(open(chain_file)) if os.path.exists(chain_file) else None
    chain_tables = chain_rows(chain, {r["cubin"]: r["key"] for r in gemm}) if chain else None
    choices = chain["choices"] if chain else 0

    prov = peers_torch.provenance(0)
    prov.update({
        "moefin_version": "tools/audit/released.sh",
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
        "chain_class_pairs": str(len(chain["pairs"]) if chain else 0),
        "chain_class_run_seconds": "%.0f" % (chain["class_run_seconds"] if chain else 0),
        "chain_sample_choices": str(len(chain["sample"]) if chain else 0),
        "chain_sample_disagreements": str(sum(not x["agrees"] for x in chain["sample"])
                                          if chain else 0),
        "chain_sample_seed": str(chain["sample_seed"] if chain else "none"),
        "chain_sample_run_seconds": "%.0f" % (chain["sample_run_seconds"] if chain else 0),
        "one_kernel_audit_seconds": "%.2f" % args.one_kernel_seconds,
        "one_kernel_audit_cubin": args.one_kernel_cubin,
        "audit_machine": args.machine,
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
        if chain_tables:
            pairs, classes, tactics, sample = chain_tables
            write_table(f, "released_chain",
                        "moefin audit --chain (the verifier) once per pair of GEMM1 and GEMM2 "
                        "tactic classes (classes of equal PDL facts, released_chain_classes), "
                        "each checked read's verdict and the whole chain's; choices = the "
                        "GEMM1 x GEMM2 tactic choices of the pair; link = the kernel that orders "
                        "the read, or the missing link of a race", pairs)
            write_table(f, "released_chain_classes",
                        "the classes of GEMM tactics with equal PDL facts (the facts columns "
                        "that define them), their sizes and the tactic the verifier ran", classes)
            write_table(f, "released_chain_tactics",
                        "every tactic of each GEMM launch (key: its cubin's sha256) and its class: "
                        "the released_chain rows of a choice are those of its classes' pair",
                        tactics)
            if sample:
                write_table(f, "released_chain_sample",
                            "choices of random GEMM1 and GEMM2 tactics verified end to end "
                            "without the classes (moefin audit --chain over those tactics' "
                            "cubins), against their class pair's verdicts", sample)
    os.replace(tmp, args.out)
    print("released_summary: %d GEMM cubins (%d wait before they trigger, %d read a routing "
          "output before their wait), %d compiled kernels, %d tactic choices -> %s"
          % (len(gemm), sum(r["wait_before_trigger"] for r in gemm),
             sum(bool(r["routing_reads_before_wait"]) for r in gemm), len(kernels), choices,
             args.out))


if __name__ == "__main__":
    main()
