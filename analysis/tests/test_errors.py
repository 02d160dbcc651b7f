"""Bad inputs: one line on stderr naming the file and what is wrong, exit status 1."""
import shutil

import h5py
import numpy as np
import pytest

from analysis import ResultFileError, load_result_file, synthetic as syn

from .conftest import run_analysis


def assert_rejected(path, out, phrase):
    proc = run_analysis("report", path, "--out", out)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"analysis: error: {path}: "), lines[0]
    assert phrase in lines[0], lines[0]
    assert not (out / "report.md").exists()


def test_not_hdf5(tmp_path):
    bad = tmp_path / "notes.h5"
    bad.write_text("this is not HDF5\n")
    assert_rejected(bad, tmp_path / "out", "not an HDF5 file")


def test_truncated(tmp_path, h200_file):
    cut = tmp_path / "cut.h5"
    data = h200_file.read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    assert_rejected(cut, tmp_path / "out", "truncated")


def test_foreign_hdf5(tmp_path):
    foreign = tmp_path / "foreign.h5"
    with h5py.File(foreign, "w") as f:
        f.attrs["creator"] = "someone else"
        f.create_dataset("x", data=np.arange(4))
    assert_rejected(foreign, tmp_path / "out", "not a moefin result file")


def test_other_schema_version(tmp_path):
    p = syn.write_synthetic(tmp_path / "v2.h5", experiments=("launch_floor",))
    with h5py.File(p, "a") as f:
        f.attrs["moefin_schema"] = "moefin-results/2"
    assert_rejected(p, tmp_path / "out", "unsupported schema 'moefin-results/2'")


def test_missing_file_among_good_ones(tmp_path, h200_file):
    proc = run_analysis("report", h200_file, tmp_path / "absent.h5", "--out", tmp_path / "o")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"analysis: error: {tmp_path / 'absent.h5'}: no such file or " \
                                  f"directory"


def test_bad_file_inside_a_directory_is_named(tmp_path, h200_file):
    shutil.copy(h200_file, tmp_path / "good.h5")
    (tmp_path / "zz_bad.h5").write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 64)
    assert_rejected_in_dir = run_analysis("report", tmp_path, "--out", tmp_path / "o")
    assert assert_rejected_in_dir.returncode == 1
    assert f"{tmp_path / 'zz_bad.h5'}: " in assert_rejected_in_dir.stderr


def rewrite_table(path, group, drop=None, reorder=False):
    with h5py.File(path, "a") as f:
        rows = f[f"{group}/table"][()]
        names = [n for n in rows.dtype.names if n != drop]
        if reorder:
            names = names[1:] + names[:1]
        new = np.zeros(len(rows), dtype=[(n, rows.dtype[n]) for n in names])
        for n in names:
            new[n] = rows[n]
        del f[f"{group}/table"]
        f[group].create_dataset("table", data=new, maxshape=(None,))


def test_table_without_a_column_the_analysis_needs(tmp_path):
    p = syn.write_synthetic(tmp_path / "f.h5", experiments=("launch_floor",))
    rewrite_table(p, "launch_floor", drop="median_us")
    with pytest.raises(ResultFileError) as e:
        load_result_file(p)
    assert str(e.value) == f"{p}: table /launch_floor lacks column 'median_us'"


def test_table_not_starting_with_the_store_fields(tmp_path):
    p = syn.write_synthetic(tmp_path / "f.h5", experiments=("launch_floor",))
    rewrite_table(p, "launch_floor", reorder=True)
    assert_rejected(p, tmp_path / "out", "does not start with fields key, sample_offset, "
                                         "sample_count")


def test_rows_pointing_past_the_samples(tmp_path):
    p = syn.write_synthetic(tmp_path / "f.h5", experiments=("launch_floor",))
    with h5py.File(p, "a") as f:
        f["launch_floor/samples"].resize((2,))
    assert_rejected(p, tmp_path / "out", "rows point past the 2 raw samples")
