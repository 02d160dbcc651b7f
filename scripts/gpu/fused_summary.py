#!/usr/bin/env python3
"""Summary of scripts/gpu/fused.sh's result files (numpy and h5py only: it runs on the bare GPU
machine too). Prints, per file given: the equivalence rows (PDL on/off mismatches, error against
the Kokkos reference, routings per shape), the race cells (mismatches, stale reads, the
verifier's verdict) and the layer times of one finalize against another at each (shape, T) and
placement: the median over rounds of the per-round ratio against/this (the rounds are
interleaved, so round i of both rows ran back to back) with its minimum; and per stamped layer
(timeline_layer_N groups of sweep layer --stamps) each kernel's span from the layer's first
start: first start, first wait, last end, and the layer's length. Exit 1 when a file
shows a mismatch, a reference error above its tolerance or a race the verifier does not
predict; 2 on bad usage or an unreadable file."""

import argparse
import sys
from collections import defaultdict

import h5py
import numpy as np


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def table(path, group):
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        print(f"fused_summary: {path}: cannot open ({e})", file=sys.stderr)
        sys.exit(2)
    if group + "/table" not in f:
        print(f"fused_summary: {path}: no table /{group}", file=sys.stderr)
        sys.exit(2)
    samples = f[group + "/samples"][()] if group + "/samples" in f else np.zeros(0)
    return f[group + "/table"][()], samples


def equivalence(path):
    t, _ = table(path, "equivalence")
    bad = 0
    per_shape = defaultdict(int)
    print(f"equivalence ({path}):")
    for r in t:
        per_shape[text(r["shape"])] += int(r["routings"])
        ok = r["mismatches"] == 0 and (r["ref_checks"] == 0 or r["max_rel_err"] <= r["tolerance"])
        bad += not ok
        print(f"  {text(r['shape'])} T={r['T']} {text(r['preset'])} finalize={text(r['finalize'])}:"
              f" {r['mismatches']}/{r['routings']} PDL on/off mismatches, ref err "
              f"{r['max_rel_err']:.2e} (tolerance {r['tolerance']:.0e})"
              f"{'' if ok else '  FAIL'}")
    for s, n in per_shape.items():
        print(f"  {s}: {n} routings")
    return bad


def race(path):
    t, _ = table(path, "race_matrix")
    bad = 0
    print(f"race cells ({path}):")
    for r in t:
        seen = r["mismatches"] > 0 or r["stale_iterations"] > 0
        contradicted = seen and text(r["verifier"]) != "race"
        bad += contradicted
        print(f"  {text(r['key'])}: finalize {text(r['finalize'])}, {r['mismatches']}/"
              f"{r['iterations']} mismatches, {r['stale_reads']} stale reads, verifier "
              f"{text(r['verifier'])}{'  CONTRADICTS THE VERIFIER' if contradicted else ''}")
    return bad


def layer(path, this, against):
    t, samples = table(path, "layer_sweep")
    rows = {}
    for r in t:
        rows[(text(r["shape"]), int(r["T"]), text(r["finalize"]), text(r["placement"]))] = r
    print(f"layer ({path}): {against} / {this}, per-round ratio (median, min); > 1: {this} faster")
    faster = total = 0
    for (shape, T, fin, placement), r in sorted(rows.items()):
        if fin != this:
            continue
        o = rows.get((shape, T, against, placement))
        if o is None:
            continue
        a = samples[r["sample_offset"] : r["sample_offset"] + r["sample_count"]]
        b = samples[o["sample_offset"] : o["sample_offset"] + o["sample_count"]]
        n = min(len(a), len(b))
        ratio = b[:n] / a[:n]
        total += 1
        faster += bool(np.median(ratio) > 1)
        print(f"  {shape} T={T:3d} {placement:11s}: {against} {o['median_us']:9.2f} us "
              f"({text(o['finalize_kernel'])}), {this} {r['median_us']:9.2f} us: "
              f"{np.median(ratio):.3f}x (min {ratio.min():.3f}x)")
    print(f"  {this} faster than {against} in {faster} of {total} configurations")
    return 0


def timelines(path):
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        print(f"fused_summary: {path}: cannot open ({e})", file=sys.stderr)
        sys.exit(2)
    groups = sorted((g for g in f if g.startswith("timeline_layer_")),
                    key=lambda g: int(g.rsplit("_", 1)[1]))
    if not groups:
        print(f"fused_summary: {path}: no timeline_layer_N group", file=sys.stderr)
        sys.exit(2)
    print(f"timelines ({path}): per kernel first start / first wait / last end (us from the "
          "layer's first start); a kernel without stamps did not run")
    for g in groups:
        t = f[g]
        names = text(t.attrs["kernels"]).split(",")
        kernel = t["kernel"][()]
        start, wait, end = t["start_ns"][()], t["wait_ns"][()], t["end_ns"][()]
        t0 = start.min()
        parts = []
        for i, name in enumerate(names):
            m = kernel == i
            if not m.any():
                parts.append(f"{name} -")
                continue
            w = wait[m][wait[m] >= 0]
            first_wait = f"{(w.min() - t0) / 1e3:.1f}" if len(w) else "-"
            parts.append(f"{name} {(start[m].min() - t0) / 1e3:.1f}/{first_wait}/"
                         f"{(end[m].max() - t0) / 1e3:.1f}")
        print(f"  {text(t.attrs['key'])}: layer {(end.max() - t0) / 1e3:.1f} us; " + ", ".join(parts))
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--equivalence", help="result file of moefin equivalence")
    ap.add_argument("--race", help="result file of moefin race")
    ap.add_argument("--layer", help="result file of moefin sweep layer")
    ap.add_argument("--timeline", help="result file of moefin sweep layer --stamps")
    ap.add_argument("--this", default="fused", help="finalize row timed (default fused)")
    ap.add_argument("--against", default="new", help="finalize row it is compared with (new)")
    a = ap.parse_args()
    if not (a.equivalence or a.race or a.layer or a.timeline):
        ap.error("give at least one of --equivalence, --race, --layer, --timeline")
    bad = 0
    if a.equivalence:
        bad += equivalence(a.equivalence)
    if a.race:
        bad += race(a.race)
    if a.layer:
        bad += layer(a.layer, a.this, a.against)
    if a.timeline:
        bad += timelines(a.timeline)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
