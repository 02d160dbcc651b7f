"""Every number of every table, recomputed from the formulas the synthetic file was written
with (analysis.synthetic.known_*), not from the code under test."""
import csv
import math

import h5py
import numpy as np
import pytest

from analysis import PUBLISHED_DIR, synthetic as syn
from analysis.render import Table

H200 = "H200 (SM90)"
PUBLISHED = {"GB200 (SM100) published": ("GB200", 100), "GB300 (SM103) published": ("GB300", 103),
             "Rubin (SM107) published": ("Rubin", 107)}


def in_regime(H, T):
    return math.ceil(H / 256) * T < 1184


def configs():
    return [(H, T, w) for H in syn.HIDDEN for T in syn.TOKENS if in_regime(H, T)
            for w in ("bf16", "fp32")]  # the seed protocol leaves weights=none out


def median_min(values):
    v = sorted(values)
    n = len(v)
    med = v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2
    return med, v[0]


def published_csv(name):
    with open(PUBLISHED_DIR / name, encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def check_cell(cell, value, low=None, text=None):
    assert cell.value == pytest.approx(value, rel=1e-9), cell.text
    if low is not None:
        assert cell.low == pytest.approx(low, rel=1e-9), cell.text
    if text is not None:
        assert cell.text == text


def test_finalize_table_has_the_seed_format_and_known_values(report_h200):
    t = report_h200.table("finalize_speedup")
    # mode b (producer -> finalize) first, beside mode a (the seed's protocol)
    assert t.columns == [f"{H200} mode b", f"{H200} mode a"] + list(PUBLISHED)
    assert [k[0] for k, _ in t.rows] == [1, 2, 4, 6, 8, 10, 16, 22, 32]
    for mode in ("b", "a"):
        for K in syn.TOPK:
            med, low = median_min([syn.known_speedup(H, T, K, w, mode, "hot", "small_batch")
                                   for H, T, w in configs()])
            text = f"{med:.2f}x ({low:.2f}x)"
            if K <= 4:  # the synthetic dispatcher, like the seed's, keeps K <= 4 on scalar
                text = "kept on scalar; small_batch " + text
            check_cell(t.cell(K, f"{H200} mode {mode}"), med, low, text)
            assert t.cell(K, f"{H200} mode {mode}").n == len(configs())


def test_finalize_table_published_columns_are_the_csv(report_h200):
    t = report_h200.table("finalize_speedup")
    rows = published_csv("finalize_only_speedup.csv")
    assert len(rows) == 18
    for r in rows:
        col = f"{r['arch']} (SM{r['sm']}) published"
        med, low = float(r["median_speedup"]), float(r["min_speedup"])
        check_cell(t.cell(int(r["topk"]), col), med, low, f"{med:.2f}x ({low:.2f}x)")
    for K in (1, 2, 4):
        for col in PUBLISHED:
            assert t.cell(K, col).text == f"kept on previous (note {K})"
    notes = {r["topk"]: r["statement"] for r in published_csv("finalize_only_notes.csv")}
    for k, statement in notes.items():
        assert f"Published note {k}: {statement}" in t.notes


def test_mode_table_per_mode_and_l2(report_h200):
    t = report_h200.table("finalize_speedup_modes")
    assert len(t.columns) == 6
    for mode in syn.MODES:
        for l2 in syn.L2S:
            for K in syn.TOPK:
                med, low = median_min([syn.known_speedup(H, T, K, w, mode, l2, "small_batch")
                                       for H, T, w in configs()])
                check_cell(t.cell(K, f"{H200} {mode}/{l2}"), med, low,
                           f"{med:.2f}x ({low:.2f}x)")


def test_ablation_table_gives_each_ingredient_its_gain(report_h200):
    t = report_h200.table("ablation_h200_sm90")
    names = {"top-K split": "small_batch_nosplit", "early trigger": "small_batch_late_trigger",
             "pre-wait metadata": "small_batch_meta_after_wait"}
    assert len(t.columns) == 9
    for name, variant in names.items():
        for mode in syn.MODES:
            for K in syn.TOPK:
                med, low = median_min([syn.known_gain(variant, K, mode, H)
                                       for H, T, w in configs()])
                check_cell(t.cell(K, f"{name} ({mode})"), med, low, f"{med:.2f}x ({low:.2f}x)")
    # early triggering buys more with back-to-back launches (mode a) than with a producer (b)
    assert t.cell(8, "early trigger (a)").value > t.cell(8, "early trigger (b)").value


def expected_median_us(H, T, K, w, variant, mode="a"):
    s = syn.known_speedup(H, T, K, w, mode, "hot", variant)
    jit = syn.JITTER if variant != "scalar" else (1.0, 1.0, 1.0)
    return float(np.median([syn.scalar_time_us(H, T, K) * (1 + 0.01 * i) / (s * j)
                            for i, j in enumerate(jit)]))


@pytest.mark.parametrize("mode", ["b", "a"])
def test_time_table_against_the_launch_floor(report_h200, mode):
    t = report_h200.table(f"times_h200_sm90_mode_{mode}")
    floor = syn.known_floor_us(mode)
    gbps = max(g for _, g in syn.COPY_BANDWIDTH)
    assert f"({floor:.2f} us)" in t.notes[0] and f"({gbps:.0f} GB/s)" in t.notes[0]
    for K in syn.TOPK:
        for v in ("scalar", "vecload", "small_batch"):
            med, low = median_min([expected_median_us(H, T, K, w, v, mode)
                                   for H, T, w in configs()])
            check_cell(t.cell(K, f"{v} us"), med, low, f"{med:.2f} ({low:.2f})")
        check_cell(t.cell(K, "launch floor us"), floor, text=f"{floor:.2f}")
        med, low = median_min([syn.finalize_bytes(H, T, K, w) / (gbps * 1e3)
                               for H, T, w in configs()])
        check_cell(t.cell(K, "bytes/bandwidth us"), med, low)
        med, low = median_min([expected_median_us(H, T, K, w, "small_batch", mode) / floor
                               for H, T, w in configs()])
        check_cell(t.cell(K, "small_batch / launch floor"), med, low, f"{med:.2f}x ({low:.2f}x)")


def check_layer_columns(t, columns, known):
    """Every (shape, tokens) cell of the measured columns {label: axis value} is known(K, T, v)."""
    for shape, H, I, E, K, act in syn.LAYER_SHAPES:
        for T in syn.LAYER_TOKENS:
            for label, value in columns.items():
                v = known(K, T, value)
                check_cell(t.cell((shape, T), label), v, text=f"{v:.3f}x")


def test_whole_layer_table_pairs_rounds(report_h200, h200_file):
    t = report_h200.table("whole_layer_speedup")
    check_layer_columns(t, {f"{H200} ({p})": p for p in ("seed-after", "seed-before")},
                        syn.known_whole_speedup)
    # the ratio of the two rows' medians is not the paired ratio: pairing is what was tested
    with h5py.File(h200_file, "r") as f:
        rows = f["layer_sweep/table"][()]
    shape, T = syn.LAYER_SHAPES[0][0].encode(), 1
    med = {(r["finalize"], r["placement"]): r["median_us"] for r in rows
           if r["shape"] == shape and r["T"] == T}
    unpaired = med[(b"previous", b"seed-after")] / med[(b"new", b"seed-after")]
    assert abs(unpaired - syn.known_whole_speedup(8, 1, "seed-after")) > 1e-3


def test_whole_layer_published_columns_match_on_hidden_experts_topk(report_h200):
    t = report_h200.table("whole_layer_speedup")
    labels = {(s[1], s[3], s[4]): s[0] for s in syn.LAYER_SHAPES}
    rows = published_csv("whole_op_speedup.csv")
    for r in rows:
        label = labels[(int(r["hidden"]), int(r["experts"]), int(r["topk"]))]
        cell = t.cell((label, int(r["tokens"])), f"{r['arch']} (SM{r['sm']}) published")
        if r["speedup"]:
            check_cell(cell, float(r["speedup"]), text=f"{float(r['speedup']):.3f}x")
        else:
            assert cell.value is None and cell.text == "-"
    assert len(t.rows) == len(syn.LAYER_SHAPES) * len(syn.LAYER_TOKENS)


def test_pdl_ordering_table(report_h200):
    t = report_h200.table("pdl_ordering_speedup")
    check_layer_columns(t, {f"{H200} {f} finalize": f for f in ("new", "previous")},
                        syn.known_pdl_speedup)
    labels = {(s[1], s[3], s[4]): s[0] for s in syn.LAYER_SHAPES}
    for r in published_csv("pdl_ordering_speedup.csv"):
        label = labels[(int(r["hidden"]), int(r["experts"]), int(r["topk"]))]
        check_cell(t.cell((label, int(r["tokens"])), f"{r['arch']} (SM{r['sm']}) published"),
                   float(r["speedup"]))
    # published rows only exist for tokens 1 and 8; the others say so
    assert t.cell((syn.LAYER_SHAPES[0][0], 16), "GB200 (SM100) published").text == "-"


def test_correctness_tables(report_h200):
    t = report_h200.table("finalize_check_h200_sm90")
    for v in ("scalar", "vecload", "small_batch"):
        errs = [syn.known_check_rel_err(v, H, K) for H in syn.HIDDEN for K in (1, 8, 22)]
        assert t.cell(v, "configs").value == 9
        assert t.cell(v, "passed").value == sum(e < 8e-3 for e in errs)
        check_cell(t.cell(v, "max rel_err"), max(errs), text=f"{max(errs):.1e}")
    assert t.cell("scalar", "passed").value < 9  # the synthetic scalar fails one configuration
    e = report_h200.table("equivalence_h200_sm90")
    assert e.stub == ["shape", "preset", "delay"]  # one file: no run column
    assert len(e.rows) == len(syn.LAYER_SHAPES) * 2  # token counts 1 and 16 share a row
    seed = (syn.LAYER_SHAPES[1][0], "seed", "none")
    assert e.cell(seed, "tokens").text == "1,16"
    assert e.cell(seed, "mismatches").value == 3  # 3 at T = 1, 0 at T = 16
    assert e.cell((syn.LAYER_SHAPES[1][0], "fixed", "none"), "mismatches").value == 0
    check_cell(e.cell(seed, "max rel_err vs reference"), 3.7e-3, text="3.7e-03")


def test_race_summary_counts_agreement_with_the_verifier(report_h200):
    t = report_h200.table("race_summary_h200_sm90")
    cells = [(trig, meta, d) for trig in syn.RACE_TRIGGERS for meta in ("before", "after")
             for d in syn.RACE_DELAYS]
    known = [syn.known_race(*c) for c in cells]
    race = [k[2] == "race" for k in known]
    seen = [k[0] > 0 or k[1] > 0 for k in known]
    assert t.cell("seed", "cells").value == len(cells)
    # the synthetic file's verifier column holds verdicts: they are what is expected
    assert "expected = the file's verifier column" in t.notes[0]
    assert t.cell("seed", "expected race").value == sum(race)
    assert t.cell("seed", "observed").value == sum(seen)
    assert t.cell("seed", "race, observed").value == sum(r and s for r, s in zip(race, seen))
    assert t.cell("seed", "ordered but observed").value == sum(
        s and not r for r, s in zip(race, seen)) == 1
    assert t.cell("fixed", "expected race").value == 0
    observed = report_h200.table("race_observed_h200_sm90")
    assert len(observed.rows) == sum(seen)


def test_markdown_and_latex_renderings():
    t = Table("x_y", "Speedup of small_batch & co", ["top-K"], ["a_b", "100%"], notes=["n #1"])
    t.add_row(8, ["1.10x (1.00x)", "-"])
    md = t.to_markdown().splitlines()
    assert md[2] == "| top-K | a_b | 100% |" and md[3] == "| --- | ---: | ---: |"
    assert md[4] == "| 8 | 1.10x (1.00x) | - |"
    tex = t.to_latex()
    for needle in (r"\toprule", r"\midrule", r"\bottomrule", r"\begin{tabular}{lrr}",
                   r"top-K & a\_b & 100\% \\", r"8 & 1.10x (1.00x) & - \\",
                   r"Speedup of small\_batch \& co", r"n \#1", r"\label{tab:x-y}"):
        assert needle in tex, needle
    with pytest.raises(ValueError):
        t.add_row(4, ["only one cell"])
