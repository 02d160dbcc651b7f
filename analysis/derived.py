"""Derived statistics of result tables, the one place they are computed for files that lack them.

The writers store every derived statistic once (docs/reference/experiment-tables.md):
/finalize_sweep the paired ratio of each row against its baseline (`speedup_vs_scalar`,
`speedup_lo`, `speedup_hi`) and, for the ablations, against the full kernel (`ablation_ratio`,
`ablation_lo`, `ablation_hi`); /layer_sweep `speedup_finalize` and `speedup_placement`. The tables
read those columns. Files written before a column existed get it here, computed from the raw samples
the same way (median over rounds of the paired ratio; the ratio of medians when rounds cannot be
paired), with NaN intervals: the bootstrap of the writer is not repeated.
"""
import numpy as np

from .frame import Frame

# The ablations of the sweep, each against the kernel it removes an ingredient from (the
# registry's `ablation_of` of files that store ablation_ratio).
ABLATION_OF = {"small_batch_nosplit": "small_batch", "small_batch_late_trigger": "small_batch",
               "small_batch_meta_after_wait": "small_batch"}


def paired_ratio(num_samples, den_samples, num_median, den_median):
    """Median over rounds of num/den; the ratio of medians when rounds cannot be paired."""
    num, den = np.asarray(num_samples, float), np.asarray(den_samples, float)
    if len(num) and len(num) == len(den) and np.all(den > 0):
        return float(np.median(num / den))
    return float(num_median / den_median)


def _with(frame, columns):
    cols = dict(frame.columns)
    cols.update(columns)
    return Frame(cols, frame.samples)


def _index(frame, names):
    """{(values of `names`): row} of the frame's rows."""
    return {tuple(v): i for i, v in enumerate(zip(*(frame[n].tolist() for n in names)))}


def _ablation_columns(frame):
    """ablation_ratio (time of the ablated variant / time of its full kernel, same H, T, K,
    weights, mode and L2), NaN for every other row."""
    keys = ("H", "T", "K", "weights", "mode", "l2", "variant")
    index = _index(frame, keys)
    ratio = np.full(len(frame), np.nan)
    for i, row in enumerate(zip(*(frame[n].tolist() for n in keys))):
        full = ABLATION_OF.get(row[-1])
        j = index.get(row[:-1] + (full,)) if full else None
        if j is not None:
            ratio[i] = paired_ratio(frame.samples[i], frame.samples[j], frame["median_us"][i],
                                    frame["median_us"][j])
    nan = np.full(len(frame), np.nan)
    return {"ablation_ratio": ratio, "ablation_lo": nan, "ablation_hi": nan.copy()}


def _layer_columns(frame):
    """speedup_finalize (previous / this, same placement; new rows) and speedup_placement
    (seed-before / this, same finalize; seed-after rows); 1 where there is no partner."""
    keys = ("shape", "T", "finalize", "placement")
    index = _index(frame, keys)
    out = {c: np.ones(len(frame)) for c in ("speedup_finalize", "speedup_placement")}
    for i, (shape, T, fin, place) in enumerate(zip(*(frame[n].tolist() for n in keys))):
        for column, partner in (("speedup_finalize", (shape, T, "previous", place)
                                 if fin != "previous" else None),
                                ("speedup_placement", (shape, T, fin, "seed-before")
                                 if place == "seed-after" else None)):
            j = index.get(partner) if partner else None
            if j is not None:
                out[column][i] = paired_ratio(frame.samples[j], frame.samples[i],
                                              frame["median_us"][j], frame["median_us"][i])
    nan = np.full(len(frame), np.nan)
    for c in list(out):
        out[c + "_lo"], out[c + "_hi"] = nan, nan.copy()
    return out


def with_stored_statistics(group, frame):
    """`frame` with the derived columns its writer stores, computed when the file lacks them."""
    if frame is None or len(frame) == 0:
        return frame
    if group in ("finalize_sweep", "finalize_repeat") and "ablation_ratio" not in frame:
        return _with(frame, _ablation_columns(frame))
    if group == "layer_sweep" and "speedup_finalize" not in frame:
        return _with(frame, _layer_columns(frame))
    return frame
