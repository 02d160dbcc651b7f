"""The HDF5 schema of data/README.md, checked on a file moefin wrote, with h5py alone."""
import h5py
import numpy as np

from conftest import run

PROVENANCE = ["moefin_schema", "moefin_version", "git_commit", "command_line", "seed", "date_utc",
              "host", "gpu_name", "compute_capability", "sm_count", "l2_bytes", "driver_version",
              "cuda_runtime_version", "arch"]


def test_demo_file_follows_the_schema(moefin, tmp_path):
    run(moefin, "demo", "--rounds", 5, "--out-dir", tmp_path)
    with h5py.File(tmp_path / "host_copy.h5", "r") as f:
        for name in PROVENANCE:
            assert name in f.attrs, name
            assert isinstance(f.attrs[name], str), name
        assert f.attrs["moefin_schema"] == "moefin-results/1"
        assert f.attrs["seed"] == "2026"
        g = f["host_copy"]
        assert g.attrs["kind"] == "table"
        table = g["table"][()]
        names = table.dtype.names
        assert names[:3] == ("key", "sample_offset", "sample_count")
        assert {"bytes", "method", "median_us", "min_us"} <= set(names)
        samples = g["samples"][()]
        assert len(table) == 4
        keys = [k.decode() for k in table["key"]]
        assert len(set(keys)) == len(keys)
        for row in table:
            raw = samples[row["sample_offset"]:row["sample_offset"] + row["sample_count"]]
            assert row["sample_count"] == 5
            # the row's statistics are computed from exactly its raw samples
            assert np.isclose(np.median(raw), row["median_us"])
            assert np.isclose(raw.min(), row["min_us"])
        assert g["table"].maxshape == (None,)
        assert g["samples"].maxshape == (None,)
