"""Result files derived from another one with h5py: a subset of the rows, some rows' samples scaled
(as if a kernel got slower or faster), the rows reordered, root attributes changed. The derived file
keeps the schema of docs/reference/result-files.md, so every reader takes it; what-if comparisons
(how large a change `compare` calls slower on this file's noise) and the tests use it.

    derive("sweep.h5", "what_if.h5", scale=scaled("small_batch", 1.1))
"""
import h5py
import numpy as np

STATS = ("median_us", "min_us", "q1_us", "q3_us", "max_us")


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def scaled(variant, factor, groups=("finalize_sweep", "finalize_repeat")):
    """A `scale` for derive: `factor` on the rows of `variant` in `groups`."""
    return lambda group, row: factor if group in groups and row.get("variant") == variant \
        else 1.0


def derive(src, dst, keep=None, scale=None, order=None, attrs=None):
    """Writes dst from src. keep(group, row) -> bool selects rows; scale(group, row) -> factor
    multiplies a row's raw samples and time statistics (gbps divided); order(group, n) ->
    permutation of the kept rows; attrs overrides root attributes. Rows are dicts of decoded
    values. Only table groups are copied; the root attribute `derived_from` names src."""
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
        for k, v in f.attrs.items():
            g.attrs[k] = v
        g.attrs.create("derived_from", str(src), dtype=h5py.string_dtype())
        for k, v in (attrs or {}).items():
            g.attrs.create(k, v, dtype=h5py.string_dtype())
        for name in f:
            grp = f[name]
            if _text(grp.attrs.get("kind")) != "table":
                continue
            table, samples = grp["table"][()], grp["samples"][()]
            names = table.dtype.names
            rows = [{n: _text(r[n]) if isinstance(r[n], bytes) else r[n] for n in names}
                    for r in table]
            idx = [i for i, r in enumerate(rows) if keep is None or keep(name, r)]
            if order is not None:
                idx = [idx[p] for p in order(name, len(idx))]
            out = np.empty(len(idx), dtype=table.dtype)
            parts, offset = [], 0
            for n, i in enumerate(idx):
                row = table[i].copy()
                s = samples[row["sample_offset"]:row["sample_offset"] + row["sample_count"]]
                factor = scale(name, rows[i]) if scale is not None else 1.0
                s = s * factor
                for c in STATS:
                    if c in names:
                        row[c] = row[c] * factor
                if "gbps" in names:
                    row["gbps"] = row["gbps"] / factor
                row["sample_offset"] = offset
                offset += len(s)
                parts.append(s)
                out[n] = row
            h = g.create_group(name)
            for k, v in grp.attrs.items():
                h.attrs[k] = v
            h.create_dataset("table", data=out, maxshape=(None,), chunks=True)
            h.create_dataset("samples", data=np.concatenate(parts) if parts else
                             np.empty(0), maxshape=(None,), chunks=True)
    return dst
