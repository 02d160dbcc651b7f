"""The HDF5 schema of docs/reference/result-files.md, checked on a file moefin wrote, with h5py
alone."""
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


def test_a_string_length_of_gigabytes_is_a_damaged_file_not_a_minute_of_zeroing(moefin, tmp_path):
    # A variable-length string attribute stores its length beside its heap address; libhdf5
    # trusts it and converts that many bytes. Set to 2 GiB and 4 GiB, the probe's child (capped
    # at 1 GiB more than it maps) must give up at once and the file be named damaged in one line
    # (before the cap: 20-30 s of zeroing, 4-8 GB resident, then exit 0).
    good = tmp_path / "good.h5"
    with h5py.File(good, "w") as f:
        f.attrs["moefin_schema"] = "moefin-results/1"
        f.attrs["note"] = "x" * 40
    data = bytearray(good.read_bytes())
    gcol = data.find(b"GCOL")
    assert gcol > 0
    # The descriptor of 'note': length (4 bytes), the heap collection's address (8), index (4).
    at = data.find(np.array([40], "<u4").tobytes() + np.array([gcol], "<u8").tobytes())
    assert at > 0
    for length in (1 << 31, 0xFFFFFFF0):
        bad = tmp_path / ("long_%x.h5" % length)
        data[at:at + 4] = np.array([length], "<u4").tobytes()
        bad.write_bytes(bytes(data))
        r = run(moefin, "show", bad, check=False)
        assert r.returncode == 1
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and str(bad) in err[0] and "damaged" in err[0], err
    r = run(moefin, "show", good, check=False)
    assert "damaged" not in r.stderr
