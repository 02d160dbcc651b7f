"""scripts/gpu/fused_summary.py over the committed H200 files (no GPU): the layer ratio is the
per-round ratio of the same interleaved rounds, a race the verifier predicts is no failure, and a
bad file is one line with exit 2."""

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "fused_summary.py"
H200 = ROOT / "data" / "h200"


def run(*args):
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)


def test_layer_ratio_is_the_median_of_per_round_ratios():
    path = H200 / "h200_chain_layer_sweep.h5"
    r = run("--layer", str(path), "--this", "new", "--against", "previous")
    assert r.returncode == 0, r.stderr
    with h5py.File(path, "r") as f:
        t = f["layer_sweep/table"][()]
        s = f["layer_sweep/samples"][()]
    row = {(x["shape"], x["T"], x["finalize"], x["placement"]): x for x in t}
    new = row[(b"H6144/I512/E256/top-8", 1, b"new", b"seed-after")]
    old = row[(b"H6144/I512/E256/top-8", 1, b"previous", b"seed-after")]
    a = s[new["sample_offset"] : new["sample_offset"] + new["sample_count"]]
    b = s[old["sample_offset"] : old["sample_offset"] + old["sample_count"]]
    want = f"{np.median(b / a):.3f}x (min {(b / a).min():.3f}x)"
    line = next(x for x in r.stdout.splitlines() if "top-8 T=  1 seed-after" in x)
    assert want in line, (want, line)
    assert "new faster than previous in" in r.stdout


def test_equivalence_and_race_files_pass_when_the_verifier_predicts_every_race():
    r = run("--equivalence", str(H200 / "h200_chain_equivalence.h5"), "--race",
            str(H200 / "h200_chain_race.h5"))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verifier race" in r.stdout  # the benchmark cells race, as predicted
    assert "CONTRADICTS" not in r.stdout and "FAIL" not in r.stdout


def test_a_bad_file_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "x.h5"
    bad.write_text("not hdf5")
    r = run("--layer", str(bad))
    assert r.returncode == 2
    assert len(r.stderr.strip().splitlines()) == 1 and str(bad) in r.stderr
    assert run().returncode == 2


def test_timeline_spans_are_read_from_the_stamps(tmp_path):
    path = H200 / "h200_chain_layer_sweep.h5"
    r = run("--timeline", str(path))
    assert r.returncode == 0, r.stderr
    with h5py.File(path, "r") as f:
        t = f["timeline_layer_0"]
        k, start, end = t["kernel"][()], t["start_ns"][()], t["end_ns"][()]
        key = t.attrs["key"]
        key = key.decode() if isinstance(key, bytes) else str(key)
        gemm2 = list(t.attrs["kernels"].split(",")).index("gemm2")
    t0 = start.min()
    line = next(x for x in r.stdout.splitlines() if x.strip().startswith(key + ":"))
    assert f"layer {(end.max() - t0) / 1e3:.1f} us" in line, line
    assert f"gemm2 {(start[k == gemm2].min() - t0) / 1e3:.1f}/" in line, line
    # A sweep file without stamped layers is refused in one line.
    plain = tmp_path / "plain.h5"
    with h5py.File(plain, "w") as f:
        f.create_group("layer_sweep")
    r = run("--timeline", str(plain))
    assert r.returncode == 2 and "no timeline_layer_N" in r.stderr
