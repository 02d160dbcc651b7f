"""The PyTorch whole-layer peer's result files (experiments/chain/peers_layer_torch.py) follow the
schema of `moefin sweep layer`: the same columns in the same order, read back by moefin. Needs no
torch and no GPU."""
import importlib.util
import re
import sys

import h5py

from conftest import ROOT, run

sys.path.insert(0, str(ROOT / "experiments" / "finalize"))
_spec = importlib.util.spec_from_file_location(
    "peers_layer_torch", ROOT / "experiments" / "chain" / "peers_layer_torch.py")
peer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peer)


def _layer_columns_of_moefin():
    """The column names of chain_tables::layer_columns(), from its source."""
    src = (ROOT / "experiments" / "results" / "chain_tables.cpp").read_text()
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
