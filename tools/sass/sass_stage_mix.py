#!/usr/bin/env python3
"""Instructions per pipeline stage of the split-K decode GEMMs (sm_90), read from their SASS: what
one warp issues for each 2 KiB of weights it streams, and the bandwidth that allows at full issue.

Compiles kernels/gemm/decode_dispatch.cu of the working tree to a cubin (`nvcc -cubin -arch=sm_90
-O3 -lineinfo -Xptxas -v`), disassembles it with `nvdisasm -gi` (every instruction with its
source line and the lines it is inlined at) and, per decode kernel:
  main loop      the loop (a backward branch and its target) holding the kernel's HMMA (the
                 loads-only diagnostic: its LDGSTS)
  per stage      the loop's instructions whose source lines (and inlining sites) are outside the
                 "stage-mix: unit" regions of kernels/gemm/decode_kernels.cuh (code that runs once
                 per unit); a static count: both sides of a branch inside a stage count (at tile
                 16 the second token tile's loads and MMAs, skipped at run time when it is empty)
  per unit       the loop's instructions inside those regions
  classes        per stage: HMMA, HMUL2, LOP3, IMAD, PRMT, SHF, LDS, LDGSTS, LDG, the rest
  bound          the stage's bytes (weights, fp4 scales) over its instructions at one instruction
                 per clock per scheduler (4 per SM): the weight stream at full issue, as a
                 percentage of the copy bandwidth --copy-gbs over --sms SMs at --clock-ghz

usage: tools/sass/sass_stage_mix.py [--out FILE] [--copy-gbs 4200] [--sms 132] [--clock-ghz 1.98]
                                 [--nvcc PATH] [--nvdisasm PATH]
nvdisasm: $NVDISASM, else .deps/tools/bin/nvdisasm (scripts/fetch_released.sh), else PATH.
"""

import argparse
import collections
import datetime
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import sass_facts  # noqa: E402  (tool lookup, nvcc and ptxas -v parsing)

ROOT = sass_facts.ROOT
SOURCE = "kernels/gemm/decode_dispatch.cu"
MARKED = "kernels/gemm/decode_kernels.cuh"
CLASSES = ("HMMA", "HMUL2", "LOP3", "IMAD", "PRMT", "SHF", "LDS", "LDGSTS", "LDG")
WARP_STAGE_BYTES = 2048  # weights of one warp-stage (32 rows x 64 bytes), either format
FP4_SCALE_BYTES = 256    # fp4: 32 rows x 8 scale bytes
WIDE_WIDTH = 2           # warp-stages per turn of the wide kernels' loop (DecodePolicy::kWideWidth)


def per_warp_stage(count, width):
    """A loop's count over the warp-stages it streams a turn: an int where it divides, else a
    float to the half."""
    return count // width if count % width == 0 else count / width


def unit_lines(text):
    """Source lines (1-based) inside the "stage-mix: unit" regions of the marked file's text."""
    lines, start = set(), None
    for i, line in enumerate(text.splitlines(), 1):
        tag = re.search(r"//\s*stage-mix:\s*unit (begin|end|line)\b", line)
        if not tag:
            continue
        kind = tag.group(1)
        if kind == "line":
            lines.add(i)
        elif kind == "begin":
            if start is not None:
                raise ValueError("line %d: stage-mix region opened twice" % i)
            start = i
        else:
            if start is None:
                raise ValueError("line %d: stage-mix end without a begin" % i)
            lines.update(range(start, i + 1))
            start = None
    if start is not None:
        raise ValueError("line %d: stage-mix region never closed" % start)
    return lines


def parse_nvdisasm(text):
    """{mangled name: [(address, opcode, operands text, [(file, line), ...])]} from `nvdisasm
    -gi`: each instruction with the source frames printed before it (innermost first); branch
    targets (labels) are replaced by their addresses, as 0x..."""
    funcs, cur, frames, fresh = {}, None, [], True
    labels, pending = {}, []
    for line in text.splitlines():
        m = re.match(r"\.text\.(\S+):\s*$", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
            frames, fresh = [], True
            continue
        m = re.match(r"(\.L_x_\d+):\s*$", line)
        if m:
            pending.append(m.group(1))
            continue
        m = re.match(r'\s*//## File "([^"]+)", line (\d+)(?: inlined at "([^"]+)", line (\d+))?',
                     line)
        if m:
            if fresh:  # a new group of frames starts after an instruction
                frames, fresh = [], False
            frames.append((m.group(1), int(m.group(2))))
            if m.group(3):
                frames.append((m.group(3), int(m.group(4))))
            continue
        m = re.match(r"\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;", line)
        if m and cur is not None:
            addr = int(m.group(1), 16)
            for name in pending:
                labels[name] = addr
            pending = []
            body = re.sub(r"^@!?U?P[T0-9]+\s+", "", m.group(2))
            parts = body.split(None, 1)
            cur.append((addr, parts[0], parts[1] if len(parts) > 1 else "", list(frames)))
            fresh = True
    for ins in funcs.values():
        for i, (addr, op, operands, frames) in enumerate(ins):
            m = re.search(r"`\((\.L_x_\d+)\)", operands)
            if m and m.group(1) in labels:
                ins[i] = (addr, op, operands.replace(m.group(0), hex(labels[m.group(1)])), frames)
    return funcs


def fail(msg):
    print("sass_stage_mix: " + msg, file=sys.stderr)
    sys.exit(1)


def main_loop(ins):
    """(first, last) indices of the loop holding the most HMMA, then (the loads-only kernel) the
    most LDGSTS; the smallest among equals."""
    addr_index = {a: i for i, (a, _, _, _) in enumerate(ins)}
    best = None
    for i, (addr, op, operands, _) in enumerate(ins):
        if op != "BRA":
            continue
        m = re.search(r"0x([0-9a-f]+)", operands)
        target = int(m.group(1), 16) if m else None
        if target is None or target >= addr or target not in addr_index:
            continue
        lo = addr_index[target]
        hmma = sum(1 for x in ins[lo:i + 1] if x[1].startswith("HMMA"))
        copies = sum(1 for x in ins[lo:i + 1] if x[1].startswith("LDGSTS"))
        key = (hmma, copies, -(i - lo))
        if (hmma or copies) and (best is None or key > best[0]):
            best = (key, lo, i)
    return (best[1], best[2]) if best else None


def in_unit(frames, marked, lines):
    return any(f.endswith(marked) and line in lines for f, line in frames)


def stage_mix(ins, marked, lines):
    """(per-stage Counter of opcode classes with 'total', per-unit count) of the main loop."""
    loop = main_loop(ins)
    if loop is None:
        return None
    stage, unit = collections.Counter(), 0
    for _, op, _, frames in ins[loop[0]:loop[1] + 1]:
        if op == "NOP":
            continue
        if in_unit(frames, marked, lines):
            unit += 1
            continue
        base = op.split(".")[0]
        stage[base if base in CLASSES else "other"] += 1
        stage["total"] += 1
    return stage, unit


def kernel_label(mangled):
    fmt = {"0": "bf16", "1": "fp4"}
    m = re.search(r"decode_gemm_kernelILNS0_12WeightFormatE(\d)ELi(\d)ELb(\d)", mangled)
    if m:
        return "%s tile %d%s" % (fmt[m.group(1)], 8 * int(m.group(2)),
                                 "" if m.group(3) == "1" else " loads-only")
    m = re.search(r"decode_gemm_(tscale|wpack|wide|tiles)_kernelILi(\d)ELb(\d)E(?:Li(\d)E)?",
                  mangled)
    if m:
        # The wide kernels' 2-stage instances are the ones two CTAs per SM launch (cta2); tiles
        # is the wide kernel on tiled values.
        return "fp4 tile %d %s%s%s" % (8 * int(m.group(2)), m.group(1),
                                       " lean" if m.group(3) == "1" else "",
                                       " cta2" if m.group(4) == "2" else "")
    if "decode_gemm_deep_kernel" in mangled:
        return "fp4 tile 16 deep"
    return None


def bound(label, instrs, copy_gbs, sms, clock_ghz):
    """% of the copy bandwidth a warp-stage of `instrs` instructions allows at full issue."""
    stage_bytes = WARP_STAGE_BYTES + (FP4_SCALE_BYTES if label.startswith("fp4") else 0)
    per_clock = 4.0 * stage_bytes / instrs  # bytes per clock per SM at 1 issue/clock/scheduler
    return 100.0 * per_clock * sms * clock_ghz / copy_gbs


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "data", "decode_sass.txt"))
    ap.add_argument("--copy-gbs", type=float, default=4200.0)
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--clock-ghz", type=float, default=1.98)
    ap.add_argument("--nvcc", default=None)
    ap.add_argument("--nvdisasm", default=None)
    a = ap.parse_args()
    nvcc = sass_facts.tool(a.nvcc, "NVCC", "/usr/local/cuda/bin/nvcc", "nvcc")
    nvdisasm = sass_facts.tool(a.nvdisasm, "NVDISASM", ".deps/tools/bin/nvdisasm", "nvdisasm")
    with open(os.path.join(ROOT, MARKED)) as f:
        lines = unit_lines(f.read())
    if not lines:
        fail("no stage-mix regions in " + MARKED)
    with tempfile.TemporaryDirectory() as tmp:
        cubin = os.path.join(tmp, "decode.cubin")
        ptxas = sass_facts.compile_cubin(nvcc, ROOT, SOURCE, cubin, extra=["-lineinfo"])
        r = subprocess.run([nvdisasm, "-gi", cubin], capture_output=True, text=True)
        if r.returncode != 0:
            fail("nvdisasm failed: " + r.stderr[-2000:])
    funcs = parse_nvdisasm(r.stdout)
    rows = []
    for name, ins in funcs.items():
        label = kernel_label(name)
        if label is None:
            continue
        mix = stage_mix(ins, MARKED, lines)
        if mix is None:
            fail("no main loop (HMMA or LDGSTS) in " + name)
        stage, unit = mix
        # The wide kernels' loop streams WIDE_WIDTH warp-stages a turn: counted per warp-stage.
        width = WIDE_WIDTH if " wide" in label or " tiles" in label else 1
        stage = collections.Counter({c: per_warp_stage(v, width) for c, v in stage.items()})
        regs, _, spill = ptxas.get(name, ["?", 0, "?"])
        rows.append([label, regs, spill, stage["total"], unit] + [stage[c] for c in CLASSES] +
                    [stage["other"], "%.0f%%" % bound(label, stage["total"], a.copy_gbs, a.sms,
                                                     a.clock_ghz)])
    if not rows:
        fail("no decode GEMM kernel in " + SOURCE)
    rows.sort(key=lambda r: r[0])
    cols = (["kernel", "regs", "spill", "per stage", "per unit"] + list(CLASSES) +
            ["other", "full-issue bound"])
    head, dirty, ver = sass_facts.provenance(nvcc)
    header = [
        "# Decode GEMM kernels, sm_90: instructions of one pipeline stage of the main loop",
        "# (generated by tools/sass/sass_stage_mix.py; do not edit). Tree %s%s." % (
            head, " + uncommitted kernels/" if dirty else ""),
        "# %s; nvcc -arch=sm_90 -O3 -lineinfo -cubin; nvdisasm -gi." % ver,
        "# 'per stage' = the main loop's instructions outside the 'stage-mix: unit' regions of",
        "# %s (a static count: both sides of a branch inside a stage" % MARKED,
        "# count), 'per unit' = inside them (once per unit: its start, its last stage's combine",
        "# and store). A warp-stage streams %d bytes of weights (+%d of fp4 scales); the" % (
            WARP_STAGE_BYTES, FP4_SCALE_BYTES),
        "# 'wide' and 'tiles' kernels' loop streams %d a turn, and their counts are per warp-stage." % (
            WIDE_WIDTH),
        "# 'full-issue bound' = those bytes per 'per stage' instructions at 4 instructions per",
        "# clock per SM, %d SMs at %.2f GHz, as %% of %.0f GB/s (above 100%%: not issue-bound)." % (
            a.sms, a.clock_ghz, a.copy_gbs),
        "# regs, spill: ptxas -v (spill = bytes of spill stores + spill loads).",
        "# Generated %s." % datetime.date.today().isoformat(),
    ]
    sass_facts.write_report(a.out, header, cols, rows)
    print("sass_stage_mix: %d kernels -> %s" % (len(rows), a.out))


if __name__ == "__main__":
    main()
