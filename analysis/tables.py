"""The report's tables, computed from merged per-architecture results and the published CSVs.

Conventions (data/README.md defines the columns):
- finalize speedups are the table's own `speedup_vs_scalar` (the paired per-round ratio the
  sweep computed), summarized over H x in-regime T x bf16/fp32 weights by the median, with the
  minimum in parentheses, as the seed publishes them;
- ratios between two rows of a table (ablations, whole-layer runs) are paired over rounds: the
  median of numerator[i] / denominator[i] over the rows' raw samples, one per interleaved round;
  rows with different sample counts fall back to the ratio of their medians.
"""
import numpy as np

from .render import DASH, Cell, Table, ratio_text, speedup_text, time_text

SEED_TOPK = (1, 2, 4, 6, 8, 10, 16, 22, 32)
SEED_WEIGHTS = ("bf16", "fp32")
MODES = ("a", "b", "c")
L2S = ("hot", "cold")
ABLATIONS = (("top-K split", "small_batch_nosplit"),
             ("early trigger", "small_batch_late_trigger"),
             ("pre-wait metadata", "small_batch_meta_after_wait"))
TIME_VARIANTS = ("scalar", "vecload", "small_batch", "torch_gather", "torch_bmm")
PLACEMENTS = ("seed-after", "seed-before")


def paired_ratio(num_samples, den_samples, num_median, den_median):
    """Median over rounds of num/den; the ratio of medians when rounds cannot be paired."""
    num, den = np.asarray(num_samples, float), np.asarray(den_samples, float)
    if len(num) and len(num) == len(den) and np.all(den > 0):
        return float(np.median(num / den))
    return float(num_median / den_median)


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
    """(ArchResult, table) of every architecture whose files hold rows of `group`."""
    tables = [(r, sweep_rows(r) if group == "finalize_sweep" else r.table(group))
              for r in results]
    return [(r, t) for r, t in tables if t is not None and len(t)]


def count_cell(n):
    return Cell(str(int(n)), int(n))


def all_columns(results, pub):
    """Measured and published columns, ordered by SM number, a measured one before a published
    one of the same SM (so they stand side by side)."""
    cols = [r.column for r in results] + list(pub.columns)
    return sorted(cols, key=lambda c: c.sort_key())


def finalize_table(results, pub):
    """The seed's table: median (min) speedup of small_batch over scalar per top-K."""
    sweeps = {r.column.key: t for r, t in measured(results)}
    cols = [c for c in all_columns(results, pub) if c.published or c.key in sweeps]
    ks = sorted(set(SEED_TOPK) | {int(k) for t in sweeps.values() for k in t.unique("K")})
    table = Table("finalize_speedup",
                  "Finalize only: small_batch vs scalar, median speedup per top-K (minimum)",
                  ["top-K"], [c.label + (" published" if c.published else "") for c in cols],
                  notes=["Measured: speedup_vs_scalar of /finalize_sweep, mode a (back-to-back, "
                         "PDL on), l2 hot, median over H x in-regime T x weights (bf16, fp32), "
                         "minimum in parentheses. 'kept on scalar': the dispatcher keeps every "
                         "in-regime shape of that top-K on the scalar kernel; the number is what "
                         "small_batch would give.",
                         "Published: the seed's table (data/published/finalize_only_speedup.csv, "
                         "finalize_only_notes.csv), measured by its authors."]
                  + [f"Published note {k}: {text}" for k, text in pub.notes.items()])
    for k in ks:
        cells = []
        for c in cols:
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
            cell = summary_cell(finalize_speedups(frame, k))
            if cell.value is not None and kept_on_scalar(frame, k):
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
                  notes=["Modes (data/README.md): a = back-to-back launches, PDL on (the seed's "
                         "protocol); b = producer then finalize in each graph step, PDL on, "
                         "producer-alone time subtracted; c = back-to-back, PDL off. "
                         "hot/cold = L2 state. Median over H x in-regime T x weights."])
    for k in ks:
        table.add_row(k, [summary_cell(finalize_speedups(t, k, mode, l2))
                          for t, mode, l2 in specs])
    return table


def _config_index(frame):
    return {(h, t, w): i for i, (h, t, w) in
            enumerate(zip(frame["H"].tolist(), frame["T"].tolist(), frame["weights"].tolist()))}


def ablation_ratios(frame, K, variant, mode="a", l2="hot"):
    """Per configuration: time of `variant` (one ingredient removed) / time of small_batch."""
    base = frame.where(K=K, mode=mode, l2=l2, variant="small_batch", in_regime=1)
    abl = frame.where(K=K, mode=mode, l2=l2, variant=variant, in_regime=1)
    index = _config_index(base)
    out = []
    for j, cfg in enumerate(zip(abl["H"].tolist(), abl["T"].tolist(), abl["weights"].tolist())):
        i = index.get(cfg)
        if i is not None:
            out.append(paired_ratio(abl.samples[j], base.samples[i], abl["median_us"][j],
                                    base["median_us"][i]))
    return out


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


def time_tables(results, mode="a", l2="hot"):
    """Absolute per-launch times of each variant against the launch floor and the byte floor."""
    tables = []
    for r, t in measured(results):
        variants = [v for v in TIME_VARIANTS
                    if np.any(t.mask(variant=v, mode=mode, l2=l2, in_regime=1))]
        floor, gbps = launch_floor(r, mode), copy_gbps(r)
        columns = [f"{v} us" for v in variants] + ["launch floor us", "bytes/bandwidth us",
                                                   "small_batch / launch floor"]
        table = Table(f"times_{r.column.slug}",
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
        tables.append(table)
    return tables


def _layer_ratio(frame, H, E, K, T, num, den):
    """Paired ratio time(num) / time(den) for one shape x tokens, or None when absent.

    `num` and `den` are (finalize, placement) pairs."""
    rows = []
    for fin, place in (num, den):
        idx = np.flatnonzero(frame.mask(H=H, E=E, K=K, T=T, finalize=fin, placement=place))
        if len(idx) == 0:
            return None
        rows.append(idx[0])
    a, b = rows
    return paired_ratio(frame.samples[a], frame.samples[b], frame["median_us"][a],
                        frame["median_us"][b])


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


def finalize_check_tables(results):
    tables = []
    for r, t in measured(results, "finalize_check"):
        table = Table(f"finalize_check_{r.column.slug}",
                      f"Finalize correctness on {r.column.label} (/finalize_check)",
                      ["variant"], ["configs", "passed", "max rel_err", "unwritten", "NaN"],
                      notes=["rel_err = max |out - reference| / max |reference| per "
                             "configuration; unwritten = output elements still poisoned."])
        for v in t.unique("variant"):
            s = t.where(variant=v)
            worst = float(s["rel_err"].max())
            table.add_row(v, [count_cell(len(s)), count_cell(s["pass"].sum()),
                              Cell(f"{worst:.1e}", worst), count_cell(s["unwritten"].sum()),
                              count_cell(s["nan"].sum())])
        tables.append(table)
    return tables


def equivalence_tables(results):
    tables = []
    for r, t in measured(results, "equivalence"):
        table = Table(f"equivalence_{r.column.slug}",
                      f"PDL on vs off, bitwise, on {r.column.label} (/equivalence)",
                      ["shape", "tokens", "preset"],
                      ["routings", "mismatches", "max rel_err vs reference"])
        for row in t.rows():
            table.add_row((row["shape"], row["T"], row["preset"]),
                          [count_cell(row["routings"]), count_cell(row["mismatches"]),
                           Cell(f"{row['max_rel_err']:.1e}", row["max_rel_err"])])
        tables.append(table)
    return tables


def race_tables(results):
    """Per preset: how the observed stale reads and mismatches line up with the verifier."""
    tables = []
    for r, t in measured(results, "race_matrix"):
        table = Table(f"race_summary_{r.column.slug}",
                      f"Race matrix on {r.column.label}: observations against the verifier",
                      ["preset"], ["cells", "verifier: race", "observed stale or mismatch",
                                   "ordered but observed", "race but not observed"],
                      notes=["'ordered but observed' contradicts the verifier and needs a look; "
                             "'race but not observed' only says the delays did not expose it."])
        for preset in t.unique("preset"):
            s = t.where(preset=preset)
            race = s["verifier"] == "race"
            seen = (s["stale_reads"] > 0) | (s["mismatches"] > 0)
            counts = [len(s), int(race.sum()), int(seen.sum()), int((~race & seen).sum()),
                      int((race & ~seen).sum())]
            table.add_row(preset, [count_cell(c) for c in counts])
        tables.append(table)
    return tables


def build_tables(results, pub):
    """Every table of the report, in report order; entries are Table objects."""
    out = [finalize_table(results, pub)]
    mt = mode_table(results)
    if mt is not None:
        out.append(mt)
    out += ablation_tables(results)
    out += time_tables(results)
    out.append(whole_layer_table(results, pub))
    out.append(pdl_ordering_table(results, pub))
    out += finalize_check_tables(results)
    out += equivalence_tables(results)
    out += race_tables(results)
    return out
