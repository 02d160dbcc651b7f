"""The report of the committed GPU files (data/h200/): numbers in its tables against values
recomputed here with h5py and numpy from the same files, and the conditions (root attributes)
of files with the same keys kept apart."""
import json

import h5py
import matplotlib.image as mpimg
import numpy as np
import pytest

from analysis import CHAINS_DIR, DATA_DIR

from .conftest import read_md_table

H200 = DATA_DIR / "h200"
COLUMN = "H200 (SM90)"


def rows_of(path, group):
    """The table of `group` as {column: array} (strings decoded), and the raw samples per row."""
    with h5py.File(path, "r") as f:
        rows = f[f"{group}/table"][()]
        samples = f[f"{group}/samples"][()]
    cols = {n: (np.char.decode(rows[n]) if rows.dtype[n].kind == "S" else rows[n])
            for n in rows.dtype.names}
    per_row = [samples[o:o + c] for o, c in zip(cols["sample_offset"], cols["sample_count"])]
    return cols, per_row


def table(out, name):
    header, body = read_md_table(out / "tables" / f"{name}.md")
    return header, body


def cell(out, name, row_key, column):
    header, body = table(out, name)
    stub = len(row_key)
    for row in body:
        if tuple(row[:stub]) == tuple(str(k) for k in row_key):
            return row[header.index(column)]
    raise KeyError(f"{name}: no row {row_key}")


# The sweeps of moefin's finalize variants: of rows with the same key the merge keeps the latest
# file's (root attribute date_utc; analysis/merging.py), so the report's finalize tables come from
# the union below, recomputed here without the package (the finalize_fast comparison of
# small_batch_v2 re-measured the bf16 rows of K >= 6 after the full released sweep). Mode b of a
# file without mode_b_producer = pdl-wait is another chain (its producer neither PDL-launched nor
# waiting): its rows count as mode b0, so mode b comes from the files of 2026-12-04 on.
LATEST_SWEEP = H200 / "h200_released_sweep.h5"
SWEEPS = [LATEST_SWEEP, H200 / "h200_small_batch_v2_geometry_table_sweep.h5",
          H200 / "h200_small_batch_v2_lane_layout_table_sweep.h5",
          H200 / "h200_small_batch_v2_pdl_wait_producer_sweep.h5", H200 / "h200_mode_b_sweep.h5"]


def _attr(f, name):
    v = f.attrs.get(name, "")
    return v.decode() if isinstance(v, bytes) else str(v)


def latest_rows(group):
    """{column: array} of `group` over SWEEPS, the row of the latest file per key."""
    files = []
    for path in SWEEPS:
        with h5py.File(path, "r") as f:
            files.append((_attr(f, "date_utc"), _attr(f, "mode_b_producer") == "pdl-wait", path))
    by_key = {}
    for _, waited, path in sorted(files):
        cols, _ = rows_of(path, group)
        for i, k in enumerate(cols["key"]):
            row = {n: v[i] for n, v in cols.items()}
            if row["mode"] == "b" and not waited:
                row["mode"] = "b0"
                k = k.replace("mode=b", "mode=b0")
            by_key[k] = row
    names = next(iter(by_key.values())).keys()
    return {n: np.array([r[n] for r in by_key.values()]) for n in names}


@pytest.fixture(scope="module")
def out(data_report):
    proc, out = data_report
    if not LATEST_SWEEP.is_file():
        pytest.skip("no H200 result files committed under data/h200/")
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("K", [6, 22])
def test_finalize_speedup_is_the_median_and_minimum_of_the_sweep_rows(out, K):
    t = latest_rows("finalize_sweep")
    sel = ((t["K"] == K) & (t["mode"] == "a") & (t["l2"] == "hot")
           & (t["variant"] == "small_batch") & (t["in_regime"] == 1)
           & np.isin(t["weights"], ["bf16", "fp32"]))
    v = t["speedup_vs_scalar"][sel]
    assert len(v) > 10
    assert cell(out, "finalize_speedup", [K], f"{COLUMN} mode a") == \
        f"{np.median(v):.2f}x ({v.min():.2f}x)"
    # mode b, the producer -> finalize chain, stands first, beside it
    b = t["speedup_vs_scalar"][((t["K"] == K) & (t["mode"] == "b") & (t["l2"] == "hot")
                                & (t["variant"] == "small_batch") & (t["in_regime"] == 1)
                                & np.isin(t["weights"], ["bf16", "fp32"]))]
    assert cell(out, "finalize_speedup", [K], f"{COLUMN} mode b") == \
        f"{np.median(b):.2f}x ({b.min():.2f}x)"
    header, _ = table(out, "finalize_speedup")
    assert header.index(f"{COLUMN} mode b") + 1 == header.index(f"{COLUMN} mode a")


def test_launch_floor_and_peer_ratio(out):
    floor = latest_rows("launch_floor")
    a = float(np.median(floor["median_us"][floor["mode"] == "a"]))
    assert cell(out, "times_h200_sm90_mode_a", [8], "launch floor us") == f"{a:.2f}"
    b = float(np.median(floor["median_us"][floor["mode"] == "b"]))
    assert cell(out, "times_h200_sm90_mode_b", [8], "launch floor us") == f"{b:.2f}"
    # torch_gather over small_batch at K = 16, mode c: per shape, the ratio of the medians
    sweep = latest_rows("finalize_sweep")
    peers, _ = rows_of(H200 / "h200_finalize_peers.h5", "finalize_sweep")

    def medians(t, variant):
        m = ((t["K"] == 16) & (t["mode"] == "c") & (t["l2"] == "hot") & (t["in_regime"] == 1)
             & (t["variant"] == variant) & np.isin(t["weights"], ["bf16", "fp32"]))
        return {(h, x, w): u for h, x, w, u in
                zip(t["H"][m], t["T"][m], t["weights"][m], t["median_us"][m])}

    sb, gather = medians(sweep, "small_batch"), medians(peers, "torch_gather")
    ratios = np.array([gather[k] / sb[k] for k in gather if k in sb])
    assert len(ratios) > 10
    assert cell(out, "peers_h200_sm90", [16], "torch_gather / small_batch") == \
        f"{np.median(ratios):.2f}x ({ratios.min():.2f}x)"


# The layer sweeps: the chain with the tiled bf16 GEMMs (no weights_format column: bf16-tiled)
# and the decode GEMMs on bf16 and 4-bit weights; each format is its own column of the layer
# tables, the PyTorch peer a column beside every format.
LAYER_SWEEPS = [("h200_chain_layer_sweep.h5", "bf16-tiled"),
                ("h200_decode_layer_sweep.h5", "bf16"), ("h200_decode_layer_sweep.h5", "fp4")]
LAYER_PEER = H200 / "h200_layer_peer.h5"


@pytest.mark.parametrize("name,fmt", LAYER_SWEEPS)
@pytest.mark.parametrize("shape,T", [("H2048/I1280/E512/top-22", 1),
                                     ("H6144/I512/E256/top-8", 16)])
def test_whole_layer_ratio_pairs_the_rounds(out, name, fmt, shape, T):
    t, samples = rows_of(H200 / name, "layer_sweep")
    formats = t["weights_format"] if "weights_format" in t else np.full(len(t["T"]), fmt)

    def row(fin, place):
        (i,) = np.flatnonzero((t["shape"] == shape) & (t["T"] == T) & (t["finalize"] == fin)
                              & (t["placement"] == place) & (formats == fmt))
        return i

    prev, new = row("previous", "seed-after"), row("new", "seed-after")
    paired = np.median(samples[prev] / samples[new])
    assert cell(out, "whole_layer_speedup", [shape, T], f"{COLUMN} [{fmt}] (seed-after)") == \
        f"{paired:.3f}x"
    before = row("new", "seed-before")
    assert cell(out, "pdl_ordering_speedup", [shape, T], f"{COLUMN} [{fmt}] new finalize") == \
        f"{np.median(samples[before] / samples[new]):.3f}x"
    times = f"layer_times_h200_sm90_{fmt.replace('-', '_')}"
    assert cell(out, times, [shape, T], "new finalize, seed-after") == \
        f"{t['median_us'][new]:.2f} ({t['min_us'][new]:.2f})"


@pytest.mark.parametrize("fmt", sorted({f for _, f in LAYER_SWEEPS}))
def test_layer_peer_stands_beside_the_chains_shape(out, fmt):
    p, _ = rows_of(LAYER_PEER, "layer_sweep")
    header, body = table(out, f"layer_times_h200_sm90_{fmt.replace('-', '_')}")
    shapes = {row[0] for row in body}
    assert set(p["shape"].tolist()) == shapes  # the peer adds no row of its own names
    for kernel in ("grouped_mm", "gather_bmm"):
        sel = p["finalize_kernel"] == kernel
        assert sel.sum() > 5
        for shape, T, med, lo in zip(p["shape"][sel], p["T"][sel], p["median_us"][sel],
                                     p["min_us"][sel]):
            assert cell(out, f"layer_times_h200_sm90_{fmt.replace('-', '_')}", [shape, T],
                        f"torch {kernel}") == f"{med:.2f} ({lo:.2f})"


def test_equivalence_keeps_each_run_and_its_reference_check(out):
    t, _ = rows_of(H200 / "h200_chain_equivalence.h5", "equivalence")
    shape = "H6144/I512/E256/top-8"
    m = (t["shape"] == shape) & (t["preset"] == "seed-after")
    key = ["h200_chain_equivalence", shape, "seed-after", "none"]
    assert cell(out, "equivalence_h200_sm90", key, "max rel_err vs reference") == \
        f"{t['max_rel_err'][m].max():.1e}"
    assert cell(out, "equivalence_h200_sm90", key, "mismatches") == str(t["mismatches"][m].sum())
    bench, _ = rows_of(H200 / "h200_chain_equivalence_bench.h5", "equivalence")
    m = (bench["shape"] == shape) & (bench["preset"] == "seed-after") & (bench["delay_ns"] == 0)
    key = ["h200_chain_equivalence_bench", shape, "seed-after", "none"]
    assert cell(out, "equivalence_h200_sm90", key, "routings per T") == \
        str(int(bench["routings"][m].max()))
    assert cell(out, "equivalence_h200_sm90", key, "max rel_err vs reference") == "not checked"


RACE_FILES = {"carveout=default": "h200_race_carveout_default.h5",
              "carveout=max-shared": "h200_chain_race.h5"}


def test_race_files_with_the_same_keys_stay_side_by_side(out):
    keys = {}
    for label, name in RACE_FILES.items():
        t, _ = rows_of(H200 / name, "race_matrix")
        keys[label] = set(t["key"])
        with h5py.File(H200 / name, "r") as f:
            assert f"carveout={f.attrs['carveout']}" == label
        for preset in sorted(set(t["preset"])):
            p = t["preset"] == preset
            observed = ((t["mismatches"] > 0) | (t["stale_reads"] > 0)) & p
            assert cell(out, "race_summary_h200_sm90", [label, preset], "cells") == str(p.sum())
            assert cell(out, "race_summary_h200_sm90", [label, preset], "observed") == \
                str(observed.sum())
    # every configuration of the default-carveout run was also measured under max-shared, and
    # neither replaced the other
    assert keys["carveout=default"] and keys["carveout=default"] < keys["carveout=max-shared"]
    md = (out / "report.md").read_text()
    assert "/race_matrix: measured under 2 conditions, kept side by side" in md
    assert not any("/race_matrix" in line and "measured twice" in line
                   for line in md.splitlines())


def test_race_figure_has_a_panel_per_carveout_and_the_gantt_shows_them(out):
    t, _ = rows_of(H200 / "h200_race_carveout_default.h5", "race_matrix")
    md = (out / "report.md").read_text()
    for preset in sorted(set(t["preset"])):
        (png,) = (out / "figures").glob(f"*_race_matrix_h200_sm90_{preset.replace('-', '_')}.png")
        image = mpimg.imread(png)
        assert image.shape[1] > 1600, png  # two panels side by side (one is about 1250 px)
    with h5py.File(H200 / "h200_race_carveout_default.h5", "r") as f:
        keys = [f[g].attrs["key"] for g in f if g.startswith("timeline_")]
    keys = [k.decode() if isinstance(k, bytes) else str(k) for k in keys]
    assert keys
    for k in keys:  # one Gantt per configuration, naming every condition it was measured under
        line = next(line for line in md.splitlines() if line.startswith("![") and k in line)
        for label in RACE_FILES:
            assert label in line, line


def test_pdl_probe_beside_the_design_table(out):
    t, _ = rows_of(H200 / "h200_pdl_probe.h5", "pdl_probe")
    header, body = table(out, "pdl_probe_h200_sm90")
    design = {}
    for path in CHAINS_DIR.glob("h200_*.json"):
        chain = json.loads(path.read_text())
        if chain.get("measured") and "; row " in chain.get("source", ""):
            row = int(chain["source"].rsplit("; row ", 1)[1].split()[0])
            stale = {r["where"]: r["stale"] for r in chain["measured"]["reads"]}
            design[row] = f"{stale['before_wait']}/{chain['measured']['runs']}"
    assert sorted(int(r[0]) for r in body) == sorted(design)
    for r in body:
        assert r[header.index("H200 table pre-wait")] == design[int(r[0])]
    # the probe's chains in their order are the table's rows 1..7, stream then graph
    order = list(dict.fromkeys(t["chain"]))
    assert len(order) == 7
    for n, chain in enumerate(order, start=1):
        row = next(r for r in body if r[0] == str(n))
        for launch in ("stream", "graph"):
            (i,) = np.flatnonzero((t["chain"] == chain) & (t["launch"] == launch))
            col = f"{launch} pre-wait (d={t['delay_ns'][i]} ns)"
            assert row[header.index(col)] == f"{t['stale_pre_wait'][i]}/{t['iterations'][i]}"


def test_noise_and_finalize_check(out):
    # each file's repeats against its own first measurements, pooled over the sweep files
    d = []
    for f in sorted(H200.glob("*.h5")):
        with h5py.File(f, "r") as h:
            if "finalize_repeat" not in h:
                continue
        sweep, _ = rows_of(f, "finalize_sweep")
        rep, _ = rows_of(f, "finalize_repeat")
        first = {k: u for k, u in zip(sweep["key"], sweep["median_us"])}
        d += [abs(u - first[k]) / first[k] for k, u in zip(rep["key"], rep["median_us"])]
    d = np.array(d)
    assert cell(out, "noise_h200_sm90", ["per-launch time"], "configurations") == str(len(d))
    assert cell(out, "noise_h200_sm90", ["per-launch time"], "max abs. difference") == \
        f"{100 * d.max():.2f}%"
    check, _ = rows_of(H200 / "h200_finalize_check.h5", "finalize_check")
    for variant in ("small_batch", "deepseek_fp8"):
        m = check["variant"] == variant
        assert cell(out, "finalize_check_h200_sm90", [variant], "passed") == \
            str(check["pass"][m].sum())
        assert cell(out, "finalize_check_h200_sm90", [variant], "max rel_err") == \
            f"{check['rel_err'][m].max():.1e}"


def test_report_renders_a_few_representative_timelines_and_says_so(data_report, out):
    proc, _ = data_report
    from analysis import build_report, figures
    report = build_report([DATA_DIR])
    # data/ holds the H200 files and the host-only audit of the released binaries (no timelines)
    (r,) = [x for x in report.results if x.timelines]
    groups = figures.timeline_groups(r)
    every, _ = figures.figure_jobs(report.results, report.published, "all")
    few, note = figures.figure_jobs(report.results, report.published, "representative")
    n_all = sum(1 for j in every if j[0] == "timelines")
    n_few = sum(1 for j in few if j[0] == "timelines")
    assert n_all == len(groups) and 0 < n_few < n_all
    assert note == (f"timelines: {n_few} of {n_all} configurations drawn (representative ones; "
                    f"--timelines all draws every one)")
    # progress lines on stderr, one per group of figures, with counts
    for group in ("finalize", "race matrices", "timelines"):
        assert f"analysis: figures: {group}: " in proc.stderr
    assert note in proc.stderr
    # a layer-sweep figure holds the new finalize beside the previous one
    layer = [(k, e) for k, e in groups if "placement=" in k]
    assert layer and all([tl.attrs["key"].split("finalize=")[1].split(",")[0]
                          for _, tl in e] == ["new", "previous"] for _, e in layer)
    drawn = [f for f in (out / "figures").glob("*_timeline_*.png")]
    assert len(drawn) == n_few
    t, _ = rows_of(H200 / "h200_chain_layer_sweep.h5", "layer_sweep")
    with h5py.File(H200 / "h200_chain_layer_sweep.h5", "r") as f:
        stamped = {f[g].attrs["key"] for g in f if g.startswith("timeline_layer_")}
    stamped = {k.decode() if isinstance(k, bytes) else str(k) for k in stamped}
    new = (t["finalize"] == "new") & np.isin(t["key"], sorted(stamped))
    worst = t["key"][new][np.argmin(t["speedup_finalize"][new])]
    shape, tokens, _, place = worst.split(",")
    name = f"{shape.split('=')[1]}_{tokens}_{place}".replace("/", "_").replace("=", "_")
    # the configuration the new finalize helps least is among the representative ones
    assert any(p.stem.endswith(name.replace("-", "_")) for p in drawn), (worst, drawn)
