"""Merged shard files read like any other: the committed H200 finalize sweep (two hidden sizes of
it) is split into two shard files in the store's layout, `moefin merge` joins them, and the CLI
tables, the analysis report's tables and analysis/shards.py see the same rows as in the unsplit
file. analysis/shards.py's spread is checked on a file whose times are scaled by a known factor.
"""
import pathlib
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import ROOT, run
from analysis import shards
from analysis.report import build_report

SWEEP = ROOT / "data" / "h200" / "h200_finalize_sweep.h5"
KEEP_H = (2048, 7168)
STORE = ("key", "sample_offset", "sample_count")


def shape_of(key):
    return key.split(",mode=")[0]


def read_table(group):
    rows = group["table"][()]
    samples = group["samples"][()]
    per_row = [samples[o:o + c] for o, c in zip(rows["sample_offset"], rows["sample_count"])]
    return rows, per_row


def write_table(f, name, rows, per_row, attrs):
    """A table group as core/h5store writes it: compound rows, flat samples, offsets into them."""
    g = f.create_group(name)
    for k, v in attrs.items():
        g.attrs[k] = v
    rows = rows.copy()
    offset = 0
    for i, s in enumerate(per_row):
        rows["sample_offset"][i] = offset
        rows["sample_count"][i] = len(s)
        offset += len(s)
    g.create_dataset("table", data=rows, maxshape=(None,), chunks=(64,))
    flat = np.concatenate(per_row) if per_row and offset else np.zeros(0)
    g.create_dataset("samples", data=flat.astype(np.float64), maxshape=(None,), chunks=(4096,))


def store_rows(keys, **columns):
    dtype = [("key", "S160"), ("sample_offset", "<i8"), ("sample_count", "<i8")]
    dtype += [(n, "<f8" if isinstance(v[0], float) else "<i8") for n, v in columns.items()]
    rows = np.zeros(len(keys), dtype=dtype)
    rows["key"] = [k.encode() for k in keys]
    for n, v in columns.items():
        rows[n] = v
    return rows


def copy_subset(src, dst, keep_row, extra_attrs=None, per_shard=False):
    """dst gets src's root attributes and the rows keep_row accepts (finalize tables); the launch
    floor and copy bandwidth whole (marked per-shard in a shard file)."""
    for k, v in src.attrs.items():
        dst.attrs[k] = v
    for k, v in (extra_attrs or {}).items():
        dst.attrs[k] = v
    for name in src:
        rows, per_row = read_table(src[name])
        attrs = dict(src[name].attrs)
        if name in ("finalize_sweep", "finalize_repeat"):
            sel = [i for i, k in enumerate(rows["key"]) if keep_row(k.decode())]
            rows, per_row = rows[sel], [per_row[i] for i in sel]
        elif per_shard:
            attrs["shard_scope"] = "per-shard"
        write_table(dst, name, rows, per_row, attrs)


@pytest.fixture(scope="module")
def files(tmp_path_factory, moefin):
    """(unsplit subset, merged shards, the two shard files)."""
    d = tmp_path_factory.mktemp("shards")
    keep = lambda k: int(k.split(",")[0][2:]) in KEEP_H
    subset = d / "subset.h5"
    with h5py.File(SWEEP, "r") as src, h5py.File(subset, "w") as dst:
        copy_subset(src, dst, keep)
        rows, _ = read_table(src["finalize_sweep"])
        shapes = list(dict.fromkeys(shape_of(k.decode()) for k in rows["key"] if keep(k.decode())))
    owner = {s: i % 2 for i, s in enumerate(shapes)}
    plan = store_rows(shapes, index=list(range(len(shapes))), shard=[owner[s] for s in shapes],
                      cost_us=[1000] * len(shapes))
    paths = []
    for i in range(2):
        path = d / f"sweep.shard-{i}-of-2.h5"
        mine = [s for s in shapes if owner[s] == i]
        attrs = {"shard_index": str(i), "shard_count": "2", "grid_command": "sweep finalize",
                 "grid_fingerprint": "0123456789abcdef", "grid_configurations": str(len(shapes)),
                 "gpu_uuid": f"GPU-test-{i}"}
        with h5py.File(SWEEP, "r") as src, h5py.File(path, "w") as dst:
            copy_subset(src, dst, lambda k: owner.get(shape_of(k)) == i, attrs, per_shard=True)
            write_table(dst, "shard_plan", plan, [np.zeros(0)] * len(shapes), {"kind": "table"})
            done = store_rows(mine, index=[shapes.index(s) for s in mine], rows=[18] * len(mine),
                              seconds=[0.5] * len(mine))
            write_table(dst, "shard_done", done, [np.zeros(0)] * len(mine), {"kind": "table"})
        paths.append(path)
    merged = d / "merged.h5"
    out = run(moefin, "merge", merged, paths[1], paths[0]).stdout
    assert f"wrote {merged} (complete;" in out, out
    return subset, merged, paths


def test_cli_tables_of_the_merged_file_equal_those_of_the_unsplit_one(files, moefin):
    subset, merged, _ = files
    a = run(moefin, "sweep", "finalize", "--print", subset).stdout
    b = run(moefin, "sweep", "finalize", "--print", merged).stdout
    assert "noise, H200" in a  # the repeat rows were split between the shards and found again
    assert a == b


def test_report_tables_of_the_merged_file_equal_those_of_the_unsplit_one(files):
    subset, merged, _ = files
    ta = {t.name: t.to_markdown() for t in build_report([subset]).tables}
    tb = {t.name: t.to_markdown() for t in build_report([merged]).tables}
    assert any(n.startswith("times_") for n in ta)  # launch floor and copy bandwidth, per shard
    assert ta == tb


def test_merged_file_keeps_each_shards_floor_and_provenance(files):
    _, merged, _ = files
    with h5py.File(merged, "r") as f:
        floor = [k.decode() for k in f["launch_floor"]["table"]["key"]]
        assert sorted(floor) == sorted(f"mode={m},shard={s}" for m in "abc" for s in (0, 1))
        assert f.attrs["merge_state"] == "complete"
        assert "shard_index" not in f.attrs and "gpu_uuid" not in f.attrs
        assert f["merge_shard_1"].attrs["gpu_uuid"] == "GPU-test-1"
        per = f["merge_shards"]["table"][()]
        assert sorted(per["gpu_uuid"].tolist()) == [b"GPU-test-0", b"GPU-test-1"]


def test_same_rows_finds_the_merged_file_equal_and_a_missing_row(files, tmp_path):
    subset, merged, _ = files
    ok, text = shards.same_rows(subset, merged, "finalize_sweep")
    assert ok, text
    short = tmp_path / "short.h5"
    with h5py.File(merged, "r") as src, h5py.File(short, "w") as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        rows, per_row = read_table(src["finalize_sweep"])
        write_table(dst, "finalize_sweep", rows[1:], per_row[1:], dict(src["finalize_sweep"].attrs))
    ok, text = shards.same_rows(subset, short, "finalize_sweep")
    assert not ok and "1 keys only in" in text
    # The script runs on its own (no package import), as on the GPU machine.
    script = ROOT / "analysis" / "shards.py"
    proc = subprocess.run([sys.executable, str(script), "same", str(subset), str(short),
                           "--table", "finalize_sweep"], capture_output=True, text=True)
    assert proc.returncode == 1, proc.stdout + proc.stderr


def test_spread_measures_a_known_gpu_difference_beside_the_repeat_noise(files, tmp_path):
    subset, _, _ = files
    slower = tmp_path / "slower.h5"
    with h5py.File(subset, "r") as src, h5py.File(slower, "w") as dst:
        for k, v in src.attrs.items():
            dst.attrs[k] = v
        for name in src:
            rows, per_row = read_table(src[name])
            if name == "finalize_sweep":
                rows["median_us"] *= 1.03
            write_table(dst, name, rows, per_row, dict(src[name].attrs))
    s = shards.spread(subset, slower)
    with h5py.File(subset, "r") as f:
        assert s["configurations"] == len(f["finalize_sweep"]["table"])
    assert s["ratio_b_over_a"]["median"] == pytest.approx(1.03)
    assert s["abs_relative_difference"]["max"] == pytest.approx(0.03)
    noise = s["a"]["repeat_noise"]
    assert noise["configurations"] > 0 and 0 < noise["median"] < 0.05
    text = shards.spread_text(s)
    assert "|B/A - 1|: median 3.00%" in text and "noise within A" in text
    script = ROOT / "analysis" / "shards.py"
    out = tmp_path / "spread.json"
    proc = subprocess.run([sys.executable, str(script), "spread", str(subset), str(slower),
                           "--json", str(out)], capture_output=True, text=True)
    assert proc.returncode == 0 and out.is_file(), proc.stdout + proc.stderr


def test_summary_gives_each_shards_gpu_and_seconds_and_the_speedup(files, tmp_path):
    _, merged, _ = files
    s = shards.shard_summary(merged, wall_s=40.0, single_s=86.4)
    assert [r["shard"] for r in s["shards"]] == [0, 1]
    assert [r["gpu_uuid"] for r in s["shards"]] == ["GPU-test-0", "GPU-test-1"]
    # Each shard's /shard_done says 0.5 s per configuration: 144 shapes, split in halves.
    assert s["measured_s"]["sum"] == pytest.approx(0.5 * s["configurations"])
    assert s["balance_max_over_mean"] == pytest.approx(1.0)
    assert s["speedup"] == pytest.approx(86.4 / 40.0)
    assert "speedup 2.16x on 2" in shards.summary_text(s)
    out = tmp_path / "summary.json"
    proc = subprocess.run([sys.executable, str(ROOT / "analysis" / "shards.py"), "summary",
                           str(merged), "--wall-s", "40", "--single-s", "86.4", "--json",
                           str(out)], capture_output=True, text=True)
    assert proc.returncode == 0 and out.is_file(), proc.stdout + proc.stderr


def test_the_script_names_a_bad_file_in_one_line(files, tmp_path):
    """Missing, foreign or table-less files: one line naming the file, exit 2 (1 is `same`'s
    "different"), no traceback."""
    subset, _, _ = files
    junk = tmp_path / "junk.txt"
    junk.write_text("not hdf5")
    script = str(ROOT / "analysis" / "shards.py")
    for args, what in [(["summary", str(junk)], "cannot read it as an HDF5 result file"),
                       (["summary", str(tmp_path / "none.h5")], "no such file"),
                       (["spread", str(subset), str(junk)], str(junk)),
                       (["summary", str(subset)], "no table /merge_shards"),
                       (["same", str(subset), str(subset), "--table", "nope"], "no table /nope")]:
        proc = subprocess.run([sys.executable, script, *args], capture_output=True, text=True)
        assert proc.returncode == 2, (args, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("shards.py: error: "), proc.stderr
        assert what in lines[0] and "Traceback" not in proc.stderr, proc.stderr
