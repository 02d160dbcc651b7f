#!/usr/bin/env python3
"""The verifier's verdict on the released NVFP4 chain for every choice of GEMM1 and GEMM2 tactic,
from a run of tools/audit/released.sh (its step 4: the facts of every GEMM cubin).

The verdict for a chain depends only on each kernel's PDL facts, so the tactics of each GEMM
launch are grouped into classes of equal facts (waits on every path, wait before trigger, the
trigger's place, pre-wait reads and writes and post-trigger writes by parameter name). One
`moefin audit --chain` run, over a launches file holding one representative tactic per class,
audits those cubins again and runs the verifier on every class pair; the pairs expand to every
tactic choice by the classes' sizes. A second run checks the grouping end to end: every choice of
a random set of GEMM1 tactics and a random set of GEMM2 tactics, none grouped, each compared with
its class pair's verdicts.

Writes WORK/chain_classes.json (read by released_summary.py) and the two launches files and JSON
outputs of the runs beside it. Exit 1 when a run fails or a sampled choice disagrees."""
import argparse
import copy
import itertools
import json
import os
import random
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from released_summary import facts_columns  # noqa: E402  (the facts the classes are made of)

CLASS_FACTS = ("waits_every_path", "wait_before_trigger", "trigger", "pre_wait_reads",
               "pre_wait_writes", "post_trigger_writes")


def die(msg):
    sys.exit("released_chain: " + msg)


def load_facts(work):
    """Kernel name -> facts (step 4's JSON), GEMM kernels only."""
    out = {}
    names = sorted(n for n in os.listdir(work) if n.startswith("gemm_facts_") and
                   n.endswith(".json"))
    if not names:
        die("%s: no gemm_facts_*.json (run released.sh's step 4 first)" % work)
    for n in names:
        with open(os.path.join(work, n)) as f:
            for k in json.load(f)["kernels"]:
                if not k["name"].endswith("GetSmemSize"):
                    out[k["name"]] = k
    return out


def class_key(k):
    c = facts_columns(k)
    return tuple(c[f] for f in CLASS_FACTS)


def cubin_of(bmm, kernel):
    # The cubin of tactic bmm_X is Bmm_X.cubin (released_launches.py lists them so).
    path = os.path.join(bmm, "B" + kernel[1:] + ".cubin")
    if not os.path.isfile(path):
        die("no cubin %s for tactic %s" % (path, kernel))
    return path


def run_chain(args, launches, tactics, tag):
    """moefin audit --chain over `launches` (GEMM alternatives replaced by `tactics`: launch
    index -> list of alternatives); returns the JSON it writes and the seconds it took."""
    lf = copy.deepcopy(launches)
    cubins = []
    for li, alts in tactics.items():
        lf["launches"][li]["kernel"] = alts
        cubins += [cubin_of(args.bmm, a["kernel"]) for a in alts]
    lpath = os.path.join(args.work, "chain_%s_launches.json" % tag)
    jpath = os.path.join(args.work, "chain_%s.json" % tag)
    with open(lpath, "w") as f:
        json.dump(lf, f, indent=1)
        f.write("\n")
    if os.path.exists(jpath):
        os.remove(jpath)
    cmd = ["nice", "-n", str(args.nice), args.moefin, "audit", "--chain", lpath] + \
        args.kernel_cubins + cubins + \
        sum([["--layout", p] for p in args.layout], []) + \
        ["--chain-only", "--jobs", str(args.jobs), "--json", jpath, "-q"]
    print("released_chain: %s: moefin audit --chain over %d cubins" % (tag, len(cubins)),
          flush=True)
    t0 = time.time()
    r = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.time() - t0
    with open(os.path.join(args.work, "chain_%s.txt" % tag), "w") as f:
        f.write(" ".join(cmd) + "\n" + r.stdout + r.stderr)
    # Exit 1 is a race or a check without a verdict (a GEMM with no such read); the JSON says
    # which. Anything else, or no JSON, is a failed run.
    if r.returncode not in (0, 1) or not os.path.exists(jpath):
        die("%s: moefin audit --chain failed (exit %d): %s" %
            (tag, r.returncode, (r.stderr.strip().splitlines() or ["no output"])[-1]))
    with open(jpath) as f:
        return json.load(f), seconds, r.returncode


def chain_lookup(out):
    """(gemm1 kernel, gemm2 kernel) -> the chain record of the run's JSON."""
    launches = out["fragment_classes"]
    member = []
    for la in launches:
        m = {}
        for ci, cls in enumerate(la["classes"]):
            for k in cls["kernels"]:
                m[k] = ci
        member.append(m)
    by_pick = {tuple(c["classes"]): c for c in out["chains"]}
    return member, by_pick


def verdicts_of(out, member, by_pick, picks):
    """The chain record for one alternative per launch (picks: launch index -> kernel)."""
    key = []
    for li in range(len(member)):
        key.append(member[li][picks[li]] if li in picks else 0)
    return by_pick[tuple(key)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", required=True, help="released.sh's OUTDIR")
    ap.add_argument("--launches", required=True, help="released_nvfp4_launches.json")
    ap.add_argument("--bmm", required=True, help="the batched_gemm-* directory")
    ap.add_argument("--moefin", required=True)
    ap.add_argument("--kernel-cubins", nargs="+", required=True,
                    help="the compiled routing and dev-kernel cubins")
    ap.add_argument("--layout", action="append", required=True)
    ap.add_argument("--sample", type=int, default=200,
                    help="at least this many ungrouped choices verified end to end (0: none)")
    ap.add_argument("--seed", type=int, default=14)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--nice", type=int, default=10)
    args = ap.parse_args()
    if args.sample < 0:
        ap.error("--sample: must be 0 or more")

    with open(args.launches) as f:
        launches = json.load(f)
    facts = load_facts(args.work)
    gemm = [i for i, la in enumerate(launches["launches"]) if isinstance(la["kernel"], list)]
    if not gemm:
        die("%s: no launch with alternatives" % args.launches)

    # 1. Classes of equal facts per GEMM launch, in order of first member (tactics sorted).
    classes = {}
    for li in gemm:
        by_key = {}
        for alt in sorted(launches["launches"][li]["kernel"], key=lambda a: a["kernel"]):
            k = facts.get(alt["kernel"])
            if k is None:
                die("tactic %s has no facts in %s" % (alt["kernel"], args.work))
            by_key.setdefault(class_key(k), []).append(alt)
        classes[li] = [{"facts": dict(zip(CLASS_FACTS, key)), "members": members}
                       for key, members in by_key.items()]

    # 2. The verifier over every class pair: one representative (the first member) per class.
    reps = {li: [c["members"][0] for c in classes[li]] for li in gemm}
    out, class_seconds, _ = run_chain(args, launches, reps, "classes")
    member, by_pick = chain_lookup(out)
    checks = [c["check"] for c in out["checks"]]
    # The representatives as the chain run audited them have the facts of their class.
    audited = {la["name"]: la for la in out["launches"]}
    for li in gemm:
        for ci, c in enumerate(classes[li]):
            k = audited.get(c["members"][0]["kernel"])
            if k is None or class_key(k) != tuple(c["facts"][f] for f in CLASS_FACTS):
                die("the chain run's facts of %s differ from step 4's" % c["members"][0]["kernel"])
    pairs = []
    for combo in itertools.product(*[range(len(classes[li])) for li in gemm]):
        picks = {li: classes[li][ci]["members"][0]["kernel"] for li, ci in zip(gemm, combo)}
        rec = verdicts_of(out, member, by_pick, picks)
        n = 1
        for li, ci in zip(gemm, combo):
            n *= len(classes[li][ci]["members"])
        pairs.append({"classes": list(combo), "choices": n, "verdict": rec["verdict"],
                      "checks": rec["checks"]})
    choices = 1
    for li in gemm:
        choices *= len(launches["launches"][li]["kernel"])
    if sum(p["choices"] for p in pairs) != choices:
        die("class pairs cover %d choices, not %d" % (sum(p["choices"] for p in pairs), choices))
    class_of = {}
    for li in gemm:
        for ci, c in enumerate(classes[li]):
            for a in c["members"]:
                class_of[(li, a["kernel"])] = ci
    pair_of = {tuple(p["classes"]): p for p in pairs}

    # 3. Ungrouped choices end to end: random tactics of each GEMM, every choice among them.
    sample, sample_seconds, sample_distinct = [], 0.0, 0
    if args.sample:
        rng = random.Random(args.seed)
        per = max(2, int(round(args.sample ** (1.0 / len(gemm)))))
        while per ** len(gemm) < args.sample:
            per += 1
        picked = {}
        for li in gemm:
            alts = sorted(launches["launches"][li]["kernel"], key=lambda a: a["kernel"])
            picked[li] = rng.sample(alts, min(per, len(alts)))
        sout, sample_seconds, _ = run_chain(args, launches, picked, "sample")
        sample_distinct = int(sout["distinct_chains"])
        smember, sby_pick = chain_lookup(sout)
        for combo in itertools.product(*[picked[li] for li in gemm]):
            picks = {li: a["kernel"] for li, a in zip(gemm, combo)}
            rec = verdicts_of(sout, smember, sby_pick, picks)
            pc = tuple(class_of[(li, picks[li])] for li in gemm)
            want = pair_of[pc]
            agrees = rec["verdict"] == want["verdict"] and \
                [c["outcome"] for c in rec["checks"]] == [c["outcome"] for c in want["checks"]]
            sample.append({"tactics": [picks[li] for li in gemm], "classes": list(pc),
                           "verdict": rec["verdict"], "checks": rec["checks"],
                           "agrees": agrees})

    result = {
        "launches_file": args.launches,
        "gemm_launches": [launches["launches"][li]["name"] for li in gemm],
        "class_facts": list(CLASS_FACTS),
        "classes": [{"launch": launches["launches"][li]["name"], "classes": classes[li]}
                    for li in gemm],
        "checks": checks,
        "choices": choices,
        "pairs": pairs,
        "class_run_seconds": class_seconds,
        "class_run_distinct_chains": int(out["distinct_chains"]),
        "sample_seed": args.seed,
        "sample": sample,
        "sample_run_seconds": sample_seconds,
        "sample_run_distinct_chains": sample_distinct,
    }
    with open(os.path.join(args.work, "chain_classes.json"), "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    bad = sum(not s["agrees"] for s in sample)
    tally = {}
    for p in pairs:
        tally[p["verdict"]] = tally.get(p["verdict"], 0) + p["choices"]
    print("released_chain: %s classes; %d class pairs cover %d choices (%s) in %.0f s; %d sampled "
          "choices verified ungrouped in %.0f s, %d disagree"
          % (" x ".join(str(len(classes[li])) for li in gemm), len(pairs), choices,
             ", ".join("%s %d" % kv for kv in sorted(tally.items())), class_seconds, len(sample),
             sample_seconds, bad))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
