"""The report's tables, computed from merged per-architecture results and the published CSVs.

Conventions (docs/reference/experiment-tables.md defines the columns):
- finalize speedups are the table's own `speedup_vs_scalar` (the paired per-round ratio the
  sweep computed), summarized over H x in-regime T x bf16/fp32 weights by the median, with the
  minimum in parentheses, as the seed publishes them;
- ratios between two rows of a table (ablations, whole-layer runs) are the paired ratios the
  writers store (`ablation_ratio`, `speedup_finalize`, `speedup_placement`: the median over
  interleaved rounds of numerator[i] / denominator[i]); for files written before those columns
  existed, analysis.derived computes them once from the raw samples, the same way.
"""
import dataclasses

import numpy as np

from .derived import with_stored_statistics
from .loader import WEIGHTS_FORMATS
from .frame import Frame
from .merging import NOT_RECORDED, shared_conditions
from .pdl import probe_signature, race_cell_rule
from .render import DASH, Cell, Table, ratio_text, speedup_text, time_text

SEED_TOPK = (1, 2, 4, 6, 8, 10, 16, 22, 32)
SEED_WEIGHTS = ("bf16", "fp32")
# Report order: mode b (producer -> finalize, the kernel in a chain) first, beside mode a (the
# seed's back-to-back protocol, where the next launch overlapping the current one inflates the
# gain), then mode c (PDL off).
MODES = ("b", "a", "c")
FINALIZE_MODES = ("b", "a")  # the modes every finalize table and figure shows side by side
L2S = ("hot", "cold")
ABLATIONS = (("top-K split", "small_batch_nosplit"),
             ("early trigger", "small_batch_late_trigger"),
             ("pre-wait metadata", "small_batch_meta_after_wait"))
TIME_VARIANTS = ("scalar", "vecload", "small_batch", "torch_gather", "torch_bmm")
PLACEMENTS = ("seed-after", "seed-before")


def summary_cell(values, fmt=speedup_text):
    values = np.asarray(values, float)
    if len(values) == 0:
        return Cell(DASH)
    med, low = float(np.median(values)), float(values.min())
    return Cell(fmt(med, low), med, low, len(values))


def finalize_speedups(frame, K, mode="a", l2="hot", variant="small_batch"):
    """speedup_vs_scalar of `variant` over H x in-regime T x weights for one top-K."""
    sel = frame.mask(K=K, mode=mode, l2=l2, variant=variant, in_regime=1)
    return frame["speedup_vs_scalar"][sel]


def kept_on_scalar(frame, K, mode="a", l2="hot"):
    """True when the dispatcher keeps every in-regime shape of this top-K on the scalar kernel."""
    sel = frame.mask(K=K, mode=mode, l2=l2, in_regime=1)
    picks = set(frame["dispatch"][sel].tolist())
    return bool(picks) and picks == {"scalar"}


def sweep_rows(result):
    """The finalize sweep of one architecture as the seed measured it: bf16 and fp32 expert
    weights (rows without weights are left out of every finalize table and figure)."""
    t = result.table("finalize_sweep")
    return None if t is None else t.take(np.isin(t["weights"], SEED_WEIGHTS))


def measured(results, group="finalize_sweep"):
    """(ArchResult, table) of every architecture whose files hold rows of `group`; layer-sweep
    rows come apart by weights format, one entry per format (see by_weights_format)."""
    tables = [(r, sweep_rows(r) if group == "finalize_sweep" else r.table(group))
              for r in results]
    out = [(r, t) for r, t in tables if t is not None and len(t)]
    if group == "layer_sweep":
        out = [entry for r, t in out for entry in by_weights_format(r, t)]
    return out


def by_weights_format(result, frame):
    """[(ArchResult, rows)] per weights format of a layer sweep (loader fills the column), in
    WEIGHTS_FORMATS order: rows of several formats share (shape, T, finalize, placement), so a
    ratio is taken within one format. An architecture with one format keeps its column; with
    several each gets '<label> [<format>]'. The torch peer's rows (finalize 'torch') go with
    every format, a column beside each."""
    if "weights_format" not in frame:
        return [(result, frame)]
    torch = frame["finalize"] == "torch"
    present = [f for f in WEIGHTS_FORMATS if np.any((frame["weights_format"] == f) & ~torch)]
    if len(present) <= 1:
        return [(result, frame)]
    out = []
    for f in present:
        col = dataclasses.replace(result.column, label=f"{result.column.label} [{f}]",
                                  slug=f"{result.column.slug}_{f.replace('-', '_')}",
                                  key=result.column.key + (f,))
        out.append((dataclasses.replace(result, column=col),
                    frame.take((frame["weights_format"] == f) | torch)))
    return out


def count_cell(n):
    return Cell(str(int(n)), int(n))


def all_columns(results, pub):
    """Measured and published columns, ordered by SM number, a measured one before a published
    one of the same SM (so they stand side by side)."""
    cols = [r.column for r in results] + list(pub.columns)
    return sorted(cols, key=lambda c: c.sort_key())


def present_modes(frame, modes=FINALIZE_MODES, variant="small_batch", l2="hot"):
    """The modes of `modes` in which `variant` was measured in regime (report order)."""
    return [m for m in modes if np.any(frame.mask(mode=m, l2=l2, variant=variant, in_regime=1))]


def finalize_series(results, pub):
    """What the finalize table and bars show: ({column key: sweep rows}, [(column, mode)] with
    mode b then mode a for every measured column and None for a published one, the top-Ks)."""
    sweeps = {r.column.key: t for r, t in measured(results)}
    series = []
    for c in all_columns(results, pub):
        if c.published:
            series.append((c, None))
        elif c.key in sweeps:
            series += [(c, m) for m in present_modes(sweeps[c.key])]
    ks = sorted(set(SEED_TOPK) | {int(k) for t in sweeps.values() for k in t.unique("K")})
    return sweeps, series, ks


def finalize_table(results, pub):
    """The seed's table: median (min) speedup of small_batch over scalar per top-K, mode b
    beside mode a for every measured architecture."""
    sweeps, cols, ks = finalize_series(results, pub)
    table = Table("finalize_speedup",
                  "Finalize only: small_batch vs scalar, median speedup per top-K (minimum), "
                  "mode b (producer -> finalize) beside mode a (back-to-back)",
                  ["top-K"], [c.label + (" published" if m is None else f" mode {m}")
                              for c, m in cols],
                  notes=["Measured: speedup_vs_scalar of /finalize_sweep, l2 hot, median over H x "
                         "in-regime T x weights (bf16, fp32), minimum in parentheses. Mode b: "
                         "each graph step a producer kernel writing the GEMM output, then "
                         "finalize (PDL on, producer time subtracted; the producer PDL-launched "
                         "and waiting at entry, as GEMM2): the kernel in a chain. "
                         "Mode a: back-to-back launches (PDL on), the seed's protocol, where the "
                         "next launch overlaps the current one; it overstates what a layer "
                         "gains. 'kept on scalar': the dispatcher keeps every in-regime shape of "
                         "that top-K on the scalar kernel; the number is what small_batch would "
                         "give.",
                         "Published: the seed's table (data/published/finalize_only_speedup.csv, "
                         "finalize_only_notes.csv), measured by its authors."]
                  + [f"Published note {k}: {text}" for k, text in pub.notes.items()])
    for k in ks:
        cells = []
        for c, mode in cols:
            if c.published:
                if (k, c.key) in pub.finalize:
                    med, low = pub.finalize[(k, c.key)]
                    cells.append(Cell(speedup_text(med, low), med, low, 1))
                elif str(k) in pub.notes:
                    cells.append(Cell(f"kept on previous (note {k})"))
                else:
                    cells.append(Cell(DASH))
                continue
            frame = sweeps[c.key]
            cell = summary_cell(finalize_speedups(frame, k, mode))
            if cell.value is not None and kept_on_scalar(frame, k, mode):
                cell.text = f"kept on scalar; small_batch {cell.text}"
            cells.append(cell)
        table.add_row(k, cells)
    return table


def _present_modes(frame, variant="small_batch"):
    combos = []
    for l2 in L2S:
        for mode in MODES:
            if np.any(frame.mask(mode=mode, l2=l2, variant=variant, in_regime=1)):
                combos.append((mode, l2))
    return combos


def mode_table(results):
    """small_batch vs scalar per mode (a, b, c) and L2 state, per measured architecture."""
    sweeps = measured(results)
    if not sweeps:
        return None
    columns, specs = [], []
    for r, t in sweeps:
        for mode, l2 in _present_modes(t):
            columns.append(f"{r.column.label} {mode}/{l2}")
            specs.append((t, mode, l2))
    ks = sorted({int(k) for _, t in sweeps for k in t.unique("K")})
    table = Table("finalize_speedup_modes",
                  "Finalize only per launch mode: small_batch vs scalar, median (min)",
                  ["top-K"], columns,
                  notes=["Modes (docs/design/experiments.md): a = back-to-back launches, PDL on "
                         "(the seed's protocol); b = producer then finalize in each graph step, "
                         "PDL on, producer-alone time subtracted, the producer PDL-launched and "
                         "waiting at entry (files without mode_b_producer = pdl-wait measured mode "
                         "b0, not shown); c = back-to-back, PDL off. hot/cold = L2 state. Median "
                         "over H x in-regime T x weights."])
    for k in ks:
        table.add_row(k, [summary_cell(finalize_speedups(t, k, mode, l2))
                          for t, mode, l2 in specs])
    return table


def _config_index(frame):
    return {(h, t, w): i for i, (h, t, w) in
            enumerate(zip(frame["H"].tolist(), frame["T"].tolist(), frame["weights"].tolist()))}


def _against_small_batch(frame, K, variant, mode, l2):
    """(rows of `variant`, rows of small_batch, [(j, i)]): the in-regime configurations
    (H, T, weights) of one top-K both were measured on, row j of the variant, i of small_batch."""
    base = frame.where(K=K, mode=mode, l2=l2, variant="small_batch", in_regime=1)
    other = frame.where(K=K, mode=mode, l2=l2, variant=variant, in_regime=1)
    index = _config_index(base)
    pairs = [(j, index[cfg]) for j, cfg in enumerate(zip(
        other["H"].tolist(), other["T"].tolist(), other["weights"].tolist())) if cfg in index]
    return other, base, pairs


def ablation_ratios(frame, K, variant, mode="a", l2="hot"):
    """Per configuration: time of `variant` (one ingredient removed) / time of small_batch, the
    stored ablation_ratio of the in-regime rows that have one."""
    sel = frame.mask(K=K, mode=mode, l2=l2, variant=variant, in_regime=1)
    values = np.asarray(frame["ablation_ratio"][sel], float)
    return values[~np.isnan(values)].tolist()


def ablation_tables(results):
    """Which ingredient of small_batch buys what, per measured architecture."""
    tables = []
    for r, t in measured(results):
        specs = [(name, variant, mode) for name, variant in ABLATIONS for mode in MODES
                 if np.any(t.mask(variant=variant, mode=mode, l2="hot", in_regime=1))]
        if not specs:
            continue
        table = Table(f"ablation_{r.column.slug}",
                      f"Ablation on {r.column.label}: time without the ingredient / time of "
                      f"small_batch, median (min)",
                      ["top-K"], [f"{name} ({mode})" for name, _, mode in specs],
                      notes=["Each ratio pairs the ablated variant with small_batch on the same "
                             "(H, T, weights), rounds paired; > 1 means the ingredient saves "
                             "time. split = small_batch_nosplit, early trigger = "
                             "small_batch_late_trigger, pre-wait metadata = "
                             "small_batch_meta_after_wait; l2 hot, in-regime shapes."])
        for k in sorted(int(k) for k in t.unique("K")):
            table.add_row(k, [summary_cell(ablation_ratios(t, k, variant, mode))
                              for _, variant, mode in specs])
        tables.append(table)
    return tables


def launch_floor(result, mode="a"):
    t = result.table("launch_floor")
    if t is None:
        return None
    sel = t.mask(mode=mode)
    return float(np.median(t["median_us"][sel])) if np.any(sel) else None


def copy_gbps(result):
    """The best device-to-device copy bandwidth measured (GB/s), the bandwidth floor's divisor."""
    t = result.table("copy_bandwidth")
    return float(t["gbps"].max()) if t is not None and len(t) else None


def time_tables(results, modes=FINALIZE_MODES, l2="hot"):
    """Absolute per-launch times of each variant against the launch floor and the byte floor,
    one table per mode (mode b first)."""
    return [_time_table(r, frame, mode, l2) for r, frame in measured(results)
            for mode in present_modes(frame, modes, l2=l2)]


def _time_table(r, t, mode, l2):
    variants = [v for v in TIME_VARIANTS
                if np.any(t.mask(variant=v, mode=mode, l2=l2, in_regime=1))]
    floor, gbps = launch_floor(r, mode), copy_gbps(r)
    columns = [f"{v} us" for v in variants] + ["launch floor us", "bytes/bandwidth us",
                                               "small_batch / launch floor"]
    table = Table(f"times_{r.column.slug}_mode_{mode}",
                  f"Per-launch times on {r.column.label}, mode {mode}, l2 {l2}: "
                  f"median (min) over H x in-regime T x weights",
                  ["top-K"], columns,
                  notes=["Launch floor: /launch_floor, an empty kernel launched the same way "
                         "(" + (f"{floor:.2f} us" if floor is not None else "not measured")
                         + "). Bytes/bandwidth: the fewest bytes a launch moves over the best "
                         "/copy_bandwidth (" + (f"{gbps:.0f} GB/s" if gbps is not None
                                               else "not measured") + ")."])
    for k in sorted(int(k) for k in t.unique("K")):
        cells = []
        for v in variants:
            sel = t.mask(K=k, variant=v, mode=mode, l2=l2, in_regime=1)
            cells.append(summary_cell(t["median_us"][sel], time_text))
        cells.append(Cell(time_text(floor), floor) if floor is not None else Cell(DASH))
        sel = t.mask(K=k, variant="small_batch", mode=mode, l2=l2, in_regime=1)
        if gbps is not None and np.any(sel):
            cells.append(summary_cell(t["bytes"][sel] / (gbps * 1e3), time_text))
        else:
            cells.append(Cell(DASH))
        if floor is not None and np.any(sel):
            cells.append(summary_cell(t["median_us"][sel] / floor,
                                      lambda m, lo: f"{m:.2f}x ({lo:.2f}x)"))
        else:
            cells.append(Cell(DASH))
        table.add_row(k, cells)
    return table


def t1_tables(results):
    """Single-token decode: small_batch's slowest launch and smallest speedup over H x weights."""
    tables = []
    for r, t in measured(results):
        s = t.where(T=1, l2="hot", variant="small_batch")
        modes = [m for m in FINALIZE_MODES if np.any(s.mask(mode=m))]
        if not modes:
            continue
        table = Table(f"t1_{r.column.slug}",
                      f"T = 1 on {r.column.label}, l2 hot: small_batch over hidden sizes and "
                      f"weights, mode b beside mode a", ["top-K"],
                      [c for m in modes for c in (f"max us ({m})", f"min speedup vs scalar ({m})")]
                      + ["shapes"],
                      notes=["max us: the slowest per-launch median of small_batch at T = 1; "
                             "min speedup: the smallest speedup_vs_scalar there; (b) producer -> "
                             "finalize, (a) back-to-back launches."])
        for k in sorted(int(k) for k in s.unique("K")):
            cells, shapes = [], 0
            for m in modes:
                sel = s.mask(K=k, mode=m)
                u, sp = s["median_us"][sel], s["speedup_vs_scalar"][sel]
                if not len(u):
                    cells += [Cell(DASH), Cell(DASH)]
                    continue
                shapes = max(shapes, len(u))
                cells += [Cell(time_text(float(u.max())), float(u.max())),
                          Cell(f"{float(sp.min()):.2f}x", float(sp.min()))]
            table.add_row(k, cells + [count_cell(shapes)])
        tables.append(table)
    return tables


PEERS = ("torch_gather", "torch_bmm")


def peer_ratios(frame, K, peer, mode="c", l2="hot"):
    """Per in-regime (H, T, weights): the peer's median time over small_batch's, same mode. The
    peers ran in rounds of their own, so medians are compared, not rounds."""
    other, base, pairs = _against_small_batch(frame, K, peer, mode, l2)
    return [float(other["median_us"][j] / base["median_us"][i]) for j, i in pairs
            if base["median_us"][i] > 0]


def peer_tables(results, mode="c"):
    """PyTorch formulations of finalize (experiments/finalize/peers_torch.py) against
    small_batch."""
    tables = []
    for r, t in measured(results):
        peers = [p for p in PEERS if np.any(t.mask(variant=p, mode=mode, in_regime=1))]
        if not peers:
            continue
        table = Table(f"peers_{r.column.slug}",
                      f"PyTorch peers on {r.column.label}, mode {mode} (no PDL), l2 hot: "
                      f"peer time / small_batch time, median (min)", ["top-K"],
                      [f"{p} / small_batch" for p in peers] + [f"{p} us" for p in peers],
                      notes=["Per in-regime (H, T, weights) the ratio of the two per-launch "
                             "medians (the peers ran in rounds of their own), then the median "
                             "and the minimum over the shapes; > 1: small_batch is faster. "
                             "The peers launch without PDL, as small_batch does in mode c."])
        for k in sorted(int(k) for k in t.unique("K")):
            cells = [summary_cell(peer_ratios(t, k, p, mode)) for p in peers]
            cells += [summary_cell(t["median_us"][t.mask(K=k, variant=p, mode=mode, l2="hot",
                                                         in_regime=1)], time_text)
                      for p in peers]
            table.add_row(k, cells)
        tables.append(table)
    return tables


def noise_tables(results):
    """/finalize_repeat against /finalize_sweep: the same configurations measured twice, each
    pair inside one file (the merged sweep may hold another run's row for the same key)."""
    tables = []
    for r, _ in measured(results):
        dt, ds = [], []
        for f in r.files:
            rep = with_stored_statistics("finalize_repeat", f.tables.get("finalize_repeat"))
            t = with_stored_statistics("finalize_sweep", f.tables.get("finalize_sweep"))
            if rep is None or t is None or not len(rep):
                continue
            index = {k: i for i, k in enumerate(t["key"].tolist())}
            for j, k in enumerate(rep["key"].tolist()):
                i = index.get(k)
                if i is None or t["median_us"][i] <= 0 or not t["speedup_vs_scalar"][i] > 0:
                    continue
                dt.append(abs(rep["median_us"][j] - t["median_us"][i]) / t["median_us"][i])
                ds.append(abs(rep["speedup_vs_scalar"][j] - t["speedup_vs_scalar"][i])
                          / t["speedup_vs_scalar"][i])
        if not dt:
            continue
        table = Table(f"noise_{r.column.slug}",
                      f"Noise on {r.column.label}: configurations measured twice in one run "
                      f"(/finalize_repeat vs /finalize_sweep)", ["quantity"],
                      ["configurations", "median abs. difference", "max abs. difference"],
                      notes=["abs(second - first) / first, per configuration key, both "
                             "measurements from the same file; pooled over the files."])
        for name, d in (("per-launch time", dt), ("speedup vs scalar", ds)):
            d = np.asarray(d)
            table.add_row(name, [count_cell(len(d)),
                                 Cell(f"{100 * np.median(d):.2f}%", float(np.median(d))),
                                 Cell(f"{100 * d.max():.2f}%", float(d.max()))])
        tables.append(table)
    return tables


def _layer_ratio(frame, H, E, K, T, num, den):
    """Paired ratio time(num) / time(den) for one shape x tokens, or None when absent: the ratio
    the sweep stored on the den row (speedup_finalize when num and den differ in finalize,
    speedup_placement when they differ in placement).

    `num` and `den` are (finalize, placement) pairs."""
    rows = []
    for fin, place in (num, den):
        idx = np.flatnonzero(frame.mask(H=H, E=E, K=K, T=T, finalize=fin, placement=place))
        if len(idx) == 0:
            return None
        rows.append(idx[0])
    column = "speedup_finalize" if num[0] != den[0] else "speedup_placement"
    return float(frame[column][rows[1]])


def _layer_rows(measured, published_rows):
    """Row keys ((H, E, K), shape label, T): shapes in order of first appearance (measured
    files, then the published order), tokens ascending. Shapes match on (H, E, K) because the
    published names omit the intermediate size."""
    labels, tokens = {}, {}
    entries = [(h, e, k, t, s) for f in measured
               for h, e, k, t, s in zip(f["H"].tolist(), f["E"].tolist(), f["K"].tolist(),
                                        f["T"].tolist(), f["shape"].tolist())]
    entries += [(p["H"], p["E"], p["K"], p["T"], p["shape"]) for p in published_rows]
    for h, e, k, t, s in entries:
        labels.setdefault((h, e, k), s)
        tokens.setdefault((h, e, k), set()).add(t)
    return [(shape, labels[shape], t) for shape in labels for t in sorted(tokens[shape])]


def _published_lookup(rows):
    return {(p["H"], p["E"], p["K"], p["T"], p["column"].key): p["speedup"] for p in rows}


def _layer_table(results, pub_rows, pub_columns, name, title, specs, notes):
    """Shared body of the two whole-layer tables; specs: (label suffix, num, den) per column."""
    layers = measured(results, "layer_sweep")
    columns = []
    for r, t in layers:
        for suffix, num, den in specs:
            if np.any(t.mask(finalize=num[0], placement=num[1])) and \
                    np.any(t.mask(finalize=den[0], placement=den[1])):
                columns.append((r.column, f"{r.column.label} {suffix}", (t, num, den)))
    for c in pub_columns:
        columns.append((c, f"{c.label} published", None))
    columns.sort(key=lambda x: x[0].sort_key())
    table = Table(name, title, ["shape", "tokens"], [label for _, label, _ in columns], notes)
    lookup = _published_lookup(pub_rows)
    for (H, E, K), label, T in _layer_rows([t for _, t in layers], pub_rows):
        cells = []
        for col, _, spec in columns:
            if spec is None:
                v = lookup.get((H, E, K, T, col.key))
            else:
                t, num, den = spec
                v = _layer_ratio(t, H, E, K, T, num, den)
            cells.append(Cell(ratio_text(v), v, None, 0 if v is None else 1))
        table.add_row((label, T), cells)
    return table


def whole_layer_table(results, pub):
    pub_cols = [c for c in pub.columns if any(p["column"] == c for p in pub.whole_op)]
    specs = [(f"({p})", ("previous", p), ("new", p)) for p in PLACEMENTS]
    return _layer_table(
        results, pub.whole_op, pub_cols, "whole_layer_speedup",
        "Whole layer: new finalize vs previous, same PDL placement, speedup per shape x tokens",
        specs,
        ["Measured: /layer_sweep, time with the previous finalize / time with the new "
         "(small-batch dispatch), rounds paired; (seed-after) and (seed-before) name the PDL "
         "placement both runs used.",
         "Published: data/published/whole_op_speedup.csv (NVFP4 production op; the seed does not "
         "say which PDL ordering its whole-op runs used). Shapes match on H, E and top-K."])


def pdl_ordering_table(results, pub):
    pub_cols = [c for c in pub.columns if any(p["column"] == c for p in pub.pdl)]
    specs = [("new finalize", ("new", "seed-before"), ("new", "seed-after")),
             ("previous finalize", ("previous", "seed-before"), ("previous", "seed-after"))]
    return _layer_table(
        results, pub.pdl, pub_cols, "pdl_ordering_speedup",
        "PDL ordering: the seed's placements (seed-after) vs before them (seed-before)",
        specs,
        ["Measured: /layer_sweep, time with placement seed-before / time with seed-after, same "
         "finalize, rounds paired. With the previous finalize only the routing trigger moves.",
         "Published: data/published/pdl_ordering_speedup.csv (this head vs the previous head)."])


def layer_time_tables(results):
    """Absolute whole-layer times: what the ratios of the two tables above are ratios of."""
    tables = []
    combos = [(f, p) for p in PLACEMENTS for f in ("new", "previous")]
    for r, t in measured(results, "layer_sweep"):
        present = [c for c in combos if np.any(t.mask(finalize=c[0], placement=c[1]))]
        has_kernel = "finalize_kernel" in t
        peers = sorted(set(t["finalize_kernel"][t.mask(finalize="torch")].tolist())) \
            if has_kernel else []
        table = Table(f"layer_times_{r.column.slug}",
                      f"Whole layer on {r.column.label}: time per layer (us), median (min)",
                      ["shape", "tokens"], [f"{f} finalize, {p}" for f, p in present]
                      + [f"torch {v}" for v in peers]
                      + (["new finalize kernel"] if has_kernel else []),
                      notes=["/layer_sweep median_us (min_us) of each (finalize, placement); "
                             "'new finalize kernel': the variant the small-batch dispatch "
                             "picked." + ("" if not peers else
                                          " torch: the PyTorch peer (experiments/chain/"
                                          "peers_layer_torch.py, PDL off), per formulation.")])
        for (shape, T), idx in _groups(t, ["shape", "T"]).items():
            s = t.take(_mask(len(t), idx))
            cells = []
            for f, p in present:
                m = s.mask(finalize=f, placement=p)
                cells.append(Cell(time_text(float(s["median_us"][m][0]), float(s["min_us"][m][0])),
                                  float(s["median_us"][m][0])) if np.any(m) else Cell(DASH))
            for v in peers:
                m = s.mask(finalize="torch", finalize_kernel=v)
                cells.append(Cell(time_text(float(s["median_us"][m][0]), float(s["min_us"][m][0])),
                                  float(s["median_us"][m][0])) if np.any(m) else Cell(DASH))
            if has_kernel:
                picked = sorted(set(s["finalize_kernel"][s.mask(finalize="new")].tolist()))
                cells.append(Cell("/".join(picked) or DASH))
            table.add_row((shape, T), cells)
        tables.append(table)
    return tables


def finalize_check_tables(results):
    tables = []
    for r, t in measured(results, "finalize_check"):
        extra = [c for c in ("tolerance", "ulp_max") if c in t]
        table = Table(f"finalize_check_{r.column.slug}",
                      f"Finalize correctness on {r.column.label} (/finalize_check)",
                      ["variant"], ["configs", "passed", "max rel_err"]
                      + [{"tolerance": "tolerance", "ulp_max": "max ulp"}[c] for c in extra]
                      + ["unwritten", "NaN"],
                      notes=["rel_err = max |out - reference| / max |reference| per "
                             "configuration (deepseek_fp8: the dequantized E4M3 output against "
                             "the reference's); tolerance = the largest a row was held to; max "
                             "ulp = the largest distance in output steps (bf16 or E4M3) to the "
                             "reference's rounded output (it grows without bound near zero, where "
                             "the steps are tiny: rel_err is the bound); unwritten = output elements still "
                             "poisoned. Routings: " + ", ".join(t.unique("routing")) + "."])
        for v in t.unique("variant"):
            s = t.where(variant=v)
            worst = float(s["rel_err"].max())
            cells = [count_cell(len(s)), count_cell(s["pass"].sum()), Cell(f"{worst:.1e}", worst)]
            if "tolerance" in extra:
                tol = float(s["tolerance"].max())
                cells.append(Cell(f"{tol:.3g}", tol))
            if "ulp_max" in extra:
                cells.append(count_cell(s["ulp_max"].max()))
            table.add_row(v, cells + [count_cell(s["unwritten"].sum()), count_cell(s["nan"].sum())])
        tables.append(table)
    return tables


def delay_text(delay_ns, kernel):
    return "none" if int(delay_ns) == 0 or kernel in ("", "none") else f"{int(delay_ns)} ns @ {kernel}"


def _range_text(values, fmt="{:.0f}"):
    lo, hi = min(values), max(values)
    return fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"


def _mask(n, idx):
    m = np.zeros(n, dtype=bool)
    m[idx] = True
    return m


def _in_run_order(r, group, groups):
    """(key, rows) of `groups` (keys starting with the condition) with the conditions in the
    order their files were measured, first appearance inside one condition."""
    order = {c: n for n, c in enumerate(r.conditions.get(group, []))}
    return sorted(groups.items(), key=lambda kv: order.get(kv[0][0], len(order)))


def _groups(frame, columns):
    """Row indices per distinct value tuple of `columns`, in order of first appearance."""
    out = {}
    for i, key in enumerate(zip(*(frame[c].tolist() for c in columns))):
        out.setdefault(key, []).append(i)
    return out


def equivalence_tables(results):
    """One row per run (file), shape, preset and delay: the token counts run, the routings per
    count, every mismatch and stale read summed, the reference check."""
    tables = []
    for r, t in measured(results, "equivalence"):
        has = {c: c in t for c in ("delay_ns", "delayed_kernel", "stale_reads", "ref_checks",
                                   "routings_per_s")}
        runs = any(t["condition"])
        stub = (["run"] if runs else []) + ["shape", "preset", "delay"]
        cols = ["tokens", "routings per T", "mismatches"] + \
            (["stale reads"] if has["stale_reads"] else []) + \
            ["max rel_err vs reference"] + (["routings/s"] if has["routings_per_s"] else [])
        table = Table(f"equivalence_{r.column.slug}",
                      f"PDL on vs off, bitwise, on {r.column.label} (/equivalence)", stub, cols,
                      notes=["mismatches: routings whose output or any intermediate differed "
                             "bitwise between PDL on and off, summed over the token counts; "
                             "stale reads: finalize's pre-wait index reads that differ from "
                             "routing's final values; max rel_err: output vs the Kokkos "
                             "reference relative to its peak, over the routings checked "
                             "('not checked' when the run checked none)."]
                      + (["Runs are the files (their rows are not merged: the key does not "
                          "name the routings or the reference checks)."] if runs else []))
        delays = [delay_text(d, k) for d, k in zip(
            t["delay_ns"].tolist() if has["delay_ns"] else [0] * len(t),
            t["delayed_kernel"].tolist() if has["delayed_kernel"] else ["none"] * len(t))]
        keyed = Frame({**t.columns, "delay_text": np.asarray(delays)}, t.samples)
        groups = _groups(keyed, ["condition", "shape", "preset", "delay_text"])
        for key, idx in _in_run_order(r, "equivalence", groups):
            s = t.take(_mask(len(t), idx))
            checked = (s["ref_checks"] > 0) if has["ref_checks"] else (s["max_rel_err"] >= 0)
            err = float(s["max_rel_err"][checked].max()) if np.any(checked) else None
            cells = [Cell(",".join(str(x) for x in sorted(set(s["T"].tolist())))),
                     Cell(_range_text(s["routings"].tolist()), int(s["routings"].min())),
                     count_cell(s["mismatches"].sum())]
            if has["stale_reads"]:
                cells.append(count_cell(s["stale_reads"].sum()))
            cells.append(Cell(f"{err:.1e}", err) if err is not None else Cell("not checked"))
            if has["routings_per_s"]:
                cells.append(Cell(_range_text(s["routings_per_s"].tolist())))
            table.add_row(key if runs else key[1:], cells)
        tables.append(table)
    return tables


def race_expectations(t):
    """Per row of a /race_matrix: the verdict to compare with (the file's `verifier` column
    where it holds one, else the ordering rule of docs/design/pdl.md) and where it came from."""
    rule = [race_cell_rule(a, b) for a, b in zip(t["triggers"].tolist(), t["meta"].tolist())]
    verifier = t["verifier"].tolist()
    expected = [v if v in ("race", "ordered") else r for v, r in zip(verifier, rule)]
    source = ["verifier" if v in ("race", "ordered") else "rule" for v in verifier]
    return np.asarray(expected), np.asarray(rule), source


def _verdict_source_text(source):
    n_rule = source.count("rule")
    if n_rule == 0:
        return "expected = the file's verifier column (moefin verify on the cell's chain)"
    if n_rule == len(source):
        return ("expected = the ordering rule (docs/design/pdl.md) applied to the cell's trigger "
                "placements (the files' verifier column reads 'unknown': not connected to moefin "
                "verify)")
    return (f"expected = the file's verifier column, or the ordering rule (docs/design/pdl.md) "
            f"for the {n_rule} cells it marks 'unknown'")


def race_tables(results):
    """Per condition and preset: how the observed stale reads and mismatches line up with the
    expected verdict."""
    tables = []
    for r, t in measured(results, "race_matrix"):
        expected, _, source = race_expectations(t)
        conds = any(t["condition"])
        table = Table(f"race_summary_{r.column.slug}",
                      f"Race matrix on {r.column.label}: observations against the expected "
                      f"verdict", (["condition"] if conds else []) + ["preset"],
                      ["cells", "iterations per cell", "expected race", "observed",
                       "race, observed", "race, not observed", "ordered but observed"],
                      notes=[_verdict_source_text(source) + ". observed = at least one "
                             "iteration with a bitwise mismatch against PDL off or a stale "
                             "pre-wait read. 'ordered but observed' contradicts the expectation "
                             "and needs a look; 'race, not observed' only says this run did not "
                             "expose it.", _condition_note(r, "race_matrix")])
        seen_all = (t["stale_reads"] > 0) | (t["mismatches"] > 0)
        groups = _groups(t, ["condition", "preset"])
        for key, idx in sorted(_in_run_order(r, "race_matrix", groups),
                               key=lambda kv: (r.conditions["race_matrix"].index(kv[0][0]),
                                               kv[0][1])):
            race, seen = expected[idx] == "race", seen_all[idx]
            counts = [len(idx), int(race.sum()), int(seen.sum()), int((race & seen).sum()),
                      int((race & ~seen).sum()), int((~race & seen).sum())]
            its = _range_text(t["iterations"][idx].tolist())
            table.add_row(key if conds else key[1:],
                          [count_cell(counts[0]), Cell(its)] + [count_cell(c) for c in counts[1:]])
        tables.append(table)
        observed = race_observed_table(r, t, expected, seen_all)
        if observed is not None:
            tables.append(observed)
    return tables


def race_observed_table(r, t, expected, seen):
    """Every race-matrix cell that showed a mismatch or a stale read."""
    idx = np.flatnonzero(seen)
    if len(idx) == 0:
        return None
    conds = any(t["condition"])
    table = Table(f"race_observed_{r.column.slug}",
                  f"Race-matrix cells with a mismatch or a stale read on {r.column.label}",
                  (["condition"] if conds else []) + ["preset", "triggers", "meta", "delay"],
                  ["mismatching iterations", "stale iterations", "expected"],
                  notes=["Triggers: placements of permute, gemm1, act and gemm2; meta: "
                         "finalize's metadata reads before or after its wait. Cells of the same "
                         "configuration under another condition that showed nothing are in the "
                         "race_matrix figures."])
    stale = t["stale_iterations"] if "stale_iterations" in t else t["stale_reads"]
    order = {c: n for n, c in enumerate(r.conditions["race_matrix"])}
    for i in sorted(idx, key=lambda i: (order[t["condition"][i]], i)):
        key = (t["preset"][i], t["triggers"][i], t["meta"][i],
               delay_text(t["delay_ns"][i], t["delayed_kernel"][i]))
        table.add_row(((t["condition"][i],) if conds else ()) + key,
                      [Cell(f"{int(t['mismatches'][i])}/{int(t['iterations'][i])}",
                            int(t["mismatches"][i])),
                       Cell(f"{int(stale[i])}/{int(t['iterations'][i])}", int(stale[i])),
                       Cell(str(expected[i]))])
    return table


def _condition_note(r, group):
    """What every file of `group` shares and how they differ (root attributes)."""
    common = shared_conditions(r, group)
    labels = [c for c in r.conditions.get(group, []) if c]
    text = "Conditions (root attributes of the files): "
    text += ", ".join(common) + " in every file" if common else "none shared"
    if labels:
        text += "; differing: " + "; ".join(labels)
        if any(NOT_RECORDED in c for c in labels):
            text += f" ('{NOT_RECORDED}': the file has no such attribute)"
    return text + "."


def pdl_probe_tables(results, design):
    """/pdl_probe beside the H200 table of docs/design/pdl.md (from data/chains/)."""
    tables = []
    for r, t in measured(results, "pdl_probe"):
        specs = list(_groups(t, ["launch", "delay_ns"]))  # (launch, delay) column groups
        columns = ["H200 table pre-wait", "H200 table post-wait"]
        for launch, delay in specs:
            columns += [f"{launch} pre-wait (d={int(delay)} ns)",
                        f"{launch} post-wait (d={int(delay)} ns)"]
        columns.append("verifier (chain file)")
        table = Table(f"pdl_probe_{r.column.slug}",
                      f"Stale reads of a consumer before and after its wait on {r.column.label} "
                      f"(/pdl_probe), beside the H200 table of docs/design/pdl.md",
                      ["row", "chain"], columns,
                      notes=["Cells: iterations with a stale read / iterations. The producer "
                             "triggers at entry (unless the chain says at end) and writes after "
                             "the delay d; 'stream': plain stream launches, 'graph': one CUDA "
                             "graph. H200 table: the measurements of docs/design/pdl.md as the "
                             "chain descriptions in data/chains/ record it (`measured`); verifier: "
                             "the verdict of `moefin verify` those descriptions expect "
                             "(`expected`). Probe chains are matched to the rows by their trigger "
                             "order."])
        probe = {}
        for i, chain in enumerate(t["chain"].tolist()):
            probe.setdefault(probe_signature(chain), {})[
                (t["launch"][i], t["delay_ns"][i])] = (chain, i)
        done = set()
        rows = [(d.row, d.description, d.signature, d) for d in design]
        rows += [(None, next(iter(v.values()))[0], sig, None) for sig, v in probe.items()
                 if sig not in {d.signature for d in design}]
        for row, text, sig, d in rows:
            if d is None and sig in done:
                continue
            done.add(sig)
            cells = [_stale_cell(d.pre, d.runs) if d else Cell(DASH),
                     _stale_cell(d.post, d.runs) if d else Cell(DASH)]
            for spec in specs:
                hit = probe.get(sig, {}).get(spec)
                if hit is None:
                    cells += [Cell(DASH), Cell(DASH)]
                    continue
                i = hit[1]
                cells += [_stale_cell(t["stale_pre_wait"][i], t["iterations"][i]),
                          _stale_cell(t["stale_post_wait"][i], t["iterations"][i])]
            cells.append(Cell(d.expected if d else DASH))
            table.add_row((DASH if row is None else row, text), cells)
        tables.append(table)
    return tables


def _stale_cell(stale, runs):
    if stale is None or runs is None:
        return Cell(DASH)
    return Cell(f"{int(stale)}/{int(runs)}", int(stale))


def build_tables(results, pub, design=()):
    """Every table of the report, in report order; entries are Table objects."""
    out = [finalize_table(results, pub)]
    mt = mode_table(results)
    if mt is not None:
        out.append(mt)
    out += ablation_tables(results)
    out += time_tables(results)
    out += t1_tables(results)
    out += peer_tables(results)
    out += noise_tables(results)
    out.append(whole_layer_table(results, pub))
    out.append(pdl_ordering_table(results, pub))
    out += layer_time_tables(results)
    out += finalize_check_tables(results)
    out += equivalence_tables(results)
    out += race_tables(results)
    out += pdl_probe_tables(results, design)
    return out
