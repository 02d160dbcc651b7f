"""The PyTorch whole-layer peer's result files (experiments/chain/peers_layer_torch.py) follow the
schema of `moefin sweep layer`: the same columns in the same order, read back by moefin. Needs no
torch and no GPU."""
import importlib.util
import re
import subprocess
import sys

import h5py
import pytest

from conftest import ROOT, run

sys.path.insert(0, str(ROOT / "experiments" / "finalize"))
_spec = importlib.util.spec_from_file_location(
    "peers_layer_torch", ROOT / "experiments" / "chain" / "peers_layer_torch.py")
peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer)


def _layer_columns_of_moefin():
    """The column names of chain_tables::layer_columns(), from its source."""
    src = (ROOT / "experiments" / "report" / "chain_tables.cpp").read_text()
    body = src[src.index("std::vector<h5::Column> layer_columns()"):]
    body = body[:body.index("}")]
    return re.findall(r'(?:str|int|real)_col\("([A-Za-z_0-9]+)"', body)


def test_peer_columns_are_the_layer_sweep_columns_in_order():
    assert [name for name, _ in peer.LAYER_FIELDS] == _layer_columns_of_moefin()


def test_peer_rows_are_read_back_by_moefin(moefin, tmp_path):
    path = tmp_path / "layer_peer.h5"
    f, seed = peer.common.open_result(str(path), False, 5, {"gpu_name": "NVIDIA H200"})
    assert seed == 5
    t = peer.common.TableWriter(f, "layer_sweep", "test", fields=peer.LAYER_FIELDS)
    shape = peer.SHAPES["top-8"]
    for variant, us in [("grouped_mm", 210.0), ("gather_bmm", 900.0)]:
        t.append(peer.row_key(shape, 1, variant),
                 peer.row_values(shape, 1, variant, 16, 3, [us, us + 1, us + 2]),
                 [us, us + 1, us + 2])
    peer.common.finish_result(f)
    shown = run(moefin, "sweep", "layer", "--print", path).stdout
    assert "torch" in shown and "grouped_mm" in shown and "211.00" in shown
    with h5py.File(path, "r") as h:
        tab = h["layer_sweep"]["table"]
        assert tab.dtype.names[3:] == tuple(n for n, _ in peer.LAYER_FIELDS)
        assert tab["finalize"][0] == b"torch"
        assert tab["shape"][0] == shape["name"].encode()


def test_peer_shapes_carry_the_chains_names(moefin):
    """`sweep layer --peers` and analysis/ match peer rows to the chain's by shape name."""
    listed = run(moefin, "sweep", "layer", "--list", "--shapes", ",".join(peer.SHAPES),
                 "--tokens", "1").stdout
    names = set(re.findall(r"shape=(H\d+/I\d+/E\d+/top-\d+[^,]*),weights_format", listed))
    assert len(names) == len(peer.SHAPES)
    assert {s["name"] for s in peer.SHAPES.values()} == names


# tools/layer_peer_names.py: a peer file of the old naming brought to the chain's names.
_cspec = importlib.util.spec_from_file_location("layer_peer_names",
                                                ROOT / "tools" / "layer_peer_names.py")
names = importlib.util.module_from_spec(_cspec)
_cspec.loader.exec_module(names)

OLD_TOP22 = "H2048/I1280/E512/top-22/relu2"


def _old_peer_file(path, shapes):
    """A peer file as the peer wrote it before it took the chain's names."""
    f, _ = peer.common.open_result(str(path), False, 7, {"gpu_name": "NVIDIA H200"})
    t = peer.common.TableWriter(f, "layer_sweep", "test", fields=peer.LAYER_FIELDS)
    for i, (sname, shown) in enumerate(shapes):
        shape = dict(peer.SHAPES[sname], name=shown)
        us = [100.0 + i, 101.0 + i, 102.5 + i]
        t.append(peer.row_key(shape, 8, "grouped_mm"),
                 peer.row_values(shape, 8, "grouped_mm", 16, 3, us), us)
    peer.common.finish_result(f)
    return path


def _same_except_names(src, dst):
    """Every dataset and attribute of src in dst, /layer_sweep's shape and key excepted;
    returns (src rows, dst rows)."""
    with h5py.File(src, "r") as a, h5py.File(dst, "r") as b:
        assert {k: a.attrs[k] for k in a.attrs} == {k: b.attrs[k] for k in a.attrs}
        seen = []
        a.visititems(lambda n, o: seen.append(n) if isinstance(o, h5py.Dataset) else None)
        for n in seen:
            assert dict(a[n].attrs) == dict(b[n].attrs)
            if n != "layer_sweep/table":
                assert (a[n][()] == b[n][()]).all(), n
        ra, rb = a["layer_sweep/table"][()], b["layer_sweep/table"][()]
        for col in ra.dtype.names:
            if col not in ("shape", "key"):
                x, y = ra[col], rb[col]
                same = (x == y) | ((x != x) & (y != y)) if x.dtype.kind == "f" else x == y
                assert same.all(), col
        return ra, rb


def test_names_script_maps_only_the_old_shape_names(tmp_path, moefin):
    src = _old_peer_file(tmp_path / "old.h5", [("top-8", peer.SHAPES["top-8"]["name"]),
                                               ("top-22", OLD_TOP22)])
    dst = tmp_path / "new.h5"
    assert names.convert(str(src), str(dst)) == {OLD_TOP22: peer.SHAPES["top-22"]["name"]}
    old, new = _same_except_names(src, dst)
    assert new["shape"].tolist() == [peer.SHAPES["top-8"]["name"].encode(),
                                     peer.SHAPES["top-22"]["name"].encode()]
    assert new["key"][1].decode() == peer.row_key(peer.SHAPES["top-22"], 8, "grouped_mm")
    assert new["key"][0] == old["key"][0]
    with h5py.File(dst, "r") as f:
        assert f.attrs["converted_by"] == "tools/layer_peer_names.py"
        assert f.attrs["converted_sha256"] == names.sha256(src)
        assert OLD_TOP22 in f.attrs["conversion"]
    # moefin reads it, the top-22 row under the chain's name
    shown = run(moefin, "sweep", "layer", "--print", dst).stdout
    assert "H2048/I1280/E512/top-22 " in shown and "/relu2" not in shown


def test_names_script_refuses_unknown_shapes_and_an_existing_output(tmp_path):
    src = _old_peer_file(tmp_path / "odd.h5", [("top-8", "H6144/I512/E256/top-8/relu2")])
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "layer_peer_names.py"),
                           str(src), str(tmp_path / "out.h5")], capture_output=True, text=True)
    assert proc.returncode == 1
    assert "H6144/I512/E256/top-8/relu2' is not one of the peer's shapes" in proc.stderr
    assert not (tmp_path / "out.h5").exists()
    ok = _old_peer_file(tmp_path / "ok.h5", [("top-22", OLD_TOP22)])
    (tmp_path / "taken.h5").write_bytes(b"x")
    with pytest.raises(FileExistsError):
        names.convert(str(ok), str(tmp_path / "taken.h5"))
    assert (tmp_path / "taken.h5").read_bytes() == b"x"


def test_converted_peer_is_the_raw_measurement_with_the_chains_names():
    """results/h200_decode_rowmajor/h200_layer_peer.h5 (data/h200's peer until 2026-12-05) =
    results/h200_layer_peer/h200_layer_peer.h5 through tools/layer_peer_names.py: the same
    values, top-22 under the chain's name."""
    src = ROOT / "results" / "h200_layer_peer" / "h200_layer_peer.h5"
    dst = ROOT / "results" / "h200_decode_rowmajor" / "h200_layer_peer.h5"
    old, new = _same_except_names(src, dst)
    mapped = {OLD_TOP22: peer.SHAPES["top-22"]["name"]}
    assert [mapped.get(s, s) for s in old["shape"].astype(str)] == new["shape"].astype(str).tolist()
    assert sorted(set(new["shape"].astype(str))) == sorted(s["name"] for s in peer.SHAPES.values())
    with h5py.File(dst, "r") as f:
        assert f.attrs["converted_from"] == "results/h200_layer_peer/h200_layer_peer.h5"
        assert f.attrs["converted_sha256"] == names.sha256(src)


def test_committed_peer_names_the_chains_shapes_without_conversion():
    """data/h200/h200_layer_peer.h5 was written with the chain's shape names (measured after the
    peer took them): every shape of the peer's table, nothing to convert."""
    with h5py.File(ROOT / "data" / "h200" / "h200_layer_peer.h5", "r") as f:
        shapes = sorted(set(f["layer_sweep/table"]["shape"].astype(str)))
        assert "converted_from" not in f.attrs
    assert OLD_TOP22 not in shapes
    assert shapes == sorted(s["name"] for s in peer.SHAPES.values())
