"""/layer_sweep rows by weights format (docs/reference/experiment-tables.md): the loader fills
`weights_format` in files written before it (bf16-tiled; the torch peer's rows bf16), refuses a
value outside the schema, takes the peer's old shape names as the chain's, and the layer tables keep
each format apart (a ratio never mixes rows of two formats)."""
import h5py
import pytest

from analysis import ResultFileError, build_report, load_result_file, synthetic


def _layer_rows(fmt, factor, shape=("H6144/I512/E256/top-8", 6144, 512, 256, 8, "swiglu")):
    """One (shape, T = 1) of both finalizes and placements: new is `factor` times faster."""
    name, H, I, E, K, act = shape
    rows, samples = [], []
    for fin in ("new", "previous"):
        for place in ("seed-after", "seed-before"):
            us = 100.0 if fin == "previous" else 100.0 / factor
            raw = [us, us * 1.01, us * 1.02]
            row = {"key": f"shape={name},T=1,finalize={fin},placement={place}"
                          + ("" if fmt in (None, "bf16-tiled") else f",weights_format={fmt}"),
                   "shape": name, "H": H, "I": I, "E": E, "K": K, "activation": act, "T": 1,
                   "finalize": fin, "placement": place, "median_us": raw[1], "min_us": raw[0],
                   "q1_us": raw[0], "q3_us": raw[2], "max_us": raw[2], "rounds": 3,
                   "finalize_kernel": "small_batch" if fin == "new" else "scalar"}
            if fmt is not None:
                row["weights_format"] = fmt
            rows.append(row)
            samples.append(raw)
    return rows, samples


def _write(path, parts):
    rows, samples = [], []
    for r, s in parts:
        rows += r
        samples += s
    with h5py.File(path, "w") as f:
        for k, v in synthetic.provenance("NVIDIA H200", "sm_90").items():
            f.attrs[k] = v
        synthetic.write_table(f, "layer_sweep", rows, samples, "test layer sweep")
    return path


def _peer_rows(name):
    row = {"key": f"shape={name},T=1,finalize=torch,placement=none,kernel=grouped_mm",
           "shape": name, "H": 2048, "I": 1280, "E": 512, "K": 22, "activation": "relu2",
           "T": 1, "finalize": "torch", "placement": "none", "median_us": 170.0,
           "min_us": 169.0, "q1_us": 169.5, "q3_us": 170.5, "max_us": 171.0, "rounds": 3,
           "finalize_kernel": "grouped_mm"}
    return [row], [[169.0, 170.0, 171.0]]


def test_a_file_without_the_column_is_bf16_tiled_and_peer_rows_bf16(tmp_path):
    top22 = ("H2048/I1280/E512/top-22", 2048, 1280, 512, 22, "relu2")
    path = _write(tmp_path / "old.h5", [_layer_rows(None, 1.05, top22),
                                        _peer_rows("H2048/I1280/E512/top-22/relu2")])
    t = load_result_file(path).tables["layer_sweep"]
    fmt = dict(zip(t["finalize"].tolist(), t["weights_format"].tolist()))
    assert fmt == {"new": "bf16-tiled", "previous": "bf16-tiled", "torch": "bf16"}
    # The peer's old top-22 name (with its activation) is the chain's name, key included.
    assert set(t["shape"].tolist()) == {"H2048/I1280/E512/top-22"}
    assert "shape=H2048/I1280/E512/top-22,T=1,finalize=torch,placement=none,kernel=grouped_mm" \
        in t["key"].tolist()


def test_a_format_outside_the_schema_is_refused_naming_the_column(tmp_path):
    path = _write(tmp_path / "bad.h5", [_layer_rows("nvfp4", 1.05)])
    with pytest.raises(ResultFileError, match=r"bad\.h5: /layer_sweep column 'weights_format': "
                                              r"'nvfp4' is not one of bf16-tiled, bf16, fp4"):
        load_result_file(path)


def test_the_layer_tables_keep_each_format_apart(tmp_path):
    # Same (shape, T, finalize, placement) in both formats, different gains: 1.10x and 1.02x.
    path = _write(tmp_path / "two.h5", [_layer_rows("bf16", 1.10), _layer_rows("fp4", 1.02)])
    report = build_report([path])
    by_name = {t.name: t for t in report.tables}
    whole = by_name["whole_layer_speedup"]
    cols = {c: i for i, c in enumerate(whole.columns)}
    bf16 = cols["H200 (SM90) [bf16] (seed-after)"]
    fp4 = cols["H200 (SM90) [fp4] (seed-after)"]
    (cells,) = [c for k, c in whole.rows if k == ("H6144/I512/E256/top-8", 1)]
    assert cells[bf16].value == pytest.approx(1.10, rel=1e-6)
    assert cells[fp4].value == pytest.approx(1.02, rel=1e-6)
    assert {"layer_times_h200_sm90_bf16", "layer_times_h200_sm90_fp4"} <= set(by_name)


def test_one_format_keeps_the_plain_column(tmp_path):
    path = _write(tmp_path / "one.h5", [_layer_rows("fp4", 1.05)])
    report = build_report([path])
    whole = {t.name: t for t in report.tables}["whole_layer_speedup"]
    assert "H200 (SM90) (seed-after)" in whole.columns
