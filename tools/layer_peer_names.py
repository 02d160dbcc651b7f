#!/usr/bin/env python3
"""Give a PyTorch layer-peer file of the old naming the chain's shape names.

experiments/chain/peers_layer_torch.py once named top-22 "H2048/I1280/E512/top-22/relu2"; it
now writes the names of core/chain/shape.hpp ("H2048/I1280/E512/top-22"), which `moefin sweep
layer` writes too. This copies SRC to DST and maps, in /layer_sweep's `shape` column and in the
row keys, every shape name the peer used before onto the chain's name of the same shape; every
other value (columns, raw samples, every other group and root attribute) is kept as it is. DST's
root gets `converted_by` (this script), `converted_from` (SRC as given), `converted_sha256`
(SRC's sha256), `conversion` (what was mapped) and `converted_date_utc`.

usage: tools/layer_peer_names.py SRC DST [--overwrite]
       (studies/decode_layer/rowmajor_scales/layer_peer.h5, data/h200's peer until 2026-12-05,
       came from layer_peer_old_shape_names.h5 beside it)
Exit status: 0 written; 1 SRC unreadable, not a peer file or with a shape the peer does not
know, or DST exists without --overwrite; 2 bad usage.
"""

import argparse
import datetime
import hashlib
import importlib.util
import os
import shutil
import sys

import h5py
import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = "tools/layer_peer_names.py"


def fail(msg, code=1):
    print("layer_peer_names: " + msg, file=sys.stderr)
    sys.exit(code)


def peer_shapes():
    """{chain name: activation} of the shapes peers_layer_torch.py measures."""
    sys.path.insert(0, os.path.join(ROOT, "experiments", "finalize"))
    spec = importlib.util.spec_from_file_location(
        "peers_layer_torch", os.path.join(ROOT, "experiments", "chain", "peers_layer_torch.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return {s["name"]: s["act"] for s in mod.SHAPES.values()}


def name_map(shapes):
    """{name in a peer file: the chain's name}: each chain name, and it with its activation."""
    out = {name: name for name in shapes}
    out.update({f"{name}/{act}": name for name, act in shapes.items()})
    return out


def mapped_rows(rows, names):
    """The /layer_sweep rows with `shape` and `key` mapped (a copy), and {old: new} used."""
    rows = rows.copy()
    used = {}
    for i in range(len(rows)):
        old = rows["shape"][i].decode()
        if old not in names:
            raise ValueError(f"row {i}: shape '{old}' is not one of the peer's shapes "
                             f"({', '.join(sorted(set(names.values())))})")
        new = names[old]
        key = rows["key"][i].decode()
        if not key.startswith(f"shape={old},"):
            raise ValueError(f"row {i}: key '{key}' does not start with shape={old},")
        if new != old:
            used[old] = new
            rows["shape"][i] = new.encode()
            rows["key"][i] = (f"shape={new}," + key[len(f"shape={old},"):]).encode()
    if len(set(rows["key"].tolist())) != len(rows):
        raise ValueError("mapped keys are not unique")
    return rows, used


def sha256(path):
    """Hex SHA-256 of a file (peer files are kilobytes: read whole)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def convert(src, dst, overwrite=False):
    """Writes DST; returns {old: new} of the names mapped."""
    if os.path.exists(dst) and not overwrite:
        raise FileExistsError(f"{dst} exists (--overwrite replaces it)")
    with h5py.File(src, "r") as f:
        if f.attrs.get("moefin_schema") != "moefin-results/1" or "layer_sweep" not in f:
            raise ValueError(f"{src}: not a result file with /layer_sweep")
        rows = f["layer_sweep/table"][()]
        if not np.all(rows["finalize"] == b"torch"):
            raise ValueError(f"{src}: /layer_sweep holds rows other than the torch peer's")
    rows, used = mapped_rows(rows, name_map(peer_shapes()))
    tmp = f"{dst}.{os.getpid()}.partial"
    shutil.copyfile(src, tmp)
    try:
        with h5py.File(tmp, "r+") as f:
            f["layer_sweep/table"][...] = rows
            text = h5py.string_dtype("utf-8")
            now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            mapping = "; ".join(f"{o} -> {n}" for o, n in sorted(used.items())) or "none"
            for name, value in [
                    ("converted_by", SCRIPT), ("converted_from", str(src)),
                    ("converted_sha256", sha256(src)),
                    ("conversion", "/layer_sweep shape names mapped to the chain's in the shape "
                                   f"column and the row keys ({mapping}); every other value "
                                   "unchanged"),
                    ("converted_date_utc", now)]:
                f.attrs.create(name, value, dtype=text)
        os.replace(tmp, dst)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return used


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--overwrite", action="store_true")
    a = ap.parse_args(argv)
    try:
        used = convert(a.src, a.dst, a.overwrite)
    except (OSError, ValueError, KeyError) as e:
        fail(str(e))
    print(f"wrote {a.dst}: " + (", ".join(f"{o} -> {n}" for o, n in sorted(used.items()))
                                or "no shape name needed mapping"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
