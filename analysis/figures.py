"""The report's figures (matplotlib, no pyplot state): readable in grayscale (hatching, markers
and line styles carry the series, colour only repeats them), labelled axes with units, the
architecture in every title, saved as PNG and PDF.
"""
import math
import pathlib
from dataclasses import dataclass, field

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from .tables import (ABLATIONS, SEED_TOPK, TIME_VARIANTS, all_columns, finalize_speedups,
                     kept_on_scalar, launch_floor, measured, sweep_rows)

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


def _new(width, height):
    fig = Figure(figsize=(width, height), dpi=100, layout="constrained")
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


def heatmap_figure(result):
    """small_batch vs scalar per hidden size x tokens, one panel per top-K (mode a, l2 hot)."""
    t = sweep_rows(result)
    sel = t.where(variant="small_batch", mode="a", l2="hot")
    ks = [int(k) for k in sel.unique("K")]
    hs, ts = [int(h) for h in sel.unique("H")], [int(x) for x in sel.unique("T")]
    nrows, ncols = _grid(len(ks))
    fig = _new(2.0 + 0.45 * len(ts) * ncols, 0.6 + (0.9 + 0.3 * len(hs)) * nrows)
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
        image = ax.imshow(shown, cmap="Greys", vmin=lo, vmax=hi, aspect="auto",
                          interpolation="nearest")
        for i in range(len(hs)):
            for j in range(len(ts)):
                if not regime[i, j]:
                    ax.add_patch(Rectangle((j - .5, i - .5), 1, 1, fill=False, hatch="xx",
                                           edgecolor="0.6", linewidth=0))
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
        fig.colorbar(image, ax=axes, shrink=0.8).set_label("speedup vs scalar (x)")
    fig.suptitle(f"{result.column.label}: small_batch vs scalar finalize, mode a, L2 hot\n"
                 f"(median over bf16/fp32 weights; hatched: outside the small-batch regime)", fontsize=9)
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


def race_figure(result, preset):
    """The race matrix of one preset: mismatch rate per cell, verifier verdict marked."""
    t = result.table("race_matrix").where(preset=preset)
    rows = sorted({(a, b) for a, b in zip(t["triggers"].tolist(), t["meta"].tolist())})
    cols = sorted({(a, b) for a, b in zip(t["delayed_kernel"].tolist(),
                                           t["delay_ns"].tolist())}, key=lambda x: (x[0], x[1]))
    rate = np.full((len(rows), len(cols)), np.nan)
    verdict = {}
    for i, (trig, meta) in enumerate(rows):
        for j, (kern, delay) in enumerate(cols):
            m = t.mask(triggers=trig, meta=meta, delayed_kernel=kern, delay_ns=delay)
            if np.any(m):
                it = int(t["iterations"][m].sum())
                rate[i, j] = t["mismatches"][m].sum() / it if it else np.nan
                verdict[(i, j)] = "race" if np.any(t["verifier"][m] == "race") else "ordered"
    ylabels = [f"{a} | meta {b}" for a, b in rows]
    fig = _new(3.2 + 1.1 * len(cols) + 0.055 * max(map(len, ylabels), default=10),
               2.2 + 0.38 * len(rows))
    ax = fig.subplots()
    image = ax.imshow(rate, cmap="Greys", vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    for (i, j), v in verdict.items():
        if v == "race":
            ax.add_patch(Rectangle((j - .5, i - .5), 1, 1, fill=False, hatch="//",
                                   edgecolor="0.5", linewidth=0))
        r = rate[i, j]
        text = ("R " if v == "race" else "o ") + ("-" if np.isnan(r) else f"{r:.2f}")
        ax.text(j, i, text, ha="center", va="center", fontsize=7,
                color="white" if (not np.isnan(r) and r > 0.55) else "black",
                bbox=dict(boxstyle="round,pad=0.15", facecolor="none", edgecolor="black",
                          linewidth=1.0) if v == "race" else None)
    ax.set_xticks(range(len(cols)), [f"{k}\n{d} ns" for k, d in cols], fontsize=7)
    ax.set_yticks(range(len(rows)), ylabels, fontsize=6)
    ax.set_xlabel("delayed kernel, injected delay (ns)")
    ax.set_ylabel("trigger placements | finalize metadata read")
    fig.colorbar(image, ax=ax).set_label("mismatch rate (mismatching / iterations)")
    fig.legend(handles=[Patch(facecolor="white", edgecolor="0.5", hatch="//",
                              label="R (boxed): the verifier says race"),
                        Patch(facecolor="white", edgecolor="black",
                              label="o: the verifier says ordered")],
               fontsize=7, loc="outside lower center", ncols=2)
    fig.suptitle(f"{result.column.label}: race matrix, preset {preset}", fontsize=9)
    return fig, [f"{a} | {b}" for a, b in rows]


def timeline_figure(result, timeline, max_ctas=16):
    """Per-CTA Gantt of one timeline: bar from start to exit, wait return and trigger marked,
    each kernel's launch (its first CTA start) drawn as a line."""
    s = timeline.stamps
    valid = s["start_ns"] >= 0
    t0 = int(s["start_ns"][valid].min()) if np.any(valid) else 0
    kernels = sorted(set(s["kernel"].tolist()))
    fig = _new(8.0, 1.6 + 0.1 * min(len(timeline), max_ctas * len(kernels)) + 0.25 * len(kernels))
    ax = fig.subplots()
    y, ticks, tick_labels, shown_total = 0, [], [], 0
    for n, k in enumerate(kernels):
        idx = np.flatnonzero(s["kernel"] == k)
        idx = idx[np.argsort(s["cta"][idx], kind="stable")][:max_ctas]
        shown_total += len(idx)
        name = timeline.kernels[k]
        top = y
        for i in idx:
            start, end = s["start_ns"][i], s["end_ns"][i]
            if start < 0:
                continue
            stop = end if end >= 0 else start
            ax.barh(y, (stop - start) / 1e3, left=(start - t0) / 1e3, height=0.8,
                    color=GRAYS[n % len(GRAYS)], edgecolor="black", linewidth=0.3,
                    hatch=HATCHES[n % len(HATCHES)])
            for field, marker, size in (("wait_ns", "D", 4), ("trigger_ns", "*", 8)):
                if s[field][i] >= 0:
                    ax.plot((s[field][i] - t0) / 1e3, y, marker=marker, markersize=size,
                            markerfacecolor="white", markeredgecolor="black",
                            markeredgewidth=0.8, linestyle="none")
            y += 1
        if y > top:
            launch = (s["start_ns"][idx][s["start_ns"][idx] >= 0].min() - t0) / 1e3
            ax.plot([launch, launch], [top - 0.5, y - 0.5], color="black", linewidth=1.5)
            ticks.append((top + y - 1) / 2)
            count = int(np.sum(s["kernel"] == k))
            tick_labels.append(f"{name} ({len(idx)}/{count} CTAs)" if count > len(idx)
                               else f"{name} ({count} CTAs)")
        y += 0.5
    ax.set_yticks(ticks, tick_labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("time since the first CTA started (us)")
    ax.set_ylabel("kernel, one row per CTA")
    marks = dict(linestyle="none", markerfacecolor="white", markeredgecolor="black",
                 markeredgewidth=0.8)
    fig.legend(handles=[ax.plot([], [], color="black", linewidth=1.5,
                                label="kernel launch (first CTA start)")[0],
                        ax.plot([], [], marker="D", markersize=4, label="wait returned",
                                **marks)[0],
                        ax.plot([], [], marker="*", markersize=8, label="trigger", **marks)[0],
                        Patch(facecolor="0.8", edgecolor="black", label="CTA start to exit")],
               fontsize=7, loc="outside lower center", ncols=4)
    source = timeline.attrs.get("source", "")
    fig.suptitle(f"{result.column.label}: per-CTA timeline /{timeline.group}"
                 + (f" ({source})" if source else ""), fontsize=9)
    return fig, [timeline.kernels[k] for k in kernels]


def build_figures(results, pub, out_dir):
    """Renders every figure the inputs support into out_dir; returns FigureInfo per figure."""
    infos = []

    def emit(made, stem, title):
        fig, series = made
        infos.append(FigureInfo(stem, title, save(fig, out_dir, stem), list(series)))

    emit(bars_figure(results, pub), "finalize_speedup_bars",
         "Finalize-only median speedup per top-K, every architecture (minimum marked)")
    for r in results:
        slug = r.column.slug
        sweep = sweep_rows(r)
        if sweep is not None and np.any(sweep.mask(variant="small_batch", mode="a", l2="hot")):
            emit(heatmap_figure(r), f"finalize_heatmap_{slug}",
                 f"{r.column.label}: speedup per hidden size x tokens, one panel per top-K")
        hs = sweep.where(mode="a", l2="hot").unique("H") if sweep is not None else []
        if hs:
            # one hidden size keeps the report short: the middle one of the sweep (the tables
            # cover all; time_figure(result, H) draws any other)
            H = int(hs[len(hs) // 2])
            emit(time_figure(r, H), f"finalize_time_{slug}_H{H}",
                 f"{r.column.label}: per-launch time vs tokens, H={H}")
        race = r.table("race_matrix")
        if race is not None and len(race):
            for preset in race.unique("preset"):
                emit(race_figure(r, preset), f"race_matrix_{slug}_{_safe(preset)}",
                     f"{r.column.label}: race matrix, preset {preset}")
        for n, (_, tl) in enumerate(r.timelines):
            if len(tl):
                emit(timeline_figure(r, tl), f"timeline_{slug}_{n}_{_safe(tl.group)}",
                     f"{r.column.label}: per-CTA timeline /{tl.group}")
    return infos


def _safe(text):
    return "".join(ch if ch.isalnum() else "_" for ch in str(text)).strip("_")
