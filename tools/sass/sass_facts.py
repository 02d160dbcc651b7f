#!/usr/bin/env python3
"""Register and SASS facts of the finalize kernels (sm_90): what the lean instantiations and
small_batch_v2 removed from the code between kernel entry, the grid-dependency wait and the
first load of the GEMM output.

Compiles kernels/finalize/finalize_dispatch.cu and small_batch_v2_dispatch.cu of the working
tree, and finalize_dispatch.cu of a git revision before the lean change (--before), to cubins
with `nvcc -cubin -arch=sm_90 -O3 -Xptxas -v`, disassembles them with `cuobjdump -sass` and
writes one line per kernel:
  regs, smem        ptxas -v
  instrs            SASS instructions (without the NOP padding and the final self-branch)
  trigger@, wait@   position of PREEXIT (griddepcontrol.launch_dependents) and ACQBULK (wait)
  1st load@         position of the first global load (LDG, or a generic LD)
  gemm load@        position of the first global load at or after the wait whose address traces
                    back (backward slice in program order) to FinalizeParams::gemm_out, the
                    kernel's first parameter: c[0x0][0x210] (docs/design/released.md)
  wait->load        instructions strictly between the wait and that load
  pre-wait gemm     global loads before the wait that trace to gemm_out (0: only metadata
                    is read before the wait, as the verifier's chain says)
Positions count instructions in address order (branches included, whichever path runs).

usage: tools/sass/sass_facts.py [--before REV] [--out FILE] [--nvcc PATH] [--cuobjdump PATH]
cuobjdump: $CUOBJDUMP, else .deps/tools/bin/cuobjdump (scripts/fetch_released.sh), else PATH.
"""

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GEMM_OUT = "c[0x0][0x210]"
SOURCES = ["kernels/finalize/finalize_dispatch.cu", "kernels/finalize/small_batch_v2_dispatch.cu"]

WEIGHTS = {"0": "none", "1": "bf16", "2": "fp32", "3": "runtime"}
TRIGGERS = {"1": "exit", "2": "entry", "3": "after_wait", "4": "after_writes"}
ABLATION = {"0": "", "1": " -shuffle", "2": " -broadcast", "4": " +anchor", "8": " fi-layout"}


def fail(msg):
    print("sass_facts: " + msg, file=sys.stderr)
    sys.exit(1)


def tool(explicit, env, local, name):
    for cand in (explicit, os.environ.get(env), os.path.join(ROOT, local)):
        if cand and os.path.isfile(cand) and os.access(cand, os.X_OK):
            return cand
    found = shutil.which(name)
    if not found:
        fail("%s not found (set %s, or run scripts/fetch_released.sh for %s)" % (name, env, local))
    return found


def provenance(nvcc):
    """(HEAD's short hash, True when kernels/ has uncommitted changes, nvcc's version line)."""
    head = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short=12", "HEAD"],
                          capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", ROOT, "status", "--porcelain", "--", "kernels"],
                           capture_output=True, text=True).stdout.strip()
    ver = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip()
    return head, bool(dirty), ver.splitlines()[-1] if ver else "?"


def write_report(path, header, cols, rows, show=str):
    """The comment lines `header`, a blank line, then `cols` and `rows` in aligned columns."""
    widths = [max(len(c), *(len(show(r[i])) for r in rows)) for i, c in enumerate(cols)]
    lines = list(header) + ["", "  ".join(c.ljust(w) for c, w in zip(cols, widths)).rstrip()]
    for r in rows:
        lines.append("  ".join(show(v).ljust(w) for v, w in zip(r, widths)).rstrip())
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def compile_cubin(nvcc, tree, source, out, extra=()):
    cmd = [nvcc, "-std=c++17", "-arch=sm_90", "-O3", "-DNDEBUG", "--expt-relaxed-constexpr",
           "-DMOEFIN_HAVE_CUDA=1", "-I" + tree, "-cubin", "-Xptxas", "-v", *extra,
           os.path.join(tree, source), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        fail("nvcc failed on %s:\n%s" % (source, r.stderr[-3000:]))
    return parse_ptxas(r.stderr)


def parse_ptxas(text):
    """{mangled name: (registers, smem bytes, spill bytes)} from `-Xptxas -v` output."""
    facts, name, spill = {}, None, 0
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            name, spill = m.group(1), 0
            continue
        # ptxas prints the spill line ("Function properties") before the registers line.
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and name:
            spill = int(m.group(1)) + int(m.group(2))
            if name in facts:
                facts[name][2] = spill
        m = re.search(r"Used (\d+) registers", line)
        if m and name:
            smem = re.search(r"(\d+) bytes smem", line)
            facts[name] = [int(m.group(1)), int(smem.group(1)) if smem else 0, spill]
    return facts


def parse_sass(text):
    """{mangled name: [(opcode, operands)]} from `cuobjdump -sass`."""
    funcs, cur = {}, None
    for line in text.splitlines():
        m = re.match(r"\s*Function : (\S+)", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            continue
        m = re.match(r"\s*/\*[0-9a-f]{4,}\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            body = m.group(1)
            body = re.sub(r"^@!?U?P[T0-9]+\s+", "", body)  # guard predicate
            parts = body.split(None, 1)
            op = parts[0]
            ops = [o.strip() for o in parts[1].split(",")] if len(parts) > 1 else []
            cur.append((op, ops))
    for name, ins in funcs.items():
        while ins and ins[-1][0] == "NOP":
            ins.pop()
        if ins and ins[-1][0] == "BRA":  # the self-branch after the last EXIT
            ins.pop()
    return funcs


REG = re.compile(r"\b(U?R)(\d+)(\.64)?\b")


def dest_regs(op, ops):
    """Registers an instruction writes (its first operand), widened for 64/128-bit results."""
    if not ops or op.startswith(("ST", "BRA", "EXIT", "BSSY", "BSYNC", "RED", "ISETP", "FSETP")):
        return set()
    first = ops[1] if op.startswith("SHFL") and len(ops) > 1 else ops[0]  # SHFL PT, Rd, ...
    m = re.match(r"(U?R)(\d+)$", first.split(".")[0])
    if not m:
        return set()
    width = 1
    if ".128" in op:
        width = 4
    elif ".WIDE" in op or ".64" in op or op in ("CS2R",):
        width = 2
    base = int(m.group(2))
    return {(m.group(1), base + i) for i in range(width)}


def source_regs(ops):
    regs = set()
    for o in ops:
        for kind, n, wide in REG.findall(o):
            regs.add((kind, int(n)))
            if wide:
                regs.add((kind, int(n) + 1))
    return regs


def traces_to(ins, i, const):
    """Whether the address of load i is computed from constant-bank operand `const`."""
    op, ops = ins[i]
    addr = [o for o in ops[1:] if "[" in o]
    if not addr:
        return False
    want = source_regs(addr)
    for j in range(i - 1, -1, -1):
        if not want:
            return False
        jop, jops = ins[j]
        hit = dest_regs(jop, jops) & want
        if not hit:
            continue
        want -= hit
        srcs = jops[1:]
        if any(const in s for s in srcs):
            return True
        want |= source_regs(srcs)
    return False


def is_global_load(op):
    return op.startswith("LDG") or op == "LD" or op.startswith("LD.")


def facts_of(ins):
    def first(pred, start=0):
        for k in range(start, len(ins)):
            if pred(k):
                return k
        return None

    wait = first(lambda k: ins[k][0] == "ACQBULK")
    trig = first(lambda k: ins[k][0] == "PREEXIT")
    load = first(lambda k: is_global_load(ins[k][0]))
    gload = first(lambda k: is_global_load(ins[k][0]) and traces_to(ins, k, GEMM_OUT),
                  wait if wait is not None else 0)
    between = gload - wait - 1 if wait is not None and gload is not None else None
    # Loads of the GEMM output before the wait would read what the primary has not finished
    # writing: there must be none (metadata only).
    early = sum(1 for k in range(wait if wait is not None else len(ins))
                if is_global_load(ins[k][0]) and traces_to(ins, k, GEMM_OUT))
    return len(ins), trig, wait, load, gload, between, early


def label(demangled):
    m = re.match(r"void moefin::finalize::kernels::(\w+)<(.*)>\(", demangled)
    if not m:
        return demangled
    kernel, args = m.group(1).replace("finalize_", ""), m.group(2)
    parts = []
    w = re.search(r"\((?:moefin::finalize::kernels::Weights|moefin::finalize::WeightType)\)(\d)", args)
    if w:
        parts.append(WEIGHTS[w.group(1)])
    if kernel == "small_batch":
        parts.append("split" if re.search(r"(?:Weights|WeightType)\)\d, true", args) else "nosplit")
    if kernel == "vecload":
        u = re.search(r"(?:Weights|WeightType)\)\d, (\d+)", args)
        parts.append("U%s" % u.group(1))
    if kernel == "small_batch_v2":
        loads = re.match(r"(\d+)", args)
        parts.append("L%s" % loads.group(1))
    lean = re.search(r"Lean<\(moefin::Trigger\)(\d), (true|false)>", args)
    if lean:
        parts.append("lean %s/%s" % (TRIGGERS[lean.group(1)],
                                     "meta-before" if lean.group(2) == "true" else "meta-after"))
    elif "Knobs" in args:
        parts.append("instrumented")
    if kernel == "small_batch_v2":
        off = re.search(r", (\d+)u$", args)
        parts[-1] += ABLATION.get(off.group(1) if off else "0", "")
    return "%s<%s>" % (kernel, ", ".join(parts))


def demangle(names):
    r = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True)
    if r.returncode != 0:
        fail("c++filt failed")
    return r.stdout.splitlines()


def rows_of(nvcc, cuobjdump, tree, sources, tag, tmp):
    rows = []
    for src in sources:
        if not os.path.exists(os.path.join(tree, src)):
            continue
        cubin = os.path.join(tmp, "%s_%s.cubin" % (tag, os.path.basename(src)))
        ptx = compile_cubin(nvcc, tree, src, cubin)
        r = subprocess.run([cuobjdump, "-sass", cubin], capture_output=True, text=True)
        if r.returncode != 0:
            fail("cuobjdump failed on %s: %s" % (cubin, r.stderr.strip()))
        funcs = parse_sass(r.stdout)
        names = sorted(funcs)
        for name, pretty in zip(names, demangle(names)):
            regs, smem, spill = ptx.get(name, [0, 0, 0])
            rows.append((tag, label(pretty), regs, smem, spill) + facts_of(funcs[name]))
    return rows


def fmt(v):
    return "-" if v is None else str(v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--before", default="77eaae8", help="git revision before the lean change")
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "finalize_sass.txt"))
    ap.add_argument("--nvcc", default=None)
    ap.add_argument("--cuobjdump", default=None)
    a = ap.parse_args()
    nvcc = tool(a.nvcc, "NVCC", "/usr/local/cuda/bin/nvcc", "nvcc")
    cuobjdump = tool(a.cuobjdump, "CUOBJDUMP", ".deps/tools/bin/cuobjdump", "cuobjdump")
    with tempfile.TemporaryDirectory() as tmp:
        before = os.path.join(tmp, "before")
        os.makedirs(before)
        arch = subprocess.run(["git", "-C", ROOT, "archive", a.before, "kernels", "core"],
                              capture_output=True)
        if arch.returncode != 0:
            fail("git archive %s failed: %s" % (a.before, arch.stderr.decode().strip()))
        subprocess.run(["tar", "-x", "-C", before], input=arch.stdout, check=True)
        rows = rows_of(nvcc, cuobjdump, before, SOURCES[:1], "before", tmp)
        rows += rows_of(nvcc, cuobjdump, ROOT, SOURCES, "now", tmp)
    head, dirty, ver = provenance(nvcc)
    cols = ["tree", "kernel", "regs", "smem", "spill", "instrs", "trigger@", "wait@",
            "1st load@", "gemm load@", "wait->load", "pre-wait gemm loads"]
    rows.sort(key=lambda r: (r[1].split("<")[0], r[0] != "before", r[1]))
    header = [
        "# Finalize kernels, sm_90: ptxas -v and SASS positions (generated by tools/sass/sass_facts.py;",
        "# do not edit). 'before' = revision %s (every knob at run time), 'now' = %s%s." % (
            a.before, head, " + uncommitted kernels/" if dirty else ""),
        "# %s; nvcc -arch=sm_90 -O3 --expt-relaxed-constexpr -cubin; %s -sass." % (
            ver, os.path.basename(cuobjdump)),
        "# Positions: instructions in address order from the kernel's entry (0-based); '-' = none.",
        "# gemm load@: first global load at/after the wait whose address traces to gemm_out",
        "# (c[0x0][0x210]); wait->load: instructions strictly between the wait and that load;",
        "# pre-wait gemm loads: global loads before the wait that trace to gemm_out (must be 0).",
        "# Generated %s." % datetime.date.today().isoformat(),
    ]
    write_report(a.out, header, cols, rows, fmt)
    print("sass_facts: %d kernels -> %s" % (len(rows), a.out))


if __name__ == "__main__":
    main()
