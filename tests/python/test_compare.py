"""moefin compare and analysis.compare on files derived from the committed H200 sweep: one
variant's samples scaled, the rows reordered, another GPU; both implementations give the same
numbers and verdicts."""
import io
import json
import pathlib

import numpy as np
import pandas as pd
import pytest

from analysis import comparison as pycompare, load
from conftest import ROOT, run
from analysis.derive import derive, scaled

SWEEP = ROOT / "data" / "h200" / "h200_finalize_sweep.h5"
TIMED = ("finalize_sweep", "finalize_repeat")
# Two hidden sizes of the grid (5184 of the 20736 configurations) keep the test fast; the
# repeat table keeps its rows of those sizes, so the run-to-run noise is the file's own.
HIDDEN = (2048, 5120)
SWEEP_ROWS, VARIANT_ROWS, REPEAT_VARIANT_ROWS = 5184, 5184 // 6, 2 * 3


def subset(group, row):
    return group not in TIMED or int(row["H"]) in HIDDEN


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return derive(SWEEP, tmp_path_factory.mktemp("cmp") / "base.h5", keep=subset)


@pytest.fixture(scope="module")
def slower(tmp_path_factory):
    """small_batch 20% slower in every table where it was timed; the rows in reverse order."""
    return derive(SWEEP, tmp_path_factory.mktemp("cmp") / "slower.h5", keep=subset,
                  scale=scaled("small_batch", 1.2), order=lambda g, n: list(range(n))[::-1])


def csv_of(moefin, *args):
    proc = run(moefin, "compare", *args, "--format", "csv", check=False)
    return proc, pd.read_csv(io.StringIO(proc.stdout))


def test_scaled_variant_is_slower_and_every_other_configuration_same(moefin, base, slower):
    proc, df = csv_of(moefin, base, slower)
    assert proc.returncode == 1, proc.stderr  # some configuration slower: exit 1
    assert set(df["table"]) == {"finalize_sweep", "finalize_repeat", "launch_floor",
                                "copy_bandwidth"}
    scaled_rows = df["table"].isin(TIMED) & (df["variant"] == "small_batch")
    assert scaled_rows.sum() == VARIANT_ROWS + REPEAT_VARIANT_ROWS
    assert (df.loc[scaled_rows, "verdict"] == "slower").all(), \
        df.loc[scaled_rows & (df["verdict"] != "slower")]
    assert (df.loc[~scaled_rows, "verdict"] == "same").all()
    # matched by axis values although NEW holds its rows in reverse order
    np.testing.assert_allclose(df.loc[scaled_rows, "ratio"], 1 / 1.2, rtol=1e-12)
    np.testing.assert_allclose(df.loc[~scaled_rows, "ratio"], 1.0, rtol=1e-12)
    assert (df.loc[scaled_rows, "ratio_hi"] >= df.loc[scaled_rows, "ratio"]).all()
    assert (df.loc[scaled_rows, "ratio_lo"] <= df.loc[scaled_rows, "ratio"]).all()
    assert (f"/finalize_sweep: {SWEEP_ROWS} configurations in both files: {VARIANT_ROWS} slower, "
            f"0 faster, {SWEEP_ROWS - VARIANT_ROWS} same, 0 noisy") in proc.stderr
    n = VARIANT_ROWS + REPEAT_VARIANT_ROWS
    assert f"compare: {n} configuration(s) slower beyond the threshold" in proc.stderr


def test_python_compare_gives_the_same_numbers_and_verdicts(moefin, base, slower):
    _, cli = csv_of(moefin, base, slower)
    py = pycompare.compare(base, slower)
    assert list(py.columns) == list(cli.columns)
    key = ["table", "H", "T", "K", "weights", "mode", "l2", "variant", "bytes"]
    cli = cli.sort_values(key, na_position="first").reset_index(drop=True)
    py = py.sort_values(key, na_position="first").reset_index(drop=True)
    assert (cli["verdict"] == py["verdict"]).all()
    for c in ("base_us", "new_us", "ratio", "ratio_lo", "ratio_hi", "noise"):
        np.testing.assert_allclose(py[c].astype(float), cli[c], rtol=1e-12, err_msg=c)
    slower_summary = next(s for s in py.attrs["summaries"] if s["table"] == "finalize_sweep")
    assert slower_summary["slower"] == VARIANT_ROWS
    assert slower_summary["same"] == SWEEP_ROWS - VARIANT_ROWS
    fig = pycompare.compare_figure(py)
    assert len(fig.axes) == 4


def test_faster_and_within_the_threshold(moefin, base, tmp_path):
    faster = derive(SWEEP, tmp_path / "faster.h5", keep=subset, scale=scaled("vecload", 1 / 1.2))
    proc, df = csv_of(moefin, base, faster)
    assert proc.returncode == 0, proc.stderr  # faster is not a failure
    vec = df["variant"] == "vecload"
    assert (df.loc[vec, "verdict"] == "faster").all()
    assert (df.loc[~vec, "verdict"] == "same").all()
    small = derive(SWEEP, tmp_path / "small.h5", keep=subset, scale=scaled("scalar", 1.03))
    proc, df = csv_of(moefin, base, small)
    assert proc.returncode == 0 and (df["verdict"] == "same").all()
    # below a 1% threshold a 3% change is slower wherever the noise is smaller than 3%
    proc, df = csv_of(moefin, base, small, "--threshold", 1)
    assert proc.returncode == 1
    sc = df["variant"] == "scalar"
    assert set(df.loc[sc, "verdict"]) <= {"slower", "noisy"}
    assert (df.loc[sc, "verdict"] == "slower").mean() > 0.9
    assert (df.loc[sc & (df["verdict"] == "noisy"), "noise"] >= np.log(1.03) * 0.99).all()


def test_a_change_within_the_measured_run_to_run_noise_is_noisy(moefin, tmp_path):
    """The first shape of the H200 sweep differs by 18-21% between its two measurements in the
    run (/finalize_repeat): a 15% change there cannot be told from noise. Its mode b, measured
    with the plain producer of files before 2026-12-04, is compared as mode b0."""
    first = (lambda g, r: g not in TIMED or (int(r["H"]) == 1024 and int(r["T"]) == 1
                                             and int(r["K"]) == 1 and r["weights"] == "bf16"))
    a = derive(SWEEP, tmp_path / "a.h5", keep=first)
    b = derive(SWEEP, tmp_path / "b.h5", keep=first, scale=scaled("vecload", 1.15))
    proc, df = csv_of(moefin, a, b)
    m = (df["table"] == "finalize_sweep") & (df["variant"] == "vecload") & (df["mode"] == "b0")
    assert m.sum() == 1
    row = df[m].iloc[0]
    assert row["noise"] > 0.2 and row["verdict"] == "noisy"
    assert proc.returncode == 1  # mode a and c of vecload there are less noisy: slower


def test_different_gpus_are_refused_or_shown_side_by_side(moefin, base, tmp_path):
    other = derive(SWEEP, tmp_path / "b200.h5", keep=subset,
                   attrs={"gpu_name": "NVIDIA B200", "arch": "sm_100"})
    proc = run(moefin, "compare", base, other, check=False)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "different conditions" in lines[0]
    assert "gpu_name: NVIDIA H200 vs NVIDIA B200" in lines[0] and "--side-by-side" in lines[0]
    with pytest.raises(pycompare.IncomparableFiles, match="gpu_name: NVIDIA H200 vs NVIDIA B200"):
        pycompare.compare(base, other)
    proc, df = csv_of(moefin, base, other, "--side-by-side")
    assert proc.returncode == 0 and (df["verdict"] == "-").all()
    assert "not judged (different conditions)" in proc.stderr
    carveout = derive(SWEEP, tmp_path / "carve.h5", keep=subset, attrs={"carveout": "default"})
    proc = run(moefin, "compare", base, carveout, check=False)
    assert proc.returncode == 2 and "carveout: not recorded vs default" in proc.stderr


def test_json_markdown_rows_and_tables(moefin, base, slower, tmp_path):
    out = tmp_path / "cmp.json"
    proc = run(moefin, "compare", base, slower, "--format", "json", "--out", out,
               "--table", "finalize_sweep", check=False)
    assert proc.returncode == 1
    doc = json.loads(out.read_text())
    (t,) = doc["tables"]
    assert t["table"] == "finalize_sweep" and t["verdicts"]["slower"] == VARIANT_ROWS
    assert len(t["rows"]) == SWEEP_ROWS and doc["slower"] == VARIANT_ROWS
    assert doc["base"]["provenance"]["gpu_name"] == "NVIDIA H200"
    assert f"wrote {out} (json)" in proc.stdout
    proc = run(moefin, "compare", base, slower, "--rows", "changed", check=False)
    md = proc.stdout
    assert "## /finalize_sweep" in md and "## /launch_floor" in md
    body = [line for line in md.splitlines() if line.startswith("| 2048 ") or
            line.startswith("| 5120 ")]
    n = VARIANT_ROWS + REPEAT_VARIANT_ROWS
    assert len(body) == n and all("| slower |" in line for line in body)
    assert md.rstrip().endswith(f"{n} configuration(s) slower beyond the threshold")


def test_unmatched_configurations_and_bad_input(moefin, base, tmp_path):
    fewer = derive(SWEEP, tmp_path / "fewer.h5",
                   keep=lambda g, r: subset(g, r) and not (g == "finalize_sweep"
                                                          and int(r["T"]) == 1))
    proc, df = csv_of(moefin, base, fewer)
    assert proc.returncode == 0
    t1 = int((load(base)["finalize_sweep"]["T"] == 1).sum())
    assert f"/finalize_sweep: {SWEEP_ROWS - t1} configurations in both files" in proc.stderr
    assert f"{t1} only in base, 0 only in new" in proc.stderr
    bad = tmp_path / "bad.h5"
    bad.write_text("not hdf5")
    proc = run(moefin, "compare", base, bad, check=False)
    assert proc.returncode == 1 and str(bad) in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    for args in (["--threshold", "-1"], ["--format", "xml"], ["--rows", "some"]):
        proc = run(moefin, "compare", base, base, *args, check=False)
        assert proc.returncode == 2, args
    proc = run(moefin, "compare", base, check=False)
    assert proc.returncode == 2 and "usage: moefin compare" in proc.stderr
    proc = run(moefin, "compare", base, base, "--table", "nope", check=False)
    assert proc.returncode == 2 and "neither file holds /nope" in proc.stderr
    # Files without a configuration in common: a gate that compared nothing does not pass.
    probe = ROOT / "data" / "h200" / "h200_pdl_probe.h5"
    for fmt in ("md", "csv"):
        proc = run(moefin, "compare", base, probe, "--format", fmt, check=False)
        assert proc.returncode == 2, (fmt, proc.stdout, proc.stderr)
        assert "no configuration is in both files, nothing was compared" in proc.stderr
        assert "/pdl_probe: only in new" in proc.stderr
        # the Markdown report's last line says so instead of "0 ... slower"
        assert ("nothing compared" in proc.stdout) == (fmt == "md"), proc.stdout[-200:]
    assert pathlib.Path(base).is_file()


def test_mode_b_of_the_two_producers_is_never_matched(moefin, tmp_path):
    """A file whose producer waited (mode_b_producer = pdl-wait) and one of the plain producer
    share no mode b configuration: each side's mode b is only in its own file."""
    keep = (lambda g, r: g not in TIMED or (int(r["H"]) == 1024 and int(r["T"]) == 1
                                            and r["weights"] == "bf16"))
    plain = derive(SWEEP, tmp_path / "plain.h5", keep=keep)
    waited = derive(SWEEP, tmp_path / "waited.h5", keep=keep,
                    attrs={"mode_b_producer": "pdl-wait"})
    proc, df = csv_of(moefin, plain, waited)
    sweep = df[df["table"] == "finalize_sweep"]
    assert set(sweep["mode"]) == {"a", "c"}  # the configurations both files hold
    assert (sweep["verdict"] == "same").all()
    text = run(moefin, "compare", plain, waited, check=False).stdout
    # 9 top-K x 6 variants of mode b on each side, matched with nothing
    assert "/finalize_sweep: 108 configurations in both files" in text
    assert "54 only in base, 54 only in new" in text
    assert "/launch_floor: 2 configurations in both files" in text
