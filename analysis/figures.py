"""The report's figures (matplotlib, no pyplot state): readable in grayscale (hatching, markers
and line styles carry the series, colour only repeats them), labelled axes with units, the
architecture in every title, saved as PNG and PDF.
"""
import math
import multiprocessing
import os
import pathlib
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from .merging import shared_conditions
from .tables import (ABLATIONS, SEED_TOPK, TIME_VARIANTS, all_columns, delay_text,
                     finalize_speedups, kept_on_scalar, launch_floor, measured,
                     race_expectations, sweep_rows)

HATCHES = ("", "///", "\\\\\\", "xxx", "...", "+++", "ooo", "---", "|||", "**")
GRAYS = ("0.15", "0.55", "0.8", "0.35", "0.95", "0.65", "0.25", "0.9", "0.45", "0.7")
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")
# white face, black edge: visible on every gray of the bars
MIN_MARKER = dict(linestyle="none", marker="o", markersize=4, markerfacecolor="white",
                  markeredgecolor="black", markeredgewidth=1.0)
LINESTYLES = ("-", "--", "-.", ":", (0, (5, 1)), (0, (3, 1, 1, 1, 1, 1)))


@dataclass
class FigureInfo:
    stem: str
    title: str
    paths: list = field(default_factory=list)  # PNG then PDF
    series: list = field(default_factory=list)  # what the figure shows (column labels, ...)


def _new(width, height, layout="constrained"):
    fig = Figure(figsize=(width, height), dpi=100, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def save(fig, out_dir, stem):
    out_dir = pathlib.Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for ext, dpi in (("png", 150), ("pdf", None)):
        p = out_dir / f"{stem}.{ext}"
        fig.savefig(p, dpi=dpi, metadata=None if ext == "png" else {"CreationDate": None})
        # the first save placed the axes; laying them out again for the PDF only costs time
        fig.set_layout_engine("none")
        paths.append(p)
    return paths


def _grid(n, ncols=3):
    ncols = min(ncols, max(n, 1))
    return max(1, math.ceil(n / ncols)), ncols


REGIME_CTAS = 1184  # data/README.md, /finalize_sweep `in_regime`: ceil(H/256) * T < 1184


def in_regime(H, T):
    return math.ceil(H / 256) * T < REGIME_CTAS


def heatmap_figure(result):
    """small_batch vs scalar per hidden size x tokens, one panel per top-K (mode a, l2 hot)."""
    t = sweep_rows(result)
    sel = t.where(variant="small_batch", mode="a", l2="hot")
    ks = [int(k) for k in sel.unique("K")]
    hs, ts = [int(h) for h in sel.unique("H")], [int(x) for x in sel.unique("T")]
    nrows, ncols = _grid(len(ks))
    width, height = 2.8 + 0.45 * len(ts) * ncols, 1.0 + (0.9 + 0.3 * len(hs)) * nrows
    # fixed margins (inches): a constrained layout of many labelled cells costs seconds
    fig = _new(width, height, layout=None)
    left, right, bottom, top, gap_w, gap_h = 0.75, 1.1, 0.45, 0.85, 0.95, 0.7
    axis_w = (width - left - right - gap_w * (ncols - 1)) / ncols
    axis_h = (height - bottom - top - gap_h * (nrows - 1)) / nrows
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height, wspace=gap_w / axis_w, hspace=gap_h / axis_h)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    grid_all = {}
    for k in ks:
        grid = np.full((len(hs), len(ts)), np.nan)
        regime = np.zeros_like(grid, dtype=bool)
        sk = sel.where(K=k)
        for i, h in enumerate(hs):
            for j, x in enumerate(ts):
                m = sk.mask(H=h, T=x)
                if np.any(m):
                    grid[i, j] = float(np.median(sk["speedup_vs_scalar"][m]))
                    regime[i, j] = bool(np.all(sk["in_regime"][m] == 1))
        grid_all[k] = (grid, regime)
    finite = [g[r] for g, r in grid_all.values() if np.any(r)]
    lo = min(float(np.min(v)) for v in finite) if finite else 0.5
    hi = max(float(np.max(v)) for v in finite) if finite else 1.5
    lo, hi = min(lo, 1.0), max(hi, 1.0 + 1e-6)
    image = None
    for n, k in enumerate(ks):
        ax = axes[n // ncols][n % ncols]
        grid, regime = grid_all[k]
        shown = np.where(regime, grid, np.nan)
        image = ax.imshow(shown, cmap="Greys", vmin=lo, vmax=hi, aspect="auto", zorder=1,
                          interpolation="nearest")
        for i in range(len(hs)):
            for j in range(len(ts)):
                if not regime[i, j]:
                    # measured outside the regime, or not measured where the regime ends;
                    # a blank cell inside the regime was not measured
                    if not np.isnan(grid[i, j]) or not in_regime(hs[i], ts[j]):
                        ax.add_patch(Rectangle((j - .5, i - .5), 1, 1, fill=False,
                                               hatch="xx", edgecolor="0.6", linewidth=0))
                    continue
                v = grid[i, j]
                dark = (v - lo) / (hi - lo) > 0.55
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if dark else "black")
        ax.set_xticks(range(len(ts)), [str(x) for x in ts], fontsize=7)
        ax.set_yticks(range(len(hs)), [str(h) for h in hs], fontsize=7)
        kept = " (kept on scalar)" if kept_on_scalar(t, k) else ""
        ax.set_title(f"top-K {k}{kept}", fontsize=8)
        ax.set_xlabel("tokens T", fontsize=7)
        ax.set_ylabel("hidden size H (elements)", fontsize=7)
    for n in range(len(ks), nrows * ncols):
        axes[n // ncols][n % ncols].set_visible(False)
    if image is not None:
        bar = fig.add_axes((1 - 0.85 / width, 0.15, 0.15 / width, 0.7))
        fig.colorbar(image, cax=bar).set_label("speedup vs scalar (x)")
    fig.suptitle(f"{result.column.label}: small_batch vs scalar finalize, mode a, L2 hot\n"
                 f"(median over bf16/fp32 weights; hatched: outside the small-batch regime "
                 f"ceil(H/256) x T < {REGIME_CTAS}; blank: inside it, not measured)", fontsize=9)
    return fig, ks


def bars_figure(results, pub):
    """Median speedup per top-K for every architecture, minimum marked (published beside
    measured)."""
    sweeps = {r.column.key: t for r, t in measured(results)}
    cols = [c for c in all_columns(results, pub) if c.published or c.key in sweeps]
    ks = sorted(set(SEED_TOPK) | {int(k) for t in sweeps.values() for k in t.unique("K")})
    values = {}
    for c in cols:
        for k in ks:
            if c.published:
                if (k, c.key) in pub.finalize:
                    values[(c.key, k)] = pub.finalize[(k, c.key)]
            else:
                v = finalize_speedups(sweeps[c.key], k)
                if len(v):
                    values[(c.key, k)] = (float(np.median(v)), float(np.min(v)))
    fig = _new(max(6.0, 0.25 * len(ks) * max(len(cols), 1) + 2), 3.6)
    ax = fig.subplots()
    width = 0.8 / max(len(cols), 1)
    for n, c in enumerate(cols):
        xs, meds, lows = [], [], []
        for i, k in enumerate(ks):
            if (c.key, k) in values:
                xs.append(i - 0.4 + width * (n + 0.5))
                meds.append(values[(c.key, k)][0])
                lows.append(values[(c.key, k)][1])
        label = c.label + (" published" if c.published else " measured")
        ax.bar(xs, meds, width, color=GRAYS[n % len(GRAYS)], edgecolor="black", linewidth=0.6,
               hatch=HATCHES[n % len(HATCHES)], label=label)
        ax.plot(xs, lows, **MIN_MARKER)
    ax.plot([], [], label="minimum", **MIN_MARKER)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(ks)), [str(k) for k in ks])
    ax.set_xlabel("top-K")
    ax.set_ylabel("speedup vs scalar (x)")
    ax.legend(fontsize=7, ncols=2)
    ax.set_title("Finalize only, small_batch vs scalar, median per top-K: "
                 + ", ".join(c.label for c in cols), fontsize=8)
    return fig, [c.label for c in cols]


def time_figure(result, H, mode="a", l2="hot"):
    """Per-launch time vs tokens, one line per variant, one panel per top-K, floor drawn."""
    t = sweep_rows(result).where(H=H, mode=mode, l2=l2)
    ks = [int(k) for k in t.unique("K")]
    variants = [v for v in TIME_VARIANTS + tuple(a for _, a in ABLATIONS)
                if np.any(t.mask(variant=v))]
    floor = launch_floor(result, mode)
    nrows, ncols = _grid(len(ks))
    fig = _new(3.0 * ncols, 0.8 + 2.3 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for n, k in enumerate(ks):
        ax = axes[n // ncols][n % ncols]
        for i, v in enumerate(variants):
            s = t.where(K=k, variant=v)
            ts = sorted(set(s["T"].tolist()))
            ys = [float(np.median(s["median_us"][s.mask(T=x)])) for x in ts]
            ax.plot(ts, ys, marker=MARKERS[i % len(MARKERS)], markersize=4,
                    linestyle=LINESTYLES[i % len(LINESTYLES)], color=str(0.7 * i / max(
                        len(variants) - 1, 1)), linewidth=1, label=v)
        if floor is not None:
            ax.axhline(floor, color="black", linewidth=1.2, linestyle=(0, (1, 1)),
                       label=f"launch floor ({floor:.2f} us)")
        ax.set_xscale("log", base=2)
        ax.set_title(f"top-K {k}", fontsize=8)
        ax.set_xlabel("tokens T", fontsize=7)
        ax.set_ylabel("per-launch time (us)", fontsize=7)
        ax.set_ylim(bottom=0)
        ax.tick_params(labelsize=7)
    for n in range(len(ks), nrows * ncols):
        axes[n // ncols][n % ncols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=7)
    fig.suptitle(f"{result.column.label}: finalize per-launch time vs tokens, H={H}, mode {mode}, "
                 f"L2 {l2} (median over bf16/fp32 weights)", fontsize=9)
    return fig, variants


ABBREV = {"entry": "en", "after_wait": "aw", "after_writes": "ar", "exit": "ex"}


def _trigger_label(triggers):
    """'permute=entry,gemm1=exit,...' -> 'p=en g1=ex a=en g2=ex', the abbreviations of the
    race-matrix keys."""
    short = {"permute": "p", "gemm1": "g1", "act": "a", "activation": "a", "gemm2": "g2"}
    out = []
    for item in triggers.split(","):
        name, _, where = item.partition("=")
        out.append(f"{short.get(name, name)}={ABBREV.get(where, where)}")
    return " ".join(out)


def _panel_label(condition):
    return condition if condition else "all files"


def race_figure(result, preset):
    """The race matrix of one preset, one panel per condition (e.g. carveout) side by side:
    rows are the trigger placements in the order measured, columns finalize's metadata
    placement x injected delay; gray = share of iterations with a mismatch, a hatched and boxed
    cell = the expected verdict is race (data/README.md; verifier column, else the DESIGN.md
    section 3 rule)."""
    t = result.table("race_matrix").where(preset=preset)
    expected, _, source = race_expectations(t)
    order = {c: n for n, c in enumerate(result.conditions.get("race_matrix", [""]))}
    conditions = sorted(set(t["condition"].tolist()), key=lambda c: order.get(c, len(order)))
    rows = list(dict.fromkeys(t["triggers"].tolist()))
    stale = t["stale_iterations"] if "stale_iterations" in t else t["stale_reads"]
    panels = []
    for cond in conditions:
        m = t["condition"] == cond
        cols = sorted({(meta, int(d), k) for meta, d, k in zip(
            t["meta"][m].tolist(), t["delay_ns"][m].tolist(), t["delayed_kernel"][m].tolist())},
            key=lambda c: (c[0] != "before", c[1], c[2]))
        panels.append((cond, np.flatnonzero(m), cols))
    width = sum(0.8 * len(cols) + 0.3 for _, _, cols in panels)
    fig = _new(2.2 + width + 1.0, 2.1 + 0.3 * len(rows))
    axes = fig.subplots(1, len(panels), squeeze=False, sharey=True,
                        gridspec_kw={"width_ratios": [len(c) for _, _, c in panels]})[0]
    image = None
    for ax, (cond, idx, cols) in zip(axes, panels):
        rate = np.full((len(rows), len(cols)), np.nan)
        cell = {}
        for i in idx:
            r_, c_ = rows.index(t["triggers"][i]), cols.index(
                (t["meta"][i], int(t["delay_ns"][i]), t["delayed_kernel"][i]))
            its = int(t["iterations"][i])
            rate[r_, c_] = t["mismatches"][i] / its if its else np.nan
            cell[i] = (r_, c_, its)
        image = ax.imshow(rate, cmap="Greys", vmin=0, vmax=1, aspect="auto",
                          interpolation="nearest")
        for i, (r_, c_, its) in cell.items():
            race = expected[i] == "race"
            if race:
                ax.add_patch(Rectangle((c_ - .5, r_ - .5), 1, 1, fill=False, hatch="///",
                                       edgecolor="0.55", linewidth=0))
                ax.add_patch(Rectangle((c_ - .46, r_ - .42), 0.92, 0.84, fill=False,
                                       edgecolor="black", linewidth=1.2))
            dark = not np.isnan(rate[r_, c_]) and rate[r_, c_] > 0.55
            ax.text(c_, r_, f"{int(t['mismatches'][i])}/{its} s{int(stale[i])}", ha="center",
                    va="center", fontsize=6, color="white" if dark else "black",
                    fontweight="bold" if race else "normal",
                    bbox=None if dark or not race else dict(facecolor="white", pad=0.6,
                                                            edgecolor="none"))
        ax.set_xticks(range(len(cols)), [f"meta {m}\n{_delay_label(d, k)}" for m, d, k in cols],
                      fontsize=6)
        ax.set_yticks(range(len(rows)), [_trigger_label(x) for x in rows], fontsize=6)
        ax.set_title(_panel_label(cond), fontsize=8)
        ax.set_xlabel("finalize metadata read, injected delay", fontsize=7)
    axes[0].set_ylabel("trigger placements of permute (p), gemm1 (g1), act (a), gemm2 (g2)",
                       fontsize=7)
    fig.colorbar(image, ax=list(axes)).set_label("mismatching iterations / iterations")
    verdict = "verifier" if "rule" not in source else "DESIGN.md section 3 rule"
    fig.legend(handles=[Patch(facecolor="white", edgecolor="black", hatch="///",
                              label=f"expected race ({verdict})"),
                        Patch(facecolor="white", edgecolor="0.7", label="expected ordered")],
               fontsize=7, loc="outside lower center", ncols=2,
               title="cell: mismatching/iterations, s = iterations with a stale pre-wait read; "
                     "en entry, aw after_wait, ar after_writes, ex exit", title_fontsize=7)
    shape = "/".join(sorted(set(t["shape"].tolist()))) if "shape" in t else ""
    tokens = ",".join(str(x) for x in sorted(set(t["T"].tolist()))) if "T" in t else ""
    where = f" {shape} T={tokens}" if shape else ""
    fig.suptitle(f"{result.column.label}: race matrix, preset {preset},{where}\n"
                 f"{_common_condition(result, 'race_matrix')}", fontsize=9)
    return fig, [_panel_label(c) for c in conditions]


def _delay_label(delay, kernel):
    text = delay_text(delay, kernel)
    return "no delay" if text == "none" else text


def _common_condition(result, group):
    shared = shared_conditions(result, group)
    return "every file: " + ", ".join(shared) if shared else ""


def timeline_groups(result):
    """Timelines of one configuration measured under several conditions go into one figure:
    [(the timelines' `key` attribute or the group name, [(file path, Timeline), ...])], in
    file order."""
    groups = {}
    for path, tl in result.timelines:
        if len(tl):
            # without a configuration key a timeline stands alone, named by its group
            key = tl.attrs.get("key") or (path, tl.group)
            groups.setdefault(key, []).append((path, tl))
    return [(k if isinstance(k, str) else k[1], v) for k, v in groups.items()]


def _gantt(ax, timeline, t0, max_ctas, xlim=None):
    """One panel: per kernel its first `max_ctas` CTAs (by index), each a bar from start to
    exit, hatched before the wait returned, with the CTA's start, wait return, trigger and exit
    marked; behind them the span of all the kernel's CTAs. Returns the y ticks (pos, label).
    Bars and markers are drawn a few calls per panel: artists per CTA made rendering slow."""
    s = timeline.stamps
    y, ticks = 0, []
    pre, post, marks = [], [], {m: ([], []) for m in GANTT_MARKS}  # (y, left, width[, fill])
    for n, k in enumerate(sorted(set(s["kernel"].tolist()))):
        every = np.flatnonzero(s["kernel"] == k)
        idx = every[np.argsort(s["cta"][every], kind="stable")][:max_ctas]
        idx = idx[s["start_ns"][idx] >= 0]
        if not len(idx):
            continue
        starts, ends = s["start_ns"][every], s["end_ns"][every]
        ok = starts >= 0
        lo, hi = starts[ok].min(), max(ends[ok].max(), starts[ok].max())
        ax.add_patch(Rectangle(((lo - t0) / 1e3, y - 0.5), (hi - lo) / 1e3, len(idx),
                               facecolor="0.9", edgecolor="none", zorder=0))
        rows = y + np.arange(len(idx))
        start, wait, trig, end = ((s[f][idx] - t0) / 1e3 for f in
                                  ("start_ns", "wait_ns", "trigger_ns", "end_ns"))
        has = {f: s[f][idx] >= 0 for f in ("wait_ns", "trigger_ns", "end_ns")}
        stop = np.where(has["end_ns"], end, start)
        split = np.where(has["wait_ns"] & (wait >= start) & (wait <= stop), wait, start)
        pre.append((rows, start, split - start))
        post.append((rows, split, stop - split, GANTT_FILLS[n % len(GANTT_FILLS)]))
        for m, x, show in (("start", start, np.ones(len(idx), bool)),
                           ("exit", end, has["end_ns"]), ("wait", wait, has["wait_ns"]),
                           ("trigger", trig, has["trigger_ns"])):
            marks[m][0].extend(x[show])
            marks[m][1].extend(rows[show])
        label = timeline.kernels[k]
        ticks.append(((2 * y + len(idx) - 1) / 2,
                      f"{label} ({len(idx)} of {len(every)} CTAs)" if len(every) > len(idx)
                      else f"{label} ({len(every)} CTAs)"))
        y += len(idx) + 0.6
    if pre:
        rows, left, width = (np.concatenate(v) for v in zip(*pre))
        some = width > 0
        ax.barh(rows[some], width[some], left=left[some], height=0.7, color="white",
                edgecolor="black", linewidth=0.4, hatch="////", zorder=2)
        for rows, left, width, fill in post:
            ax.barh(rows, width, left=left, height=0.7, color=fill, edgecolor="black",
                    linewidth=0.4, zorder=2)
    for z, m in enumerate(("start", "exit", "wait", "trigger")):  # the trigger on top
        ax.plot(*marks[m], zorder=4 + z, **GANTT_MARKS[m])
    if xlim is not None:
        ax.set_xlim(*xlim)
    ax.set_ylim(y - 0.1, -0.9)
    return ticks


# light enough for the black markers on top of them
GANTT_FILLS = ("0.5", "0.75", "0.6", "0.85", "0.55", "0.7")
GANTT_MARKS = {
    "start": dict(marker=">", markersize=4, color="black", linestyle="none"),
    "wait": dict(marker="D", markersize=4, markerfacecolor="white", markeredgecolor="black",
                 markeredgewidth=0.8, linestyle="none"),
    "trigger": dict(marker="*", markersize=8, markerfacecolor="black", markeredgecolor="white",
                    markeredgewidth=0.5, linestyle="none"),
    "exit": dict(marker="|", markersize=7, markeredgewidth=1.5, color="black",
                 linestyle="none"),
}


def timeline_figure(result, entries, max_ctas=4):
    """Per-CTA Gantt of one configuration: a row of panels per condition (file), the launch
    phase (until the first kernel completed) beside the whole run; `entries` is one item of
    timeline_groups() or a single (path, Timeline)."""
    key, entries = entries if isinstance(entries[1], list) else (entries[1].group, [entries])
    starts = []
    for _, tl in entries:
        v = tl.stamps["start_ns"]
        starts.append(int(v[v >= 0].min()) if np.any(v >= 0) else 0)
    spans, firsts = [], []
    for (_, tl), t0 in zip(entries, starts):
        s = tl.stamps
        spans.append((max(s["end_ns"].max(), s["start_ns"].max()) - t0) / 1e3)
        first = s["kernel"] == s["kernel"].min()
        firsts.append((s["end_ns"][first].max() - t0) / 1e3)
    full = max(spans)
    zoom = 1.25 * max(firsts)
    zoomed = 0 < zoom < 0.5 * full
    nrows = len(entries)
    per_panel = 0.55 + 0.16 * sum(min(max_ctas, int(np.sum(tl.stamps["kernel"] == k))) + 0.6
                                  for k in set(entries[0][1].stamps["kernel"].tolist())
                                  for tl in [entries[0][1]])
    fig = _new(10.0 if zoomed else 7.5, 1.5 + per_panel * nrows)
    axes = fig.subplots(nrows, 2 if zoomed else 1, squeeze=False,
                        gridspec_kw={"width_ratios": [1, 1.4]} if zoomed else None)
    for row, ((path, tl), t0) in enumerate(zip(entries, starts)):
        cond = result.condition_of.get(("timelines", path), "")
        name = f"{pathlib.Path(path).stem} /{tl.group}"
        first_name = tl.kernels[int(tl.stamps["kernel"].min())]
        prefix = f"{cond}: first" if cond else "first"
        views = ([(0, (-0.02 * zoom, zoom), f"{prefix} {zoom:.0f} us ({first_name} running)")]
                 if zoomed else [])
        views.append((len(axes[row]) - 1, (-0.01 * full, 1.01 * full), f"{name}: whole run"))
        for col, xlim, what in views:
            ax = axes[row][col]
            ticks = _gantt(ax, tl, t0, max_ctas, xlim)
            first = tl.stamps["kernel"] == tl.stamps["kernel"].min()
            done = (tl.stamps["end_ns"][first].max() - t0) / 1e3
            ax.axvline(done, color="black", linewidth=0.8, linestyle=(0, (4, 2)), zorder=1)
            ax.set_yticks([p for p, _ in ticks], [lab for _, lab in ticks] if col == 0 else
                          [""] * len(ticks), fontsize=6)
            ax.set_title(what, fontsize=7)
            ax.tick_params(axis="x", labelsize=7)
            if row == nrows - 1:
                ax.set_xlabel("time since the first CTA started (us)", fontsize=7)
    handles = [ax.plot([], [], label=lab, **GANTT_MARKS[m])[0] for m, lab in
               (("start", "CTA start (launch)"), ("wait", "wait returned"),
                ("trigger", "trigger"), ("exit", "CTA exit"))]
    handles += [Patch(facecolor="white", edgecolor="black", hatch="////",
                      label="before the wait returned"),
                Patch(facecolor=GANTT_FILLS[0], edgecolor="black", label="after the wait"),
                Patch(facecolor="0.9", label="span of all the kernel's CTAs"),
                ax.plot([], [], color="black", linewidth=0.8, linestyle=(0, (4, 2)),
                        label="first kernel completed")[0]]
    fig.legend(handles=handles, fontsize=6, loc="outside lower center", ncols=4)
    tl0 = entries[0][1]
    source = tl0.attrs.get("source", "")
    common = _common_condition(result, "timelines")
    fig.suptitle(f"{result.column.label}: per-CTA timeline" + (f" ({source})" if source else "")
                 + (f"\n{key}" if key != tl0.group else f" /{key}")
                 + (f"\n{common}" if common else ""), fontsize=8)
    return fig, [tl0.kernels[k] for k in sorted(set(tl0.stamps["kernel"].tolist()))]


def figure_jobs(results, pub):
    """Every figure the inputs support: (stem, title, function, arguments), in report order."""
    jobs = [("finalize_speedup_bars",
             "Finalize-only median speedup per top-K, every architecture (minimum marked)",
             bars_figure, (results, pub))]
    for r in results:
        slug = r.column.slug
        sweep = sweep_rows(r)
        if sweep is not None and np.any(sweep.mask(variant="small_batch", mode="a", l2="hot")):
            jobs.append((f"finalize_heatmap_{slug}", f"{r.column.label}: speedup per hidden "
                         f"size x tokens, one panel per top-K", heatmap_figure, (r,)))
        hs = sweep.where(mode="a", l2="hot").unique("H") if sweep is not None else []
        if hs:
            # one hidden size keeps the report short: the middle one of the sweep (the tables
            # cover all; time_figure(result, H) draws any other)
            H = int(hs[len(hs) // 2])
            jobs.append((f"finalize_time_{slug}_H{H}",
                         f"{r.column.label}: per-launch time vs tokens, H={H}", time_figure,
                         (r, H)))
        race = r.table("race_matrix")
        if race is not None and len(race):
            for preset in race.unique("preset"):
                jobs.append((f"race_matrix_{slug}_{_safe(preset)}",
                             f"{r.column.label}: race matrix, preset {preset}", race_figure,
                             (r, preset)))
        for n, (key, entries) in enumerate(timeline_groups(r)):
            conditions = [r.condition_of.get(("timelines", p), "") for p, _ in entries]
            jobs.append((f"timeline_{slug}_{n}_{_safe(key)}",
                         f"{r.column.label}: per-CTA timeline {key}"
                         + (f" ({'; '.join(c for c in conditions if c)})" if any(conditions)
                            else ""), timeline_figure, (r, (key, entries))))
    return jobs


_JOBS = []  # the jobs of the running build_figures, inherited by forked workers


def _render(i, out_dir):
    stem, title, function, args = _JOBS[i]
    fig, series = function(*args)
    return FigureInfo(stem, title, save(fig, out_dir, stem), list(series))


def _workers(jobs):
    """MOEFIN_REPORT_JOBS, else one per CPU (at most 4); 1 where fork is not available."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    want = os.environ.get("MOEFIN_REPORT_JOBS", "")
    n = int(want) if want.isdigit() and int(want) > 0 else min(4, os.cpu_count() or 1)
    return max(1, min(n, jobs))


def build_figures(results, pub, out_dir):
    """Renders every figure the inputs support into out_dir; returns FigureInfo per figure.

    Rendering is what a report spends its time on, so figures are drawn in forked worker
    processes (they inherit the results; only the small FigureInfo comes back)."""
    global _JOBS
    _JOBS = figure_jobs(results, pub)
    try:
        workers = _workers(len(_JOBS))
        if workers == 1:
            return [_render(i, out_dir) for i in range(len(_JOBS))]
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as ex:
            return list(ex.map(_render, range(len(_JOBS)), [out_dir] * len(_JOBS)))
    finally:
        _JOBS = []


def _safe(text):
    return "".join(ch if ch.isalnum() else "_" for ch in str(text)).strip("_")
