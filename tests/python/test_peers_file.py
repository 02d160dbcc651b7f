"""The PyTorch peers script's result files (experiments/finalize/peers_torch.py) follow the moefin
schema: moefin reads them and shows the peers as extra columns. Needs no torch and no GPU."""
import importlib.util
import math

import h5py
import pytest

from conftest import ROOT, run

_spec = importlib.util.spec_from_file_location(
    "peers_torch", ROOT / "experiments" / "finalize" / "peers_torch.py")
peers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(peers)


def test_grid_and_dispatch_rule_match_the_sweep():
    assert peers.regime_tokens(1024) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 295]
    assert peers.regime_tokens(2880) == [1, 2, 4, 8, 16, 32, 64, 98]
    assert peers.regime_tokens(7168) == [1, 2, 4, 8, 16, 32, 42]
    assert sum(len(peers.regime_tokens(h)) for h in peers.HIDDEN) == 64
    assert peers.dispatch(1024, 295, 8) == "small_batch"
    assert peers.dispatch(1024, 296, 8) == "vecload"
    assert peers.dispatch(1024, 8, 4) == "scalar"
    assert peers.dispatch(1024, 264, 8, budget=1056) == "vecload"
    assert peers.dispatch(1002, 8, 8) == "scalar"


def _values(variant, median, speedup):
    v = dict(H=1024, T=1, K=8, weights="bf16", mode="c", l2="hot", variant=variant,
             dispatch="small_batch", dispatch_device="small_batch", in_regime=1, rounds=3,
             launches=10, speedup_vs_scalar=speedup, speedup_lo=speedup, speedup_hi=speedup,
             bytes=1000, gbps=1.0, copy_fraction=math.nan, ctas=-1)
    v.update(peers.summary([median, median, median]))
    return v


def test_peer_rows_are_read_by_moefin_as_extra_columns(moefin, tmp_path):
    path = tmp_path / "peers.h5"
    gpu = {"gpu_name": "NVIDIA H200", "arch": "sm_90", "sm_count": 132}
    f, seed = peers.open_result(str(path), False, 7, gpu)
    assert seed == 7
    t = peers.TableWriter(f, "finalize_sweep", "test rows")
    for variant, median, speedup in [("small_batch", 3.0, 1.1), ("torch_gather", 30.0, math.nan)]:
        t.append(peers.row_key(1024, 1, 8, "bf16", "c", "hot", variant),
                 _values(variant, median, speedup), [median] * 3)
    with pytest.raises(ValueError):
        t.append(peers.row_key(1024, 1, 8, "bf16", "c", "hot", "torch_gather"),
                 _values("torch_gather", 1.0, 1.0), [1.0] * 3)
    f.close()  # as a killed run leaves it: not read as a finished one
    unfinished = run(moefin, "show", path, check=False)
    assert unfinished.returncode == 1 and "incomplete" in unfinished.stderr, unfinished.stderr
    peers.finish_result(h5py.File(path, "r+"))

    shown = run(moefin, "show", path, "--table", "finalize_sweep").stdout
    assert "torch_gather" in shown
    table = run(moefin, "sweep", "finalize", "--print", path).stdout
    assert "H200 (sm_90) vs torch_gather" in table
    assert "10.00x (10.00)" in table  # 30 us over 3 us

    with h5py.File(path, "r") as h:
        for name in ("moefin_schema", "git_commit", "seed", "gpu_name", "arch", "sm_count"):
            assert isinstance(h.attrs[name], str), name
        assert h["finalize_sweep"].attrs["kind"] == "table"

    # --resume keeps the rows and refuses duplicates.
    f, seed = peers.open_result(str(path), True, 0, None)
    assert seed == 7
    again = peers.TableWriter(f, "finalize_sweep", "")
    assert again.has(peers.row_key(1024, 1, 8, "bf16", "c", "hot", "small_batch"))
    f.close()


def test_git_commit_names_the_commit_the_results_are_of(monkeypatch, tmp_path):
    # The environment names it outright (scripts/device_build.sh exports device_prepare's record).
    monkeypatch.setenv("MOEFIN_GIT_COMMIT", "0123456789ab-dirty")
    assert peers.git_commit() == "0123456789ab-dirty"
    # Without it, on the GPU machine (build-device made), the record of .deps/git_commit wins over
    # `git rev-parse`, whose checkout there may sit at another commit than the files sent.
    monkeypatch.delenv("MOEFIN_GIT_COMMIT")
    root = tmp_path / "tree"
    script = root / "experiments" / "finalize" / "peers_torch.py"
    script.parent.mkdir(parents=True)
    script.write_text("")
    (root / ".deps").mkdir()
    (root / ".deps" / "git_commit").write_text("feedc0ffee12\n")
    monkeypatch.setattr(peers, "__file__", str(script))
    outside = peers.git_commit()
    assert outside != "feedc0ffee12"  # no build-device: not the GPU machine, the record is ignored
    (root / "build-device").mkdir()
    assert peers.git_commit() == "feedc0ffee12"
