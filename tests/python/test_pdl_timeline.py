"""The timeline `moefin simulate --timeline` writes follows the Timelines layout of data/README.md."""
import h5py
import numpy as np

from conftest import ROOT, run


def test_simulated_timeline_has_the_documented_layout(moefin, tmp_path):
    path = tmp_path / "tl.h5"
    chain = ROOT / "data" / "chains" / "replay_seed_after.json"
    proc = run(moefin, "simulate", chain, "--schedules", "20", "--timeline", path)
    assert "wrote schedule 0" in proc.stdout
    with h5py.File(path, "r") as f:
        assert f.attrs["moefin_schema"] == "moefin-results/1"
        g = f["timeline"]
        assert g.attrs["kind"] == "arrays"
        names = g.attrs["kernels"].split(",")
        assert names[:6] == ["routing", "permute", "gemm1", "activation", "gemm2", "finalize"]
        assert names[6] == "routing@1" and len(names) == 12
        cols = {k: g[k][()] for k in ("kernel", "cta", "path", "start_ns", "wait_ns",
                                      "trigger_ns", "end_ns")}
        for k, v in cols.items():
            assert v.dtype == np.int64, k
            assert v.shape == cols["kernel"].shape, k
        # routing runs one CTA, the other kernels two, in both iterations.
        assert len(cols["kernel"]) == 2 * (1 + 5 * 2)
        assert set(cols["kernel"]) == set(range(12))
        assert (cols["end_ns"] >= cols["start_ns"]).all()
        waited = cols["wait_ns"] >= 0
        assert waited.all()  # every kernel of this chain waits
        assert (cols["wait_ns"] >= cols["start_ns"]).all()
        launch, complete = g["launch_ns"][()], g["complete_ns"][()]
        assert launch.shape == complete.shape == (12,)
        for i, k in enumerate(cols["kernel"]):
            assert launch[k] <= cols["start_ns"][i] and cols["end_ns"][i] <= complete[k]


def test_simulate_refuses_to_overwrite_a_timeline(moefin, tmp_path):
    path = tmp_path / "tl.h5"
    path.write_text("keep me")
    proc = run(moefin, "simulate", ROOT / "data" / "chains" / "h200_direct.json",
               "--timeline", path, check=False)
    assert proc.returncode == 2
    assert "refusing to overwrite" in proc.stderr
    assert path.read_text() == "keep me"
