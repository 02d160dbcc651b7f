#!/usr/bin/env python3
"""Fill small_batch_v2's policy table from a measurement of its geometry candidates.

Reads the /finalize_sweep rows of the result files (moefin sweep finalize --variants
small_batch_v2/c<chunks>/l<loads>[/exit|/w],... as scripts/gpu/finalize_fast.sh runs it) and
writes kernels/finalize/small_batch_v2_table.hpp: per (H, T, K) of the given weight type the
geometry and lane layout (v2's adjacent lanes, or /w: the groups in separate warps) of the
entry-trigger candidates chosen in two steps. Where the baseline (--baseline, the released
fi_small_batch) was measured in the same rounds in every mode, only the candidates whose worst
ratio over the modes, baseline time / candidate time, is within --tie of the best worst ratio
stay in (the target is "never slower than the released kernel in any mode", and the mode
closest to losing is what a choice must protect; a single run's medians move by a few percent
from run to run, so near-equal worst ratios count as equal). Among those, the lowest score
a/a_best + b/b_best, a and b being the median per-launch time in modes a and b (hot L2) and
*_best the fastest candidate's in that mode (one mode alone where only one was measured; ties:
fewer threads, then fewer loads, then v2's layout). A v2-layout geometry's trigger is exit when that geometry with the exit
trigger was measured in every mode of the score and scores lower by more than --exit-margin
(faster in mode b alone is not enough: mode a is where the early trigger pays), else entry.
The header names the files it came from (path, sha256, root attributes git_commit, gpu_name,
date) and is the only input of v2::policy_geometry().

usage: tools/small_batch_v2_policy.py FILE.h5... [--out HEADER] [--weights bf16] [--exit-margin 0.01]
                             [--baseline fi_small_batch] [--tie 0.02]
Exit status: 0 written; 1 a file is unreadable or holds no candidate rows; 2 bad usage.
"""

import argparse
import hashlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CANDIDATE = re.compile(r"^small_batch_v2/c(\d+)/l(\d+)(/exit|/w)?$")
MAX_THREADS, MIN_THREADS, MAX_GROUPS = 512, 32, 32


def fail(msg, code=1):
    print("v2_policy: " + msg, file=sys.stderr)
    sys.exit(code)


def text(v):
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


def read_rows(path, baseline):
    """Candidate (and baseline) rows of one file: list of dicts, and the file's provenance."""
    try:
        import h5py
    except ImportError:
        fail("needs h5py (.venv/bin/python, or python3 with h5py)")
    if not os.path.isfile(path):
        fail("%s: no such file" % path)
    if not h5py.is_hdf5(path):
        fail("%s: not an HDF5 file" % path)
    try:
        with h5py.File(path, "r") as f:
            prov = {k: text(v) for k, v in f.attrs.items()}
            if "finalize_sweep" not in f or "table" not in f["finalize_sweep"]:
                fail("%s: no /finalize_sweep table (not a moefin sweep finalize file)" % path)
            rows = f["finalize_sweep"]["table"][()]
    except OSError as e:
        fail("%s: cannot read (%s)" % (path, e))
    names = rows.dtype.names
    for col in ("H", "T", "K", "weights", "mode", "l2", "variant", "median_us"):
        if col not in names:
            fail("%s: /finalize_sweep lacks column '%s'" % (path, col))
    # Mode b of a file without mode_b_producer = pdl-wait measured another chain (a producer
    # launched without PDL: docs/design/experiments.md); its rows count as mode b0, which no score
    # uses.
    plain = prov.get("mode_b_producer", "plain") != "pdl-wait"
    out = []
    for r in rows:
        variant = text(r["variant"])
        m = CANDIDATE.match(variant)
        if not m:
            if variant == baseline:
                out.append({"H": int(r["H"]), "T": int(r["T"]), "K": int(r["K"]),
                            "weights": text(r["weights"]), "mode": mode_of(r, plain),
                            "l2": text(r["l2"]), "baseline": True,
                            "median": float(r["median_us"])})
            continue
        out.append({"H": int(r["H"]), "T": int(r["T"]), "K": int(r["K"]),
                    "weights": text(r["weights"]), "mode": mode_of(r, plain),
                    "l2": text(r["l2"]), "chunks": int(m.group(1)), "loads": int(m.group(2)),
                    "exit": m.group(3) == "/exit", "warp": m.group(3) == "/w",
                    "baseline": False, "median": float(r["median_us"])})
    return out, prov


def mode_of(row, plain):
    m = text(row["mode"])
    return "b0" if plain and m == "b" else m


def groups_for(k, loads):
    g = 1
    while g * loads < k:
        g *= 2
    return g


def choose(rows, exit_margin, tie=0.02):
    """{(H, T, K): (chunks, loads, trigger, warp_groups, score, n_candidates, worst)}, worst the
    chosen geometry's worst baseline/candidate ratio over the modes (None: no baseline)."""
    cells = {}
    for r in rows:
        cells.setdefault((r["H"], r["T"], r["K"]), []).append(r)
    table = {}
    for key, rs in sorted(cells.items()):
        per = {}  # (chunks, loads, warp) -> {mode: median}, entry trigger
        exits = {}  # (chunks, loads) -> {mode: median} with the exit trigger (v2's layout)
        base = {}  # mode -> the baseline's median in the same rounds
        for r in rs:
            if r["baseline"]:
                base[r["mode"]] = r["median"]
            elif r["exit"]:
                exits.setdefault((r["chunks"], r["loads"]), {})[r["mode"]] = r["median"]
            else:
                g = (r["chunks"], r["loads"], r["warp"])
                per.setdefault(g, {})[r["mode"]] = r["median"]
        modes = [m for m in ("a", "b") if any(m in v for v in per.values())]
        if not modes:
            continue
        best = {m: min(v[m] for v in per.values() if m in v) for m in modes}
        complete = {g: v for g, v in per.items() if all(m in v for m in modes)}
        if not complete:
            continue
        worst = {}
        if all(m in base for m in modes):
            worst = {g: min(base[m] / v[m] for m in modes) for g, v in complete.items()}
            floor = max(worst.values()) * (1.0 - tie)
            complete = {g: v for g, v in complete.items() if worst[g] >= floor}
        scored = []
        for g, v in complete.items():
            score = sum(v[m] / best[m] for m in modes)
            threads = g[0] * groups_for(key[2], g[1])
            scored.append((score, threads, g[1], g[2], g))
        scored.sort()
        score, _, _, _, (chunks, loads, warp) = scored[0]
        trigger = "kEntry"
        # The exit trigger only where it was measured in every mode of the score and scores
        # lower by the margin: faster in mode b alone is not enough, the early trigger is what
        # mode a gains most from. The warp-groups layout has no exit-trigger kernel.
        ex = exits.get((chunks, loads), {})
        if not warp and all(m in ex for m in modes):
            exit_score = sum(ex[m] / best[m] for m in modes)
            exit_worst = min(base[m] / ex[m] for m in modes) if worst else None
            if exit_score < score * (1.0 - exit_margin) and (
                    exit_worst is None or exit_worst >= worst[(chunks, loads, warp)]):
                trigger = "kExit"
                score = exit_score
        table[key] = (chunks, loads, trigger, warp, score, len(per),
                      worst.get((chunks, loads, warp)))
    return table


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def render(table, sources, weights, exit_margin, baseline, tie):
    src = "; ".join(sources)
    lines = [
        "#pragma once",
        "// Generated by tools/small_batch_v2_policy.py; do not edit by hand.",
        "// Source: %s" % src,
        "// Per (H, T, K), %s weights: of the measured candidates whose worst ratio over modes a, b" % weights,
        "// of %s time / candidate time is within %.1f%% of the best worst ratio (where %s" % (
            baseline, 100 * tie, baseline),
        "// was measured in the same rounds), the geometry with the lowest a/a_best + b/b_best",
        "// (median per-launch time, hot L2); trigger exit where that geometry",
        "// with the exit trigger, measured in every mode, scored lower by more than %.1f%%;" % (100 * exit_margin),
        "// warp_groups (the released lane layout) where a /w candidate scored lowest.",
        "",
        '#include "kernels/finalize/small_batch_v2.hpp"',
        "",
        "#include <array>",
        "",
        "namespace moefin::finalize::v2::generated {",
        "",
        "inline constexpr char kSource[] =",
    ]
    # The source string as adjacent literals of at most ~90 characters.
    chunks = [src[i:i + 88] for i in range(0, len(src), 88)] or [""]
    for i, c in enumerate(chunks):
        lines.append('    "%s"%s' % (c.replace("\\", "\\\\").replace('"', '\\"'),
                                   ";" if i == len(chunks) - 1 else ""))
    lines += ["",
              "// {hidden, tokens, top_k, chunks, loads, trigger[, warp_groups]}",
              "inline constexpr std::array<PolicyEntry, %d> kTable = {{" % len(table)]
    for (h, t, k), (chunks_, loads, trig, warp, score, n, worst) in sorted(
            table.items(), key=lambda kv: (kv[0][1], kv[0][2], kv[0][0])):
        lines.append("    {%d, %d, %d, %d, %d, Trigger::%s%s}, // score %.3f of %d%s" %
                     (h, t, k, chunks_, loads, trig, ", true" if warp else "", score, n,
                      "" if worst is None else ", worst %.3fx" % worst))
    lines += ["}};", "", "} // namespace moefin::finalize::v2::generated", ""]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+", help="result files with candidate rows")
    ap.add_argument("--out", default=os.path.join(ROOT, "kernels", "finalize",
                                                  "small_batch_v2_table.hpp"))
    ap.add_argument("--weights", default="bf16", choices=["bf16", "fp32", "none"])
    ap.add_argument("--exit-margin", type=float, default=0.01)
    ap.add_argument("--baseline", default="fi_small_batch",
                    help="the variant whose worst ratio the choice protects (default "
                         "fi_small_batch, the released kernel); 'none' turns it off")
    ap.add_argument("--tie", type=float, default=0.02,
                    help="worst ratios within this fraction of the best count as equal "
                         "(default 0.02)")
    a = ap.parse_args(argv)
    if not 0.0 <= a.tie < 0.5:
        fail("--tie %g out of range [0, 0.5)" % a.tie, 2)
    if not 0.0 <= a.exit_margin < 0.5:
        fail("--exit-margin %g out of range [0, 0.5)" % a.exit_margin, 2)
    rows, sources = [], []
    for path in a.files:
        rs, prov = read_rows(path, a.baseline)
        rs = [r for r in rs if r["weights"] == a.weights and r["l2"] == "hot"]
        if not any(not r["baseline"] for r in rs):
            fail("%s: no small_batch_v2/c*/l* rows with %s weights and hot L2" % (path, a.weights))
        rows += rs
        sources.append("%s (sha256 %s, %d candidate rows, git_commit %s, gpu %s, %s)" % (
            os.path.relpath(path, ROOT) if os.path.isabs(path) else path, sha256(path)[:16],
            sum(1 for r in rs if not r["baseline"]), prov.get("git_commit", "?"), prov.get("gpu_name", "?"),
            prov.get("date_utc", "?")))
    table = choose(rows, a.exit_margin, a.tie)
    if not table:
        fail("no (H, T, K) has a candidate measured in every mode present")
    with open(a.out, "w") as f:
        f.write(render(table, sources, a.weights, a.exit_margin, a.baseline, a.tie))
    wins = {}
    for chunks, loads, trig, warp, _, _, _ in table.values():
        g = (chunks, loads, trig, warp)
        wins[g] = wins.get(g, 0) + 1
    top = sorted(wins.items(), key=lambda kv: -kv[1])[:6]
    worsts = [v[6] for v in table.values() if v[6] is not None]
    print("v2_policy: %d entries (%d in the warp-groups layout, %d beside %s: worst ratio of "
          "the choice %s) -> %s; most chosen: %s" % (
        len(table), sum(1 for v in table.values() if v[3]), len(worsts), a.baseline,
        "%.3f-%.3fx" % (min(worsts), max(worsts)) if worsts else "-", a.out,
        ", ".join("c%d/l%d/%s%s x%d" % (c, l, t[1:].lower(), "/w" if w else "", n)
                  for (c, l, t, w), n in top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
