"""Files from several GPUs and several runs merge into one column per architecture."""
import math

import pytest

from analysis import build_report, figures, load_result_file, merge, synthetic as syn

from .conftest import B200_FACTOR


def small_batch_median(K, factor, mode="a"):
    vals = sorted(syn.known_speedup(H, T, K, w, mode, "hot", "small_batch", factor)
                  for H in syn.HIDDEN for T in syn.TOKENS if math.ceil(H / 256) * T < 1184
                  for w in ("bf16", "fp32"))
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


def test_two_architectures_become_two_columns_beside_the_published(h200_file, b200_file):
    report = build_report([b200_file, h200_file])  # order of the arguments does not matter
    assert [r.column.label for r in report.results] == ["H200 (SM90)", "B200 (SM100)"]
    t = report.table("finalize_speedup")
    # ordered by SM: the measured B200 stands beside the published GB200 (both SM100)
    assert t.columns == ["H200 (SM90) mode b", "H200 (SM90) mode a", "B200 (SM100) mode b",
                         "B200 (SM100) mode a", "GB200 (SM100) published",
                         "GB300 (SM103) published", "Rubin (SM107) published"]
    for K in (8, 22):
        for mode in ("a", "b"):
            assert t.cell(K, f"H200 (SM90) mode {mode}").value == \
                pytest.approx(small_batch_median(K, 1.0, mode))
            assert t.cell(K, f"B200 (SM100) mode {mode}").value == pytest.approx(
                small_batch_median(K, B200_FACTOR, mode))
    layer = report.table("whole_layer_speedup")
    assert "B200 (SM100) (seed-after)" in layer.columns
    assert layer.cell((syn.LAYER_SHAPES[0][0], 1), "B200 (SM100) (seed-after)").value == \
        pytest.approx(syn.known_whole_speedup(8, 1, "seed-after", B200_FACTOR))
    for name in ("ablation_b200_sm100", "times_b200_sm100_mode_b", "times_b200_sm100_mode_a",
                 "race_summary_b200_sm100"):
        report.table(name)


def test_same_architecture_merges_and_the_later_run_wins(tmp_path):
    old = syn.write_synthetic(tmp_path / "old.h5", factor=1.0, date_utc="2026-01-01T00:00:00Z")
    new = syn.write_synthetic(tmp_path / "new.h5", factor=1.3, date_utc="2026-03-01T00:00:00Z",
                              experiments=("finalize_sweep",))
    report = build_report([new, old])
    assert len(report.results) == 1
    r = report.results[0]
    assert len(r.files) == 2
    assert r.replaced == {"finalize_sweep": len(load_result_file(new).tables["finalize_sweep"])}
    assert any("measured twice under the same condition" in m for m in report.merging)
    t = report.table("finalize_speedup")
    assert t.cell(16, "H200 (SM90) mode a").value == pytest.approx(small_batch_median(16, 1.3))
    # tables only the older file has are still there
    assert report.table("pdl_ordering_speedup").cell(
        (syn.LAYER_SHAPES[0][0], 8), "H200 (SM90) new finalize").value == \
        pytest.approx(syn.known_pdl_speedup(8, 8, "new"))


def test_gpus_of_one_compute_capability_stay_apart(tmp_path):
    a = syn.write_synthetic(tmp_path / "h100.h5", "NVIDIA H100 80GB HBM3", "sm_90",
                            experiments=("finalize_sweep",))
    b = syn.write_synthetic(tmp_path / "h200.h5", "NVIDIA H200", "sm_90",
                            experiments=("finalize_sweep",))
    results = merge([load_result_file(a), load_result_file(b)])
    assert sorted(r.column.label for r in results) == ["H100 80GB HBM3 (SM90)", "H200 (SM90)"]
    assert len({r.column.slug for r in results}) == 2


def test_files_of_two_conditions_with_the_same_keys_stand_side_by_side(tmp_path):
    """Two race matrices with the same configuration keys, one per shared-memory carveout: both
    kept (a `condition` per row), the later one replaces nothing, the summary has a row per
    condition and the figure a panel per condition."""
    default = syn.write_synthetic(tmp_path / "default.h5", experiments=("race_matrix",),
                                  attrs={"carveout": "default", "launch": "graph"})
    shared = syn.write_synthetic(tmp_path / "shared.h5", experiments=("race_matrix",),
                                 date_utc="2026-02-01T00:00:00Z",
                                 attrs={"carveout": "max-shared", "launch": "graph"})
    report = build_report([shared, default])
    r = report.results[0]
    assert r.replaced == {}
    assert r.conditions["race_matrix"] == ["carveout=default", "carveout=max-shared"]
    race = r.table("race_matrix")
    assert len(race) == 2 * len(load_result_file(default).tables["race_matrix"])
    t = report.table("race_summary_h200_sm90")
    assert t.stub == ["condition", "preset"]
    for cond in r.conditions["race_matrix"]:
        assert t.cell((cond, "seed"), "cells").value == len(race.where(condition=cond,
                                                                     preset="seed"))
    assert "launch=graph in every file" in t.notes[1]
    assert any("kept side by side: carveout=default; carveout=max-shared" in m
               for m in report.merging)
    _, panels = figures.race_figure(r, "seed")
    assert panels == ["carveout=default", "carveout=max-shared"]


def test_a_file_without_the_attribute_is_its_own_condition(tmp_path):
    old = syn.write_synthetic(tmp_path / "old.h5", experiments=("race_matrix",))
    new = syn.write_synthetic(tmp_path / "new.h5", experiments=("race_matrix",),
                              date_utc="2026-02-01T00:00:00Z", attrs={"carveout": "default"})
    r = build_report([old, new]).results[0]
    assert r.conditions["race_matrix"] == ["carveout=not recorded", "carveout=default"]
    assert r.replaced == {}
