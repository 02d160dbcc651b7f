#!/usr/bin/env python3
"""PyTorch peers of the finalize kernels, timed the way `moefin sweep finalize` times them.

What a user would write instead of a finalize kernel, on the sweep's shapes:

* ``torch_gather``: gather the permuted rows (index_select), weight them, sum over top-K in fp32;
* ``torch_bmm``: the same gather, then one batched matmul [T,1,K] x [T,K,H].

Dropped experts (-1) are masked (weight 0), as a user has to. Each variant is captured as a CUDA
graph of N calls; a warm-up replay, then R interleaved rounds (the variants alternate, the first one
rotates); per-call time = replay time / N; the rows' samples are the per-round values. Torch
launches without PDL, so rows are mode ``c`` (back-to-back, PDL off). Rows go to ``/finalize_sweep``
of their own result file, in the schema of docs/reference/result-files.md (speedup columns NaN: no
scalar kernel ran in the same rounds; ``ctas`` -1).

Runs on the GPU machine (python3 with torch, h5py, numpy). The writer part imports no torch, so
the file format is tested without a GPU (tests/python/test_peers_file.py).
"""
import argparse
import datetime
import math
import os
import platform
import socket
import subprocess
import sys
import time
import zlib

import h5py
import numpy as np

SCHEMA = "moefin-results/1"
HIDDEN = [1024, 2048, 2880, 3584, 4096, 5120, 6144, 7168]
TOP_K = [1, 2, 4, 6, 8, 10, 16, 22, 32]
BUDGET = 1184  # the seed's CTA budget (148 SMs x 8)
EXPERTS = 256  # as experiments/finalize/cases.hpp
TILE = 8
VARIANTS = ["torch_gather", "torch_bmm"]

STORE_FIELDS = [("key", "S160"), ("sample_offset", "<i8"), ("sample_count", "<i8")]
# The columns of /finalize_sweep, in the order moefin writes them
# (experiments/report/finalize_tables.cpp).
SWEEP_FIELDS = [
    ("H", "<i8"), ("T", "<i8"), ("K", "<i8"), ("weights", "S8"), ("mode", "S4"), ("l2", "S8"),
    ("variant", "S28"), ("dispatch", "S16"), ("dispatch_device", "S16"), ("in_regime", "<i8"),
    ("median_us", "<f8"), ("min_us", "<f8"), ("q1_us", "<f8"), ("q3_us", "<f8"),
    ("max_us", "<f8"), ("rounds", "<i8"), ("launches", "<i8"), ("speedup_vs_scalar", "<f8"),
    ("speedup_lo", "<f8"), ("speedup_hi", "<f8"), ("bytes", "<i8"), ("gbps", "<f8"),
    ("copy_fraction", "<f8"), ("ctas", "<i8"),
]


def row_ctas(hidden):
    return (hidden + 255) // 256


def in_regime(hidden, tokens, budget=BUDGET):
    return row_ctas(hidden) * tokens < budget


def regime_tokens(hidden, budget=BUDGET):
    """1, 2, 4, ..., 256 inside the regime, plus its last token count (as finalize_grid.cpp)."""
    t = [v for v in (1, 2, 4, 8, 16, 32, 64, 128, 256) if in_regime(hidden, v, budget)]
    last = (budget - 1) // row_ctas(hidden)
    if last >= 1 and (not t or t[-1] != last):
        t.append(last)
    return t


def dispatch(hidden, tokens, top_k, budget=BUDGET):
    """finalize::select on a shape with 16-byte aligned buffers (kernels/finalize)."""
    if hidden % 8 or top_k > 64:
        return "scalar"
    ctas = row_ctas(hidden)
    if ctas * tokens < budget and top_k > 4:
        return "small_batch"
    if ctas * min(8192, tokens) < budget:
        return "scalar"
    return "vecload"


def shape_key(h, t, k, w):
    return f"H={h},T={t},K={k},w={w}"


def row_key(h, t, k, w, mode, l2, variant):
    return f"{shape_key(h, t, k, w)},mode={mode},l2={l2},variant={variant}"


def min_bytes(h, t, k, w, valid_rows):
    """The fewest bytes a launch moves, as HostCase::min_bytes (4-byte indices)."""
    wbytes = {"none": 0, "bf16": 2, "fp32": 4}[w]
    return valid_rows * h * 2 + t * k * (4 + wbytes) + t * h * 2


class TableWriter:
    """Appends rows to a moefin table group (kind "table"), flushing after each row; `fields` are
    the table's columns in moefin's order (default: /finalize_sweep's)."""

    def __init__(self, f, group, description, fields=None):
        self.f = f
        self.fields = fields if fields is not None else SWEEP_FIELDS
        self.dtype = np.dtype(STORE_FIELDS + self.fields)
        if group in f:
            g = f[group]
            have = g["table"].dtype
            if have.names != self.dtype.names:
                raise SystemExit(f"{f.filename}: table {group} has other columns than this "
                                 "script writes")
        else:
            g = f.create_group(group)
            g.attrs["kind"] = "table"
            g.attrs["experiment"] = group
            g.attrs["description"] = description
            g.create_dataset("table", shape=(0,), maxshape=(None,), chunks=(64,),
                             dtype=self.dtype)
            g.create_dataset("samples", shape=(0,), maxshape=(None,), chunks=(4096,),
                             dtype="<f8")
            f.flush()
        self.table = g["table"]
        self.samples = g["samples"]
        self.keys = {k.decode() for k in self.table["key"][()]} if len(self.table) else set()

    def has(self, key):
        return key in self.keys

    def append(self, key, values, samples):
        if key in self.keys:
            raise ValueError(f"duplicate key {key}")
        off = self.samples.shape[0]
        self.samples.resize((off + len(samples),))
        self.samples[off:] = np.asarray(samples, dtype="<f8")
        row = np.zeros(1, dtype=self.dtype)
        row["key"] = key.encode()
        row["sample_offset"] = off
        row["sample_count"] = len(samples)
        for name, _ in self.fields:
            v = values[name]
            row[name] = v.encode() if isinstance(v, str) else v
        n = self.table.shape[0]
        self.table.resize((n + 1,))
        self.table[n] = row[0]
        self.f.flush()
        self.keys.add(key)


def git_commit():
    """The commit the results are of: MOEFIN_GIT_COMMIT where set, else the GPU machine's record
    (.deps/git_commit, written by scripts/device_prepare.sh, where scripts/device_build.sh has made
    build-device: that machine's checkout may sit at another commit than the files it was sent),
    else `git rev-parse`; "unknown" without any."""
    env = os.environ.get("MOEFIN_GIT_COMMIT", "").strip()
    if env:
        return env
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    record = os.path.join(root, ".deps", "git_commit")
    if os.path.isdir(os.path.join(root, "build-device")) and os.path.isfile(record):
        with open(record, encoding="utf-8") as f:
            text = f.read().strip()
        if text:
            return text
    try:
        out = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], capture_output=True,
                             text=True, timeout=10, cwd=os.path.dirname(os.path.abspath(__file__)))
        if out.returncode == 0 and out.stdout.strip():
            return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return "unknown"


def provenance(seed, gpu=None):
    """Root attributes of docs/reference/result-files.md, all strings; GPU fields 'none' without
    `gpu`."""
    gpu = gpu or {}
    p = {
        "moefin_schema": SCHEMA,
        "moefin_version": "peers_torch.py",
        "git_commit": git_commit(),
        "command_line": " ".join([os.path.basename(sys.executable)] + sys.argv),
        "seed": str(seed),
        "date_utc": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "host": socket.gethostname(),
        "compiler": f"python {platform.python_version()}",
        "cuda_compiler_version": "none",
        "cuda_architectures": "none",
        "kokkos_version": "none",
        "hdf5_version": h5py.version.hdf5_version,
        "build_type": "none",
        "gpu_name": "none",
        "compute_capability": "none",
        "arch": "none",
        "sm_count": "none",
        "l2_bytes": "none",
        "max_sm_clock_mhz": "none",
        "max_mem_clock_mhz": "none",
        "driver_version": "none",
        "cuda_runtime_version": "none",
        "gpu_note": "",
    }
    p.update({k: str(v) for k, v in gpu.items()})
    return p


def open_result(path, resume, seed, gpu):
    """Creates `path` (refusing to overwrite) or reopens it with --resume; returns (file, seed).
    The file is `moefin_state = incomplete` (docs/reference/result-files.md) until
    finish_result()."""
    if resume:
        f = h5py.File(path, "r+")
        if f.attrs.get("moefin_schema") != SCHEMA:
            raise SystemExit(f"{path}: not a {SCHEMA} file")
        f.attrs["moefin_state"] = "incomplete"
        f.flush()
        f.attrs["resumed_by"] = " ".join([os.path.basename(sys.executable)] + sys.argv)
        f.attrs["resumed_date_utc"] = datetime.datetime.now(
            datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        return f, int(f.attrs["seed"])
    if os.path.exists(path):
        raise SystemExit(f"{path}: already exists (use --resume to continue it, or remove it)")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    f = h5py.File(path, "w")
    f.attrs["moefin_state"] = "incomplete"  # first, so that a killed run is never read as whole
    f.flush()
    for k, v in provenance(seed, gpu).items():
        f.attrs[k] = v
    f.flush()
    return f, seed


def finish_result(f):
    """Marks the file complete (every row it holds was written whole) and closes it."""
    f.attrs["moefin_state"] = "complete"
    f.flush()
    f.close()


def summary(us):
    q = np.quantile(np.asarray(us), [0.0, 0.25, 0.5, 0.75, 1.0])
    return {"min_us": q[0], "q1_us": q[1], "median_us": q[2], "q3_us": q[3], "max_us": q[4]}


# ------------------------------------------------------------------------------------------
# GPU part (torch imported here only)


def gpu_facts(torch):
    props = torch.cuda.get_device_properties(0)
    cc = f"{props.major}.{props.minor}"
    facts = {
        "gpu_name": props.name,
        "compute_capability": cc,
        "arch": f"sm_{props.major}{props.minor}",
        "sm_count": props.multi_processor_count,
        "l2_bytes": getattr(props, "L2_cache_size", "none"),
        "cuda_runtime_version": torch.version.cuda or "none",
        "torch_version": torch.__version__,
    }
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        if out.returncode == 0:
            facts["driver_version"] = out.stdout.strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        pass
    return facts


def build_inputs(torch, h, t, k, w, seed):
    """Uniform routing over 256 local experts, rows grouped by expert (tile-padded)."""
    rng = np.random.default_rng(seed)
    experts = np.stack([rng.choice(EXPERTS, size=k, replace=False) for _ in range(t)])
    counts = np.bincount(experts.ravel(), minlength=EXPERTS)
    offsets = np.concatenate([[0], np.cumsum((counts + TILE - 1) // TILE * TILE)])
    fill = offsets[:-1].copy()
    perm = np.empty((t, k), dtype=np.int64)
    for tok in range(t):  # expanded order: rows of one expert come in token order
        for j in range(k):
            e = experts[tok, j]
            perm[tok, j] = fill[e]
            fill[e] += 1
    rows = int(offsets[-1])
    g = torch.Generator(device="cuda").manual_seed(int(seed) & 0x7FFFFFFF)
    gemm_out = (torch.rand(rows, h, device="cuda", generator=g) * 1.9 + 0.05)
    gemm_out *= torch.where(torch.rand(rows, h, device="cuda", generator=g) < 0.5, -1.0, 1.0)
    gemm_out = gemm_out.to(torch.bfloat16)
    wts = rng.uniform(0.05, 1.0, size=(t, k))
    wts /= wts.sum(axis=1, keepdims=True)
    weights = None
    if w != "none":
        weights = torch.tensor(wts, device="cuda",
                               dtype=torch.bfloat16 if w == "bf16" else torch.float32)
    return gemm_out, torch.tensor(perm, device="cuda"), weights, t * k


def make_fns(torch, gemm_out, perm, weights, h):
    t, k = perm.shape

    def rows_and_scale():
        valid = perm >= 0
        rows = gemm_out.index_select(0, perm.clamp(min=0).reshape(-1)).view(t, k, -1)[..., :h]
        scale = valid.float() if weights is None else weights.float() * valid
        return rows, scale

    def gather():
        rows, scale = rows_and_scale()
        return (rows.float() * scale.unsqueeze(-1)).sum(dim=1).to(torch.bfloat16)

    def bmm():
        rows, scale = rows_and_scale()
        return torch.bmm(scale.to(torch.bfloat16).unsqueeze(1), rows).squeeze(1)

    return {"torch_gather": gather, "torch_bmm": bmm}


def reference(torch, gemm_out, perm, weights, h):
    t, k = perm.shape
    rows = gemm_out.index_select(0, perm.clamp(min=0).reshape(-1)).view(t, k, -1)[..., :h].double()
    scale = (perm >= 0).double() if weights is None else weights.double() * (perm >= 0)
    return (rows * scale.unsqueeze(-1)).sum(dim=1)


def capture(torch, fn, launches):
    out = fn()  # warm-up on the side stream torch requires before capture
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            out.copy_(fn())
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(launches):
            out.copy_(fn())
    return graph, out


def time_rounds(torch, graphs, rounds):
    for g in graphs:
        g.replay()
    torch.cuda.synchronize()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = [[] for _ in graphs]
    for r in range(rounds):
        for j in range(len(graphs)):
            i = (j + r) % len(graphs)
            start.record()
            graphs[i].replay()
            stop.record()
            stop.synchronize()
            ms[i].append(start.elapsed_time(stop))
    return ms


def parse_list(text, default):
    return default if not text else [int(x) for x in text.split(",")]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/finalize_peers.h5", help="result file to create")
    ap.add_argument("--resume", default="", help="continue this result file")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--hidden", default="", help="hidden sizes (default: the seed's eight)")
    ap.add_argument("--tokens", default="regime",
                    help="token counts, or 'regime' (1,2,4..256 in the regime plus its last T)")
    ap.add_argument("--top-k", default="", help="top-K values (default: 1,2,4,6,8,10,16,22,32)")
    ap.add_argument("--weights", default="bf16,fp32", help="bf16, fp32, none")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--launches", type=int, default=50, help="calls per CUDA graph")
    ap.add_argument("--subset", action="store_true",
                    help="only T in {1, 8, the regime's last} (a quick look)")
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="stop cleanly before this many minutes (0: no limit)")
    a = ap.parse_args(argv)
    if a.rounds < 3 or a.launches < 1:
        ap.error("--rounds must be >= 3 and --launches >= 1")
    weights = a.weights.split(",")
    if any(w not in ("bf16", "fp32", "none") for w in weights):
        ap.error(f"--weights: {a.weights}: each of bf16, fp32, none")

    import torch  # the GPU part

    if not torch.cuda.is_available():
        raise SystemExit("peers_torch.py needs a CUDA device (torch.cuda.is_available() is False)")
    gpu = gpu_facts(torch)
    f, seed = open_result(a.resume or a.out, bool(a.resume), a.seed, gpu)
    table = TableWriter(f, "finalize_sweep",
                        "PyTorch peers of finalize, per-call time (us) of a CUDA graph of calls; "
                        "mode c (no PDL); speedup columns NaN (no scalar in the same rounds)")
    shapes = []
    for h in parse_list(a.hidden, HIDDEN):
        tokens = regime_tokens(h) if a.tokens == "regime" else parse_list(a.tokens, [])
        if a.subset:
            tokens = sorted({t for t in tokens if t in (1, 8)} | {tokens[-1]})
        for t in tokens:
            for k in parse_list(a.top_k, TOP_K):
                for w in weights:
                    shapes.append((h, t, k, w))
    budget_device = int(gpu["sm_count"]) * 8
    start = time.monotonic()
    per_shape = 0.0
    left = 0
    for n, (h, t, k, w) in enumerate(shapes):
        keys = {v: row_key(h, t, k, w, "c", "hot", v) for v in VARIANTS}
        if all(table.has(x) for x in keys.values()):
            continue
        el = time.monotonic() - start
        if a.max_minutes > 0 and el + 1.5 * per_shape > a.max_minutes * 60:
            left = len(shapes) - n
            break
        t0 = time.monotonic()
        shape_seed = (seed * 1000003 + zlib.crc32(shape_key(h, t, k, w).encode())) & 0xFFFFFFFF
        gemm_out, perm, wts, valid_rows = build_inputs(torch, h, t, k, w, shape_seed)
        fns = make_fns(torch, gemm_out, perm, wts, h)
        ref = reference(torch, gemm_out, perm, wts, h)
        peak = ref.abs().max().item()
        graphs = []
        for v in VARIANTS:
            g, out = capture(torch, fns[v], a.launches)
            graphs.append(g)
            torch.cuda.synchronize()
            err = (out.double() - ref).abs().max().item() / max(peak, 1e-30)
            if not math.isfinite(err) or err > 1e-2:
                print(f"warning: {v} {shape_key(h, t, k, w)}: max error {err:.3g} of peak",
                      file=sys.stderr)
        ms = time_rounds(torch, graphs, a.rounds)
        bytes_ = min_bytes(h, t, k, w, valid_rows)
        line = []
        for v, m in zip(VARIANTS, ms):
            us = [x * 1e3 / a.launches for x in m]
            s = summary(us)
            gbps = bytes_ / (s["median_us"] * 1e3)
            values = dict(H=h, T=t, K=k, weights=w, mode="c", l2="hot", variant=v,
                          dispatch=dispatch(h, t, k), dispatch_device=dispatch(h, t, k, budget_device),
                          in_regime=int(in_regime(h, t)), rounds=a.rounds, launches=a.launches,
                          speedup_vs_scalar=math.nan, speedup_lo=math.nan, speedup_hi=math.nan,
                          bytes=bytes_, gbps=gbps, copy_fraction=math.nan, ctas=-1, **s)
            if not table.has(keys[v]):
                table.append(keys[v], values, us)
            line.append(f"{v} {s['median_us']:.2f}us")
        del graphs
        per_shape = 0.8 * per_shape + 0.2 * (time.monotonic() - t0) if per_shape else \
            time.monotonic() - t0
        print(f"[peers {n + 1}/{len(shapes)} {time.monotonic() - start:.0f}s] "
              f"{shape_key(h, t, k, w)}: {', '.join(line)}", file=sys.stderr, flush=True)
    print(f"wrote {f.filename} ({len(table.keys)} rows)")
    if left:
        print(f"incomplete: stopped by --max-minutes with {left} shapes left; continue with "
              f"--resume {f.filename}")
    finish_result(f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
