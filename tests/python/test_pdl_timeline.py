"""The timeline `moefin simulate --timeline` writes follows the Timelines layout of
docs/reference/experiment-tables.md."""
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


def test_a_timeline_that_cannot_be_written_is_bad_input_before_the_run(moefin, tmp_path):
    """Exit 1 means a hazard: an unwritable --timeline or an out-of-range schedule is exit 2,
    said before the schedules run (nothing printed on stdout), not after."""
    chain = ROOT / "data" / "chains" / "seed_after.json"
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    cases = [
        (["--timeline", ""], "--timeline: empty file name"),
        (["--timeline", blocker / "tl.h5"], "is not a writable folder"),
        (["--timeline", tmp_path / "tl.h5", "--timeline-schedule", "100"],
         "--timeline-schedule: value 100 out of range [0, 99]"),
        (["--timeline", tmp_path / "tl.h5", "--timeline-schedule", "-2"],
         "--timeline-schedule: value -2 out of range"),
    ]
    for args, message in cases:
        proc = run(moefin, "simulate", chain, "--schedules", "100", *args, check=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert message in proc.stderr, (args, proc.stderr)
        assert proc.stdout == "", args
    assert not (tmp_path / "tl.h5").exists()
    # A folder that does not exist yet is made when the file is written.
    nested = tmp_path / "new" / "dir" / "tl.h5"
    assert run(moefin, "simulate", chain, "--schedules", "10", "--timeline", nested,
               check=False).returncode == 0
    assert nested.is_file()
