#!/usr/bin/env python3
"""data/audit/ from a run of scripts/audit/released.sh: the facts of every audited released
kernel and cubin (with the package versions and each cubin's sha256) and the chain's verdict
for every choice of GEMM tactics. Small files: one summary record per kernel."""
import argparse
import datetime
import glob
import hashlib
import json
import os
import subprocess
import sys


def names(entries):
    return sorted({e["param"] or "(untraced)" for e in entries})


def record(k):
    return {
        "kernel": k["name"],
        "cubin": os.path.basename(k["cubin"]),
        "sha256": k["sha256"],
        "arch": k["arch"],
        "threads": 32 * k["warps"] if k["warps"] else None,
        "waits_every_path": k["waits_every_path"],
        "wait_before_trigger": k["wait_before_trigger"],
        "trigger": k["trigger"],
        "waiting_warps": k["waiting_warps"],
        "pre_wait_reads": names([a for a in k["pre_wait"] if a["kind"] != "write"]),
        "pre_wait_writes": names([a for a in k["pre_wait"] if a["kind"] != "read"]),
        "post_trigger_writes": names(k["post_trigger_writes"]),
        "switches": [s["param"] + " " + s["test"] + " (" + s["decided_by"] + ")"
                     for s in k["switches"]],
    }


def provenance(args):
    commit = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"]).returncode != 0
    tools = {}
    for f in glob.glob(os.path.join(args.work, "gemm_facts_*.json"))[:1]:
        tools = json.load(open(f))["tools"]
    return {
        "packages": {"flashinfer-python": args.python_version,
                     "flashinfer-cubin": args.cubin_version},
        "tools": {"cuobjdump": tools.get("cuobjdump", ""), "nvdisasm": tools.get("nvdisasm", "")},
        "moefin_commit": commit + ("-dirty" if dirty else ""),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "written_by": "scripts/audit/released.sh (scripts/audit/released_summary.py)",
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--python-version", required=True)
    ap.add_argument("--cubin-version", required=True)
    ap.add_argument("--bmm", required=True)
    ap.add_argument("--gemm-seconds", type=float, default=0)
    ap.add_argument("--moefin", default="build/moefin")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    prov = provenance(args)

    # Every NVFP4 GEMM cubin; the wheel's checksums.txt must agree with the audited bytes.
    shipped = {}
    cks = os.path.join(args.bmm, "checksums.txt")
    if os.path.exists(cks):
        for line in open(cks):
            parts = line.split()
            if len(parts) == 2:
                shipped[parts[1]] = parts[0]
    gemms, seconds, cubins = [], 0.0, 0
    for f in sorted(glob.glob(os.path.join(args.work, "gemm_facts_*.json"))):
        j = json.load(open(f))
        seconds += j["seconds"]
        cubins += j["cubins"]
        for k in j["kernels"]:
            if k["name"].endswith("GetSmemSize"):
                continue  # the helper entry every cubin has (returns its shared-memory size)
            r = record(k)
            r["checksum_matches_wheel"] = shipped.get(r["cubin"]) == r["sha256"]
            gemms.append(r)
    gemms.sort(key=lambda r: r["cubin"])
    counts = {
        "cubins": len(gemms),
        "wait_before_trigger": sum(r["wait_before_trigger"] for r in gemms),
        "waits_every_path": sum(r["waits_every_path"] for r in gemms),
        "trigger_before_wait": sum(r["trigger"] == "before the wait" for r in gemms),
        "no_explicit_trigger": sum(r["trigger"] == "none (implicit at exit)" for r in gemms),
        "checksums_match_wheel": sum(r["checksum_matches_wheel"] for r in gemms),
    }
    pre = {}
    for r in gemms:
        for p in r["pre_wait_reads"]:
            pre[p] = pre.get(p, 0) + 1
    counts["pre_wait_reads_by_parameter"] = dict(sorted(pre.items(), key=lambda x: -x[1]))
    with open(os.path.join(args.out, "released_gemm_facts.json"), "w") as f:
        json.dump({"provenance": prov,
                   "audit": {"cubins": cubins, "seconds": round(seconds, 1),
                             "wall_seconds_of_the_step": args.gemm_seconds},
                   "counts": counts, "cubins": gemms}, f, indent=1)
        f.write("\n")

    # The compiled released kernels (routing block kernels, dev kernels), both architectures.
    kernels = []
    for f in sorted(glob.glob(os.path.join(args.work, "kernels_*.json"))):
        for k in json.load(open(f))["kernels"]:
            r = record(k)
            r["short_name"] = k["short_name"]
            kernels.append(r)
    with open(os.path.join(args.out, "released_kernels.json"), "w") as f:
        json.dump({"provenance": prov, "compiled_from": "flashinfer-python %s csrc/fused_moe/"
                   "trtllm_backend/{trtllm_fused_moe_dev_kernel.cu,trtllm_fused_moe_routing_"
                   "custom_block.cu} with nvcc -cubin for sm_100a and sm_90 "
                   "(scripts/audit/released.sh)" % args.python_version,
                   "kernels": kernels}, f, indent=1)
        f.write("\n")

    # The chain.
    chain = json.load(open(os.path.join(args.work, "chain.json")))
    launch_facts = {}
    for k in chain.get("launches", []):
        launch_facts.setdefault(k["name"], record(k))
    out = {"provenance": prov,
           "launches_file": "data/audit/released_nvfp4_launches.json",
           "choices": chain.get("choices", 1),
           "distinct_chains": chain.get("distinct_chains", 1),
           "checks": chain.get("checks", []),
           "verdicts": chain.get("verdicts", {}),
           "fragment_classes": [
               {"launch": l["launch"],
                "classes": [{"fragment": c["fragment"], "count": len(c["kernels"]),
                             "kernels": c["kernels"]} for c in l["classes"]]}
               for l in chain.get("fragment_classes", [])]}
    with open(os.path.join(args.out, "released_chain.json"), "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print("released_summary: %d GEMM cubins (%d wait before they trigger), %d compiled kernels, "
          "%d tactic choices" % (len(gemms), counts["wait_before_trigger"], len(kernels),
                                 out["choices"]))


if __name__ == "__main__":
    main()
