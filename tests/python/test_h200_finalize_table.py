"""The seed-format table printed from the committed H200 sweep, recomputed independently.

`moefin sweep finalize --print` must print, per top-K, the median and the minimum of
speedup_vs_scalar over the in-regime bf16/fp32 shapes of mode a, hot L2, variant small_batch;
here the same statistics come straight from the HDF5 file with h5py and numpy.
"""
import pathlib
import re

import h5py
import numpy as np
import pytest

from conftest import ROOT, run

SWEEP = ROOT / "data" / "h200" / "h200_finalize_sweep.h5"


def _column(table, name):
    col = table[name]
    return np.array([v.decode() for v in col]) if col.dtype.kind == "S" else col


@pytest.mark.skipif(not SWEEP.is_file(), reason="no committed H200 sweep in data/h200/")
def test_printed_h200_column_matches_the_file(moefin):
    with h5py.File(SWEEP, "r") as f:
        assert f.attrs["gpu_name"] == "NVIDIA H200"
        t = f["finalize_sweep/table"][()]
    cols = {n: _column(t, n) for n in ("K", "mode", "l2", "variant", "weights", "in_regime",
                                       "speedup_vs_scalar")}
    sel = ((cols["mode"] == "a") & (cols["l2"] == "hot") & (cols["variant"] == "small_batch")
           & (cols["in_regime"] == 1) & np.isin(cols["weights"], ["bf16", "fp32"]))
    out = run(moefin, "sweep", "finalize", "--print", SWEEP).stdout
    section = out.split("mode a (")[1].split("\n\n")[0]
    checked = 0
    for k in (1, 2, 4, 6, 8, 10, 16, 22, 32):
        sp = cols["speedup_vs_scalar"][sel & (cols["K"] == k)]
        assert sp.size > 0, k
        line = next(l for l in section.splitlines() if re.match(rf"^{k}\s", l))
        median, minimum = map(float, re.search(r"([\d.]+)x \(([\d.]+)\)", line).groups())
        assert median == pytest.approx(np.median(sp), abs=0.006), (k, line)
        assert minimum == pytest.approx(sp.min(), abs=0.006), (k, line)
        checked += 1
    assert checked == 9
