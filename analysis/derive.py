"""Result files derived from a committed one with h5py, for the comparison tests: a subset of
the rows, some rows' samples scaled (as if a kernel got slower or faster), the rows reordered,
root attributes changed. The derived file keeps the schema of data/README.md."""
import h5py
import numpy as np

STATS = ("median_us", "min_us", "q1_us", "q3_us", "max_us")


def _text(v):
    return v.decode() if isinstance(v, bytes) else v


def derive(src, dst, keep=None, scale=None, order=None, attrs=None):
    """Writes dst from src. keep(group, row) -> bool selects rows; scale(group, row) -> factor
    multiplies a row's raw samples and time statistics (gbps divided); order(group, n) ->
    permutation of the kept rows; attrs overrides root attributes. Rows are dicts of decoded
    values. Only table groups are copied."""
    with h5py.File(src, "r") as f, h5py.File(dst, "w") as g:
        for k, v in f.attrs.items():
            g.attrs[k] = v
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
