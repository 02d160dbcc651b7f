"""Before/after comparison of two result files, as `moefin compare` makes it
(experiments/report/compare.hpp): the same matching, interval, noise and verdicts, as a
DataFrame, and a figure of the ratios.

    df = analysis.compare("before.h5", "after.h5", threshold=0.05)
    df[df.verdict == "slower"]                 # the configurations the change made slower
    analysis.compare_figure(df)                # ratio and interval per configuration

Rules (the same in C++; tests/python checks that both give the same numbers):
- configurations are matched per table by their axis values (TIMED_TABLES; else the key);
- ratio = median(base rounds) / median(new rounds): > 1 means the new file is faster;
- interval: 95% percentile bootstrap of that ratio, 2000 resamples, each file's rounds resampled
  on their own (positions drawn with moefin's seeded generator, core/rng.hpp, seed 0x5eed);
- noise = the largest of: each file's spread of rounds (q3 - q1) / median, the configuration's
  own run-to-run difference where a file measured it twice (/finalize_repeat), and the median
  run-to-run difference of the table in each file;
- verdict: same within a factor 1 + threshold either way; beyond it noisy when the change is
  within the noise, else faster or slower.
"""
import math

import numpy as np
import pandas as pd

from .dataframes import load
from .errors import ResultFileError
from .merging import CONDITION_ATTRS, NOT_RECORDED

# group -> (axes, repeat group, this group is the first measurement)
TIMED_TABLES = {
    "finalize_sweep": (("H", "T", "K", "weights", "mode", "l2", "variant"), "finalize_repeat",
                       True),
    "finalize_repeat": (("H", "T", "K", "weights", "mode", "l2", "variant"), "finalize_sweep",
                        False),
    "launch_floor": (("mode",), None, True),
    "copy_bandwidth": (("bytes",), None, True),
    "layer_sweep": (("shape", "T", "finalize", "placement", "weights_format"), None, True),
}
COMPARED_ATTRS = ("arch", "gpu_name") + tuple(a for a in CONDITION_ATTRS
                                              if a not in ("arch", "gpu_name"))
METRICS = ("base_us", "new_us", "ratio", "ratio_lo", "ratio_hi", "noise", "verdict",
           "base_rounds", "new_rounds")
RESAMPLES = 2000
CONFIDENCE = 0.95
SEED = 0x5EED
MASK64 = (1 << 64) - 1


class IncomparableFiles(ValueError):
    """Two files of different GPUs or conditions (str: the one line `moefin compare` prints)."""


class _Rng:
    """moefin::Rng (core/rng.hpp): splitmix64, and below(n) as the high 64 bits of next * n."""

    def __init__(self, seed):
        self.state = seed & MASK64

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        return (self.next() * n) >> 64


def _median_pick(rng, n):
    pos = sorted(rng.below(n) for _ in range(n))
    at = 0.5 * (n - 1)
    lo = int(math.floor(at))
    hi = min(lo + 1, n - 1)
    return pos[lo], pos[hi], at - lo


_PLANS = {}


def _plan(n_num, n_den):
    """(num lo, num hi, num frac, den lo, den hi, den frac) arrays, one entry per resample:
    the draws of stats::MedianRatioBootstrap for these sample sizes."""
    key = (n_num, n_den)
    if key not in _PLANS:
        rng = _Rng(SEED)
        picks = []
        for _ in range(RESAMPLES):
            picks.append(_median_pick(rng, n_num) + _median_pick(rng, n_den))
        cols = list(zip(*picks))
        _PLANS[key] = tuple(np.asarray(c, dtype=np.int64 if i % 3 != 2 else np.float64)
                            for i, c in enumerate(cols))
    return _PLANS[key]


def _type7(sorted_values, q):
    """Quantile of sorted values along the last axis, as stats::quantile computes it."""
    n = sorted_values.shape[-1]
    pos = q * (n - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    frac = pos - lo
    a, b = sorted_values[..., lo], sorted_values[..., hi]
    return a + frac * (b - a)


def _intervals(base, new):
    """Bootstrap interval of median(base) / median(new) for rows of equal sample sizes
    (2-D arrays, one row per configuration)."""
    a, b = np.sort(base, axis=1), np.sort(new, axis=1)
    nl, nh, nf, dl, dh, df = _plan(a.shape[1], b.shape[1])
    alpha = (1.0 - CONFIDENCE) / 2.0
    lo, hi = np.empty(len(a)), np.empty(len(a))
    for start in range(0, len(a), 512):  # 512 rows x 2000 resamples at a time
        sa, sb = a[start:start + 512], b[start:start + 512]
        num = sa[:, nl] + nf * (sa[:, nh] - sa[:, nl])
        den = sb[:, dl] + df * (sb[:, dh] - sb[:, dl])
        ratios = num / den
        lo[start:start + 512] = _order_quantile(ratios, alpha)
        hi[start:start + 512] = _order_quantile(ratios, 1.0 - alpha)
    return lo, hi


def _order_quantile(values, q):
    """_type7 of the sorted rows of `values`, from the two order statistics it needs."""
    n = values.shape[-1]
    pos = q * (n - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    part = np.partition(values, sorted({lo, hi}), axis=-1)
    a, b = part[..., lo], part[..., hi]
    return a + (pos - lo) * (b - a)


def _median(values):
    return float(_type7(np.sort(np.asarray(values, dtype=np.float64)), 0.5))


def _row_stats(df):
    """(median, spread) per row: of the raw samples (rows of one sample count at a time), the
    stored median_us and NaN spread for rows without samples; NaN where a sample is NaN."""
    n = len(df)
    median = df["median_us"].to_numpy(dtype=np.float64).copy() if n else np.empty(0)
    spread = np.full(n, np.nan)
    samples = df["samples"].tolist()
    sizes = np.fromiter((len(x) for x in samples), dtype=np.int64, count=n)
    for size in np.unique(sizes):
        if size == 0:
            continue
        idx = np.flatnonzero(sizes == size)
        x = np.sort(np.stack([samples[i] for i in idx]).astype(np.float64), axis=1)
        bad = np.isnan(x).any(axis=1)
        med = _type7(x, 0.5)
        median[idx] = np.where(bad, np.nan, med)
        if size >= 2:
            with np.errstate(divide="ignore", invalid="ignore"):
                sp = (_type7(x, 0.75) - _type7(x, 0.25)) / med
            spread[idx] = np.where(bad | ~(med > 0), np.nan, sp)
    return median, spread


def condition_differences(prov_a, prov_b):
    """['gpu_name: A vs B', ...] for every condition attribute the two files disagree on."""
    out = []
    for a in COMPARED_ATTRS:
        va, vb = prov_a.get(a, NOT_RECORDED), prov_b.get(a, NOT_RECORDED)
        if va != vb:
            out.append(f"{a}: {va} vs {vb}")
    return out


def _identities(df, axes, path, group):
    ids = list(zip(*(df[a].tolist() for a in axes))) if axes else [()] * len(df)
    index = {}
    for i, ident in enumerate(ids):
        if ident in index:
            raise ResultFileError(path, f"table /{group} holds the configuration of row {i} "
                                        f"twice (same axis values)")
        index[ident] = i
    return index


def _repeat_noise(tables, group, stats):
    """({identity: |repeat / first - 1|}, median) of one file, or ({}, None); `stats` caches
    _row_stats per group."""
    axes, repeat, first = TIMED_TABLES.get(group, (("key",), None, True))
    if repeat is None or repeat not in tables or "median_us" not in tables[repeat] \
            or tables[repeat]["median_us"].dtype.kind != "f":
        return {}, None
    mine_index = _identities(tables[group], axes, tables.path, group)
    other_index = _identities(tables[repeat], axes, tables.path, repeat)
    mine, other = stats(group), stats(repeat)
    diffs = {}
    for ident, i in mine_index.items():
        j = other_index.get(ident)
        if j is None:
            continue
        a, b = float(mine[0][i]), float(other[0][j])
        if not (a > 0) or not (b > 0):
            continue
        diffs[ident] = abs(b / a - 1) if first else abs(a / b - 1)
    if not diffs:
        return {}, None
    return diffs, _median(list(diffs.values()))


def verdict_of(ratio, noise, threshold, judged=True):
    """The verdict of one configuration (compare::verdict_of)."""
    if not judged:
        return "-"
    if not (ratio > 0) or not math.isfinite(ratio):
        return "noisy"
    change = abs(math.log(ratio))
    if change <= math.log1p(threshold):
        return "same"
    if not (noise >= 0) or change <= math.log1p(noise):
        return "noisy"
    return "faster" if ratio > 1 else "slower"


def _stats_cache(tables):
    cache = {}

    def stats(group):
        if group not in cache:
            cache[group] = _row_stats(tables[group])
        return cache[group]
    return stats


def _compare_table(base, new, group, threshold, judged, stats_a, stats_b):
    axes, _, _ = TIMED_TABLES.get(group, (("key",), None, True))
    da, db = base[group], new[group]
    for df, where in ((da, base.path), (db, new.path)):
        for a in axes:
            if a not in df:
                raise ResultFileError(where, f"table /{group} lacks its axis column '{a}'")
    ia = _identities(da, axes, base.path, group)
    ib = _identities(db, axes, new.path, group)
    rep_a, med_a = _repeat_noise(base, group, stats_a)
    rep_b, med_b = _repeat_noise(new, group, stats_b)
    (mid_a, spr_a), (mid_b, spr_b) = stats_a(group), stats_b(group)
    samples_a, samples_b = da["samples"].tolist(), db["samples"].tolist()
    rows, pairs = [], []
    for ident, i in sorted(ia.items(), key=lambda kv: kv[1]):
        j = ib.get(ident)
        if j is None:
            continue
        b_us, n_us = float(mid_a[i]), float(mid_b[j])
        ratio = b_us / n_us if b_us > 0 and n_us > 0 else math.nan
        noise = math.nan
        if not (math.isnan(spr_a[i]) or math.isnan(spr_b[j])):
            sources = [float(spr_a[i]), float(spr_b[j])] \
                + [d[ident] for d in (rep_a, rep_b) if ident in d] \
                + [m for m in (med_a, med_b) if m is not None]
            noise = max(v for v in sources if v >= 0 and math.isfinite(v))
        rows.append({"table": group, **dict(zip(axes, ident)), "base_us": b_us, "new_us": n_us,
                     "ratio": ratio, "ratio_lo": math.nan, "ratio_hi": math.nan, "noise": noise,
                     "verdict": verdict_of(ratio, noise, threshold, judged),
                     "base_rounds": len(samples_a[i]), "new_rounds": len(samples_b[j])})
        pairs.append((i, j))
    # intervals, rows of equal sample sizes at once
    by_size = {}
    for n, (i, j) in enumerate(pairs):
        if rows[n]["base_rounds"] and rows[n]["new_rounds"] and math.isfinite(rows[n]["ratio"]) \
                and not (math.isnan(mid_a[i]) or math.isnan(mid_b[j])):
            by_size.setdefault((rows[n]["base_rounds"], rows[n]["new_rounds"]), []).append(n)
    for idx in by_size.values():
        lo, hi = _intervals(np.stack([samples_a[pairs[n][0]] for n in idx]),
                            np.stack([samples_b[pairs[n][1]] for n in idx]))
        for n, x, y in zip(idx, lo, hi):
            rows[n]["ratio_lo"], rows[n]["ratio_hi"] = float(x), float(y)
    summary = {"table": group, "axes": list(axes), "configurations": len(rows),
               "only_base": sum(1 for k in ia if k not in ib),
               "only_new": sum(1 for k in ib if k not in ia),
               "repeat_noise_base": med_a, "repeat_noise_new": med_b}
    for v in ("slower", "faster", "same", "noisy", "-"):
        summary[v] = sum(1 for r in rows if r["verdict"] == v)
    ratios = [r["ratio"] for r in rows if r["ratio"] > 0 and math.isfinite(r["ratio"])]
    summary["geomean_ratio"] = math.exp(sum(map(math.log, ratios)) / len(ratios)) \
        if ratios else math.nan
    return rows, axes, summary


def compare(base, new, threshold=0.05, tables=None, side_by_side=False):
    """Compares two result files (paths, or what analysis.load returned); returns a DataFrame
    with one row per configuration in both files: `table`, the axes of every table compared,
    then base_us, new_us, ratio (base/new), ratio_lo, ratio_hi, noise, verdict, base_rounds,
    new_rounds. `.attrs`: base, new (path and provenance), threshold, judged,
    condition_differences, summaries (per table: counts, unmatched configurations, run-to-run
    noise, geometric-mean ratio) and not_compared.

    Raises IncomparableFiles for files of different GPUs or conditions unless side_by_side
    (then the verdict reads '-'), ResultFileError for a bad file, KeyError for a table in
    neither file."""
    base = base if hasattr(base, "provenance") else load(base)
    new = new if hasattr(new, "provenance") else load(new)
    diffs = condition_differences(base.provenance, new.provenance)
    if diffs and not side_by_side:
        raise IncomparableFiles(
            f"compare: {base.path} and {new.path} were measured under different conditions "
            f"({'; '.join(diffs)}); refusing to pool them (side_by_side=True shows them beside "
            f"each other without verdicts)")
    wanted = [t.lstrip("/") for t in tables] if tables else None
    for w in wanted or []:
        if w not in base and w not in new:
            raise KeyError(f"neither file holds /{w}")
    groups = sorted(g for g in set(base) | set(new)
                    if (base.get(g) if g in base else new[g]).attrs["kind"] == "table")
    rows, axes, summaries, not_compared = [], [], [], []
    stats_a, stats_b = _stats_cache(base), _stats_cache(new)
    for g in groups:
        if wanted is not None and g not in wanted:
            continue
        if g not in base or g not in new:
            not_compared.append(f"/{g}: only in {'base' if g in base else 'new'}")
            continue
        if "median_us" not in base[g] or base[g]["median_us"].dtype.kind != "f":
            not_compared.append(f"/{g}: no timing column (median_us)")
            continue
        r, a, s = _compare_table(base, new, g, threshold, not diffs, stats_a, stats_b)
        rows += r
        axes += [x for x in a if x not in axes]
        summaries.append(s)
    df = pd.DataFrame(rows, columns=["table", *axes, *METRICS])
    df.attrs = {"base": {"file": base.path, "provenance": dict(base.provenance)},
                "new": {"file": new.path, "provenance": dict(new.provenance)},
                "threshold": threshold, "judged": not diffs, "condition_differences": diffs,
                "summaries": summaries, "not_compared": not_compared}
    return df


VERDICT_STYLE = {"slower": dict(marker="v", color="tab:red"),
                 "faster": dict(marker="^", color="tab:blue"),
                 "same": dict(marker="o", color="0.55"),
                 "noisy": dict(marker="x", color="tab:orange"),
                 "-": dict(marker=".", color="0.3")}


def compare_figure(df, max_points=4000):
    """Ratio (base/new, log scale) with its interval per configuration, one panel per table,
    configurations sorted by ratio; markers by verdict, the threshold band shaded. Returns a
    matplotlib Figure (no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    groups = list(dict.fromkeys(df["table"].tolist())) or ["(nothing compared)"]
    fig = Figure(figsize=(9, 2.4 * len(groups) + 0.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(groups), 1, squeeze=False)[:, 0]
    t = df.attrs.get("threshold", 0.05)
    for ax, g in zip(axes, groups):
        d = df[df["table"] == g].sort_values("ratio").reset_index(drop=True)
        if len(d) > max_points:  # keep the extremes, thin the middle
            keep = np.unique(np.r_[np.arange(200), np.linspace(0, len(d) - 1, max_points)
                                   .astype(int), np.arange(len(d) - 200, len(d))])
            d = d.iloc[keep]
        x = np.arange(len(d))
        ax.axhspan(1 / (1 + t), 1 + t, color="0.92", zorder=0,
                   label=f"same (within {100 * t:g}%)")
        ax.axhline(1.0, color="black", linewidth=0.8)
        for verdict, style in VERDICT_STYLE.items():
            m = (d["verdict"] == verdict).to_numpy()
            if not m.any():
                continue
            lo = (d["ratio"] - d["ratio_lo"]).to_numpy()[m]
            hi = (d["ratio_hi"] - d["ratio"]).to_numpy()[m]
            ax.errorbar(x[m], d["ratio"].to_numpy()[m],
                        yerr=np.nan_to_num(np.vstack([lo, hi])), linestyle="none",
                        markersize=3, elinewidth=0.5, label=f"{verdict} ({int(m.sum())})",
                        **style)
        ax.set_yscale("log")
        ax.set_ylabel("base / new time")
        ax.set_xlabel("configurations, sorted by ratio (> 1: new is faster)")
        ax.set_title(f"/{g}", fontsize=9)
        ax.legend(fontsize=7, loc="upper left", ncols=3)
    a, b = df.attrs.get("base", {}), df.attrs.get("new", {})
    fig.suptitle(f"compare: {a.get('file', 'base')} -> {b.get('file', 'new')}\n"
                 f"95% bootstrap intervals", fontsize=9)
    return fig


def summary_lines(df):
    """The summary line of each table, as `moefin compare` prints them."""
    lines = []
    judged = df.attrs.get("judged", True)
    t = df.attrs.get("threshold", 0.05)
    for s in df.attrs.get("summaries", []):
        text = f"/{s['table']}: {s['configurations']} configurations in both files"
        if judged:
            text += (f": {s['slower']} slower, {s['faster']} faster, {s['same']} same, "
                     f"{s['noisy']} noisy (threshold {100 * t:g}%)")
        else:
            text += ", not judged (different conditions)"
        text += f"; geometric-mean ratio {s['geomean_ratio']:.3f}x"
        text += f"; {s['only_base']} only in base, {s['only_new']} only in new"
        lines.append(text)
    return lines


__all__ = ["IncomparableFiles", "TIMED_TABLES", "compare", "compare_figure", "summary_lines",
           "verdict_of", "condition_differences"]
