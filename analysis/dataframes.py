"""Result files as pandas DataFrames, for notebooks and scripts.

    tables = analysis.load("data/h200/h200_finalize_sweep.h5")
    sweep = tables["finalize_sweep"]          # one row per configuration, every stored column
    sweep.attrs["provenance"]["gpu_name"]     # 'NVIDIA H200': the file's root attributes
    sweep["samples"].iloc[0]                  # the row's raw samples (numpy array, one per round)

    every = analysis.load_many(["data/"])     # each group over every file, with `file`, `gpu`,
    every["finalize_sweep"].query("gpu == 'H200 (SM90)' and mode == 'b'")   # `arch` columns and
                                              # root_carveout, root_ctas_per_sm, root_launch

Files are read and validated by analysis.loader (a bad file raises ResultFileError naming it).
"""
import pathlib

import numpy as np
import pandas as pd

from .loader import discover, load_result_file
from .merging import CONDITION_ATTRS, NOT_RECORDED, measured_column

TIMELINE_COLUMNS = ("kernel", "cta", "start_ns", "wait_ns", "trigger_ns", "end_ns")


class ResultTables(dict):
    """{group: DataFrame} of one file; `path` and `provenance` (root attributes) beside them."""

    def __init__(self, path, provenance, tables):
        super().__init__(tables)
        self.path = str(path)
        self.provenance = dict(provenance)

    def __repr__(self):
        groups = ", ".join(f"{g} ({len(df)} rows)" for g, df in self.items())
        return f"<ResultTables {self.path}: {groups}>"


def _attrs(f, group, kind, extra):
    """What every DataFrame carries in `.attrs`: where it comes from and how it was measured."""
    return {"file": f.path, "group": group, "kind": kind, "provenance": dict(f.provenance),
            "gpu": measured_column(f.provenance["arch"], f.provenance["gpu_name"]).label,
            "conditions": {a: f.provenance.get(a, NOT_RECORDED) for a in CONDITION_ATTRS},
            **extra}


def _table_frame(f, group, frame):
    cols = {name: values for name, values in frame.columns.items()}
    df = pd.DataFrame(cols)
    # one numpy array per row; object dtype so that a row's samples stay together
    df["samples"] = pd.Series([np.asarray(s, dtype=np.float64) for s in frame.samples],
                              index=df.index, dtype=object)
    df.attrs = _attrs(f, group, "table", {})
    return df


def _timeline_frame(f, tl):
    df = pd.DataFrame({c: tl.stamps[c] for c in TIMELINE_COLUMNS})
    df.insert(1, "kernel_name", [tl.kernels[k] if 0 <= k < len(tl.kernels) else f"kernel {k}"
                                 for k in df["kernel"].tolist()])
    df.attrs = _attrs(f, tl.group, "timeline", {"group_attrs": dict(tl.attrs)})
    return df


def load(path):
    """One result file as {group: DataFrame}: every experiment table (columns as stored, strings
    decoded, plus `samples`: the row's raw samples) and every timeline (per-CTA stamps, plus
    `kernel_name`). Each DataFrame's `.attrs` holds `file`, `group`, `kind` ('table' or
    'timeline'), `provenance` (the root attributes), `gpu` (the report's column label),
    `conditions` (carveout, ctas_per_sm, launch) and, for timelines, `group_attrs`."""
    f = load_result_file(path)
    tables = {g: _table_frame(f, g, frame) for g, frame in f.tables.items()}
    for tl in f.timelines:
        tables[tl.group] = _timeline_frame(f, tl)
    return ResultTables(f.path, f.provenance, tables)


def load_many(paths):
    """Every file under `paths` (files, or directories searched for *.h5), each group's rows of
    all files in one DataFrame with the columns `file`, `gpu`, `arch` and the condition
    attributes as `root_carveout`, `root_ctas_per_sm`, `root_launch` first (the prefix keeps
    them apart from a table's own columns, e.g. /pdl_probe's `launch`). `.attrs["files"]` lists
    the files read."""
    parts = {}
    files = []
    for p in discover(paths if isinstance(paths, (list, tuple)) else [paths]):
        one = load(p)
        files.append(one.path)
        for group, df in one.items():
            if df.attrs["kind"] != "table":
                continue
            lead = {"file": pathlib.Path(one.path).name, "gpu": df.attrs["gpu"],
                    "arch": one.provenance["arch"],
                    **{f"root_{a}": v for a, v in df.attrs["conditions"].items()}}
            df = df.copy()
            for n, (name, value) in enumerate(lead.items()):
                df.insert(n, name, value)
            parts.setdefault(group, []).append(df)
    out = {}
    for group, dfs in parts.items():
        df = pd.concat(dfs, ignore_index=True)
        df.attrs = {"group": group, "files": files}
        out[group] = df
    return out


__all__ = ["ResultTables", "load", "load_many"]
