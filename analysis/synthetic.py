"""Synthetic result files: the schema of docs/reference/result-files.md written with h5py, with
known values.

Tests recompute every table number from the formulas here (known_*), and a "new GPU" is a
synthetic file with other root attributes (arch, gpu_name) and another `factor`. The files are
exactly what core/h5store writes: string root attributes, `table` compound datasets starting
with key (160-byte string), sample_offset, sample_count, extendible chunked datasets, flat
float64 samples, and timelines as `arrays` groups.
"""
import math

import h5py
import numpy as np

SCHEMA = "moefin-results/1"
KEY_BYTES = 160

HIDDEN = (1024, 2880, 7168)
TOKENS = (1, 8, 64, 300)
TOPK = (1, 2, 4, 6, 8, 10, 16, 22, 32)
WEIGHTS = ("bf16", "fp32", "none")  # "none" is outside the seed's protocol: a distractor
MODES = ("a", "b", "c")
L2S = ("hot", "cold")
VARIANTS = ("scalar", "vecload", "small_batch", "small_batch_nosplit",
            "small_batch_late_trigger", "small_batch_meta_after_wait")
JITTER = (1.0, 1.03, 0.985)  # per-round factors: pairing rounds gives other values than medians
LAYER_SHAPES = (("H6144/I512/E256/top-8", 6144, 512, 256, 8, "swiglu"),
                ("H2048/I1280/E512/top-22", 2048, 1280, 512, 22, "relu2"),
                ("H3584/I1024/E896/top-16", 3584, 1024, 896, 16, "swiglu"))
LAYER_TOKENS = (1, 8, 16, 32, 64, 128)
KERNELS = ("routing", "permute", "gemm1", "activation", "gemm2", "finalize")

_BASE = {1: 0.97, 2: 1.07, 4: 0.99, 6: 1.28, 8: 1.13, 10: 1.41, 16: 1.42, 22: 1.80, 32: 1.96}
_GAIN = {"small_batch_nosplit": 1.20, "small_batch_late_trigger": 1.10,
         "small_batch_meta_after_wait": 1.05}
_MODE = {"a": 1.0, "b": 0.9, "c": 0.8}


def in_regime(H, T):
    return int(math.ceil(H / 256) * T < 1184)


def dispatch(H, T, K):
    if not in_regime(H, T):
        return "vecload"
    return "small_batch" if K > 4 else "scalar"


def known_gain(variant, K, mode, H):
    """time(variant with one ingredient removed) / time(small_batch), exactly, per round."""
    g = _GAIN[variant] * (1 + 0.002 * K) * (1 + 0.02 * HIDDEN.index(H))
    if variant == "small_batch_late_trigger" and mode != "a":
        g = 1 + (g - 1) / 4  # early triggering buys less when launches do not overlap
    return g


def known_speedup(H, T, K, weights, mode, l2, variant, factor=1.0):
    """speedup_vs_scalar of one configuration."""
    if variant == "scalar":
        return 1.0
    if not in_regime(H, T):
        return 5.0 + 0.1 * K  # far off, so that a missed in_regime filter shows
    if variant == "vecload":
        return 0.9 * factor
    s = (_BASE.get(K, 1 + K / 40) * factor * _MODE[mode] * (0.95 if l2 == "cold" else 1.0)
         * (1 + 0.01 * HIDDEN.index(H) - 0.004 * TOKENS.index(T)
            + {"bf16": 0.0, "fp32": 0.003, "none": 0.2}[weights]))
    if variant != "small_batch":
        s /= known_gain(variant, K, mode, H)
    return s


def scalar_time_us(H, T, K, factor=1.0):
    return (2.0 + 0.0004 * H * max(1, T) ** 0.5 + 0.15 * K) / factor


def known_floor_us(mode, factor=1.0):
    return {"a": 2.0, "b": 2.5, "c": 3.1}[mode] / factor


COPY_BANDWIDTH = ((1 << 20, 1500.0), (1 << 28, 4200.0))  # (bytes, GB/s)


def finalize_bytes(H, T, K, weights):
    wbytes = {"bf16": 2, "fp32": 4, "none": 0}[weights]
    return T * K * (4 + wbytes) + T * K * H * 2 + T * H * 2


def known_layer_us(H, T, factor=1.0):
    return (40.0 + 0.004 * H + 0.5 * T) / factor


def known_whole_speedup(K, T, placement, factor=1.0):
    """time(previous finalize) / time(new finalize) at one placement."""
    s = 1 + 0.004 * K * factor / (1 + T / 16)
    return s if placement == "seed-after" else 1 + (s - 1) * 0.9


def known_pdl_speedup(K, T, finalize, factor=1.0):
    """time(seed-before) / time(seed-after) with one finalize."""
    if finalize == "previous":
        return known_previous_pdl(K, T, factor)
    return 1 + 0.03 * factor / (1 + T / 8) + 0.0005 * K


def known_race(triggers, meta, delay_ns):
    """(mismatches, stale_reads, verifier) of one race-matrix cell, 200 iterations."""
    racy = "gemm1=entry" in triggers and "act=entry" in triggers and meta == "before"
    if triggers == RACE_TRIGGERS[1] and meta == "before" and delay_ns > 0:
        return 0, 1, "ordered"  # one stale read the verifier does not predict: a contradiction
    if not racy:
        return 0, 0, "ordered"
    seen = 197 if delay_ns > 0 else 12
    return seen, seen + 3, "race"


RACE_TRIGGERS = ("gemm1=entry,act=entry,gemm2=exit", "gemm1=after_wait,act=entry,gemm2=exit",
                 "gemm1=entry,act=after_wait,gemm2=exit")
RACE_DELAYS = (0, 20000)


def provenance(gpu_name, arch, date_utc="2026-01-15T10:00:00Z", **extra):
    """Root attributes as collect_provenance() writes them (all strings)."""
    cc = "none" if arch == "none" else f"{int(arch[3:-1])}.{arch[-1]}"
    p = {"moefin_schema": SCHEMA, "moefin_version": "0.1.0", "git_commit": "0123456789ab",
         "command_line": "moefin sweep finalize (synthetic)", "seed": "2026",
         "date_utc": date_utc, "host": "synthetic", "compiler": "GNU 12.2.0",
         "cuda_compiler_version": "13.0", "cuda_architectures": "90", "kokkos_version": "3.4.1",
         "hdf5_version": "1.10.8", "build_type": "Release", "gpu_name": gpu_name,
         "compute_capability": cc, "arch": arch, "sm_count": "132", "l2_bytes": "62914560",
         "max_sm_clock_mhz": "1980", "max_mem_clock_mhz": "3201", "driver_version": "580.65",
         "cuda_runtime_version": "13.0", "mode_b_producer": "pdl-wait"}
    p.update({k: str(v) for k, v in extra.items()})
    return p


def _column_dtype(values):
    v = values[0]
    if isinstance(v, str):
        width = max(8, max(len(x.encode()) for x in values) + 1)
        return f"S{width}"
    if isinstance(v, (bool, int, np.integer)):
        return "<i8"
    return "<f8"


def write_table(f, group, rows, samples, description=""):
    """Writes one experiment table: `rows` are dicts with a 'key' entry, `samples` one list of
    raw values per row."""
    g = f.create_group(group)
    g.attrs["kind"] = "table"
    g.attrs["experiment"] = group
    g.attrs["description"] = description
    names = [c for c in rows[0] if c != "key"]
    dtype = [("key", f"S{KEY_BYTES}"), ("sample_offset", "<i8"), ("sample_count", "<i8")]
    dtype += [(c, _column_dtype([r[c] for r in rows])) for c in names]
    data = np.zeros(len(rows), dtype=dtype)
    counts = np.array([len(s) for s in samples], dtype=np.int64)
    data["key"] = [r["key"].encode() for r in rows]
    data["sample_count"] = counts
    data["sample_offset"] = np.concatenate([[0], np.cumsum(counts)[:-1]])
    for c in names:
        data[c] = [r[c].encode() if isinstance(r[c], str) else r[c] for r in rows]
    g.create_dataset("table", data=data, maxshape=(None,), chunks=(64,))
    flat = np.array([x for s in samples for x in s], dtype=np.float64)
    g.create_dataset("samples", data=flat, maxshape=(None,), chunks=(4096,))


def _key(**axes):
    return ",".join(f"{k}={v}" for k, v in axes.items())


def finalize_sweep(factor=1.0, topk=TOPK):
    rows, samples = [], []
    for H in HIDDEN:
        for T in TOKENS:
            for K in topk:
                base = [scalar_time_us(H, T, K, factor) * (1 + 0.01 * i) for i in range(3)]
                for w in WEIGHTS:
                    for mode in MODES:
                        for l2 in L2S:
                            for v in VARIANTS:
                                s = known_speedup(H, T, K, w, mode, l2, v, factor)
                                jit = JITTER if v != "scalar" else (1.0,) * 3
                                raw = [b / (s * j) for b, j in zip(base, jit)]
                                nbytes = finalize_bytes(H, T, K, w)
                                med = float(np.median(raw))
                                rows.append({
                                    "key": _key(H=H, T=T, K=K, w=w, mode=mode, l2=l2, v=v),
                                    "H": H, "T": T, "K": K, "weights": w, "mode": mode,
                                    "l2": l2, "variant": v, "dispatch": dispatch(H, T, K),
                                    "dispatch_device": dispatch(H, T, K),
                                    "in_regime": in_regime(H, T), "median_us": med,
                                    "min_us": min(raw), "q1_us": float(np.quantile(raw, .25)),
                                    "q3_us": float(np.quantile(raw, .75)), "max_us": max(raw),
                                    "rounds": 3, "launches": 20, "speedup_vs_scalar": s,
                                    "speedup_lo": s * 0.98, "speedup_hi": s * 1.02,
                                    "bytes": nbytes, "gbps": nbytes / (med * 1e3)})
                                samples.append(raw)
    return rows, samples


def layer_sweep(factor=1.0):
    rows, samples = [], []
    for shape, H, I, E, K, act in LAYER_SHAPES:
        for T in LAYER_TOKENS:
            new_after = [known_layer_us(H, T, factor) * (1 + 0.02 * i) for i in range(3)]
            for fin in ("new", "previous"):
                for place in ("seed-after", "seed-before"):
                    raw = list(new_after)
                    if place == "seed-before":
                        raw = [x * known_pdl_speedup(K, T, "new", factor) for x in raw]
                        if fin == "previous":
                            # previous-before / previous-after must give the previous-finalize
                            # PDL ratio, and previous-before / new-before the seed-before ratio
                            raw = [x * known_whole_speedup(K, T, "seed-before", factor) for x in
                                   raw]
                    elif fin == "previous":
                        raw = [x * known_whole_speedup(K, T, "seed-after", factor) for x in raw]
                    if fin == "previous":
                        raw = [x * j for x, j in zip(raw, JITTER)]
                    rows.append({"key": _key(shape=shape, T=T, finalize=fin, placement=place),
                                 "shape": shape, "H": H, "I": I, "E": E, "K": K,
                                 "activation": act, "T": T, "finalize": fin, "placement": place,
                                 "median_us": float(np.median(raw)), "min_us": min(raw),
                                 "q1_us": float(np.quantile(raw, .25)),
                                 "q3_us": float(np.quantile(raw, .75)), "max_us": max(raw),
                                 "rounds": 3})
                    samples.append(raw)
    return rows, samples


def known_previous_pdl(K, T, factor=1.0):
    """time(previous, seed-before) / time(previous, seed-after) as layer_sweep() builds it."""
    return (known_pdl_speedup(K, T, "new", factor)
            * known_whole_speedup(K, T, "seed-before", factor)
            / known_whole_speedup(K, T, "seed-after", factor))


def known_check_rel_err(variant, H, K):
    return 1e-3 * (1 + HIDDEN.index(H)) * (1 + K / 64) * (2 if variant == "scalar" else 1)


def finalize_check():
    rows = []
    for v in ("scalar", "vecload", "small_batch"):
        for H in HIDDEN:
            for K in (1, 8, 22):
                err = known_check_rel_err(v, H, K)
                rows.append({"key": _key(v=v, H=H, T=4, K=K, w="bf16", routing="uniform"),
                             "variant": v, "H": H, "T": 4, "K": K, "weights": "bf16",
                             "routing": "uniform", "dropped": 0.0, "max_abs_err": err * 3,
                             "peak": 3.0, "rel_err": err, "unwritten": 0, "nan": 0,
                             "pass": int(err < 8e-3), "tolerance": 8e-3})
    return rows, [[] for _ in rows]


def equivalence():
    rows = []
    for shape, *_ in LAYER_SHAPES:
        for T in (1, 16):
            for preset in ("seed", "fixed"):
                mism = 3 if preset == "seed" and T == 1 else 0
                rows.append({"key": _key(shape=shape, T=T, preset=preset), "shape": shape,
                             "T": T, "preset": preset, "routings": 300, "mismatches": mism,
                             "first_buffer": "out" if mism else "", "first_index": 7 if mism
                             else -1, "first_seed": 11 if mism else -1,
                             "max_rel_err": 3.7e-3, "routings_per_s": 40.0})
    return rows, [[] for _ in rows]


def race_matrix():
    rows = []
    for preset in ("seed", "fixed"):
        for trig in RACE_TRIGGERS:
            for meta in ("before", "after"):
                for delay in RACE_DELAYS:
                    m, stale, verdict = known_race(trig, meta, delay)
                    if preset == "fixed":
                        m, stale, verdict = 0, 0, "ordered"
                    rows.append({"key": _key(preset=preset, triggers=trig, meta=meta,
                                             delay=delay, delayed="routing"),
                                 "preset": preset, "triggers": trig, "meta": meta,
                                 "delay_ns": delay, "delayed_kernel": "routing",
                                 "iterations": 200, "mismatches": m, "stale_reads": stale,
                                 "verifier": verdict})
    return rows, [[] for _ in rows]


def timeline(ctas=4):
    """Per-CTA stamps of a simulated chain: each kernel launches 1 us after the previous one's
    last trigger (or exit, for gemm2, which never triggers explicitly); routing has no wait;
    finalize triggers at entry, the others after their wait."""
    cols = {f: [] for f in ("kernel", "cta", "start_ns", "wait_ns", "trigger_ns", "end_ns")}
    launch = 0
    for k, name in enumerate(KERNELS):
        release = []
        for c in range(ctas):
            start = launch + 150 * c
            wait = start + 800
            trigger = -1 if name == "gemm2" else (start + 50 if name == "finalize"
                                                  else wait + 100)
            end = wait + 2000 + 100 * k
            for field, v in zip(cols, (k, c, start, wait if k > 0 else -1, trigger, end)):
                cols[field].append(v)
            release.append(trigger if trigger >= 0 else end)
        launch = max(release) + 1000
    return cols


def write_synthetic(path, gpu_name="NVIDIA H200", arch="sm_90", factor=1.0,
                    date_utc="2026-01-15T10:00:00Z",
                    experiments=("finalize_sweep", "launch_floor", "copy_bandwidth",
                                 "finalize_check", "layer_sweep", "equivalence", "race_matrix",
                                 "timeline"), topk=TOPK, attrs=None):
    """Writes one synthetic result file with the chosen experiments (a finalize sweep over the
    top-K values `topk`) and extra root attributes `attrs` (e.g. carveout); returns its path."""
    with h5py.File(path, "w") as f:
        for k, v in provenance(gpu_name, arch, date_utc, **(attrs or {})).items():
            f.attrs[k] = v
        builders = {"finalize_sweep": lambda: finalize_sweep(factor, topk),
                    "layer_sweep": lambda: layer_sweep(factor), "finalize_check": finalize_check,
                    "equivalence": equivalence, "race_matrix": race_matrix}
        for name in experiments:
            if name in builders:
                rows, samples = builders[name]()
                write_table(f, name, rows, samples, f"synthetic {name}")
            elif name == "launch_floor":
                rows = [{"key": _key(mode=m), "mode": m, "median_us": known_floor_us(m, factor),
                         "min_us": known_floor_us(m, factor) * 0.98} for m in MODES]
                write_table(f, name, rows, [[r["median_us"]] * 3 for r in rows])
            elif name == "copy_bandwidth":
                rows = [{"key": _key(bytes=b), "bytes": b, "gbps": g} for b, g in COPY_BANDWIDTH]
                write_table(f, name, rows, [[1.0] for _ in rows])
            elif name == "timeline":
                g = f.create_group("timeline_chain")
                g.attrs["kind"] = "arrays"
                g.attrs["kernels"] = ",".join(KERNELS)
                g.attrs["source"] = "simulated"
                for field, values in timeline().items():
                    g.create_dataset(field, data=np.asarray(values, dtype=np.int64))
            else:
                raise ValueError(f"unknown synthetic experiment {name}")
    return path
