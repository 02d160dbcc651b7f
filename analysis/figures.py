"""The report's figures (matplotlib, no pyplot state): labelled axes with units, the
architecture in every title, saved as PNG and PDF. Series are told apart by hatching, markers and
line styles as well as colour, so they stay readable in grayscale; speedup heatmaps use a
diverging scale centred on 1.0 (the number in each cell and a hatch on cells below 1 carry it in
grayscale). Every finalize figure shows mode b (producer -> finalize, the kernel in a chain)
first and beside mode a (back-to-back launches, the seed's protocol); the kernel under study
(small_batch; finalize in the timelines) is drawn highlighted.

Figure files are named `NN_<name>`, NN their place in the report (zero-padded), so that they
sort in report order.
"""
import math
import multiprocessing
import os
import pathlib
import re
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from .merging import shared_conditions
from .tables import (ABLATIONS, FINALIZE_MODES, TIME_VARIANTS, delay_text, finalize_series,
                     finalize_speedups, kept_on_scalar, launch_floor, present_modes,
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
    stem: str  # the file name without suffix: NN_<name>
    title: str
    paths: list = field(default_factory=list)  # PNG then PDF
    series: list = field(default_factory=list)  # what the figure shows (column labels, ...)
    name: str = ""  # the stem without its number
    group: str = ""  # finalize, race matrices, timelines


STUDIED = "small_batch"  # the finalize kernel under study, highlighted in the time plots
STUDIED_KERNEL = "finalize"  # the kernel under study in the timelines
HIGHLIGHT = "#c0392b"  # its colour (and finalize's in the timelines)
MODE_NAMES = {"a": "mode a: back-to-back launches (the seed's protocol)",
              "b": "mode b: producer -> finalize (the kernel in a chain)",
              "c": "mode c: PDL off"}


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


# docs/reference/experiment-tables.md, /finalize_sweep `in_regime`: ceil(H/256) * T < 1184
REGIME_CTAS = 1184


def in_regime(H, T):
    return math.ceil(H / 256) * T < REGIME_CTAS


def _pair_grid(n_keys, n_modes, keys_per_row=2):
    """(rows, columns): each key's panels (one per mode) side by side, `keys_per_row` keys a
    row."""
    per_row = min(keys_per_row, max(n_keys, 1))
    return max(1, math.ceil(n_keys / per_row)), per_row * max(n_modes, 1)


def heatmap_figure(result, modes=FINALIZE_MODES):
    """small_batch vs scalar per hidden size x tokens, per top-K a panel per mode (mode b first,
    beside mode a), l2 hot; diverging colours centred on 1.0."""
    t = sweep_rows(result)
    modes = present_modes(t, modes)
    sel = t.where(variant="small_batch", l2="hot")
    sel = sel.take(np.isin(sel["mode"], modes))
    ks = [int(k) for k in sel.unique("K")]
    hs, ts = [int(h) for h in sel.unique("H")], [int(x) for x in sel.unique("T")]
    nrows, ncols = _pair_grid(len(ks), len(modes))
    width, height = 2.8 + 0.45 * len(ts) * ncols, 1.2 + (0.9 + 0.3 * len(hs)) * nrows
    # fixed margins (inches): a constrained layout of many labelled cells costs seconds
    fig = _new(width, height, layout=None)
    left, right, bottom, top, gap_w, gap_h = 0.75, 1.1, 0.45, 1.05, 0.95, 0.7
    axis_w = (width - left - right - gap_w * (ncols - 1)) / ncols
    axis_h = (height - bottom - top - gap_h * (nrows - 1)) / nrows
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height, wspace=gap_w / axis_w, hspace=gap_h / axis_h)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    grid_all = {}
    for k in ks:
        for mode in modes:
            grid = np.full((len(hs), len(ts)), np.nan)
            regime = np.zeros_like(grid, dtype=bool)
            sk = sel.where(K=k, mode=mode)
            for i, h in enumerate(hs):
                for j, x in enumerate(ts):
                    m = sk.mask(H=h, T=x)
                    if np.any(m):
                        grid[i, j] = float(np.median(sk["speedup_vs_scalar"][m]))
                        regime[i, j] = bool(np.all(sk["in_regime"][m] == 1))
            grid_all[(k, mode)] = (grid, regime)
    finite = [g[r] for g, r in grid_all.values() if np.any(r)]
    lo = min(float(np.min(v)) for v in finite) if finite else 0.5
    hi = max(float(np.max(v)) for v in finite) if finite else 1.5
    # 1.0 (as fast as scalar) is the neutral white; a factor faster and the same factor slower
    # get the same depth of colour (x and 1/x at the two ends)
    reach = max(hi, 1 / lo, 1.01)
    norm = TwoSlopeNorm(vcenter=1.0, vmin=1 / reach, vmax=reach)
    image = None
    for n, (k, mode) in enumerate((k, m) for k in ks for m in modes):
        ax = axes[n // ncols][n % ncols]
        grid, regime = grid_all[(k, mode)]
        shown = np.where(regime, grid, np.nan)
        image = ax.imshow(shown, cmap="RdBu", norm=norm, aspect="auto", zorder=1,
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
                if v < 1:  # slower than scalar: hatched, so that grayscale keeps the side
                    ax.add_patch(Rectangle((j - .5, i - .5), 1, 1, fill=False, hatch="///",
                                           edgecolor="0.35", linewidth=0, zorder=2))
                dark = abs(float(norm(v)) - 0.5) > 0.3
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7, zorder=3,
                        color="white" if dark else "black")
        ax.set_xticks(range(len(ts)), [str(x) for x in ts], fontsize=7)
        ax.set_yticks(range(len(hs)), [str(h) for h in hs], fontsize=7)
        kept = " (kept on scalar)" if kept_on_scalar(t, k, mode) else ""
        ax.set_title(f"top-K {k}, mode {mode}{kept}", fontsize=8,
                     fontweight="bold" if mode == "b" else "normal")
        ax.set_xlabel("tokens T", fontsize=7)
        ax.set_ylabel("hidden size H (elements)", fontsize=7)
    for n in range(len(ks) * len(modes), nrows * ncols):
        axes[n // ncols][n % ncols].set_visible(False)
    if image is not None:
        bar = fig.add_axes((1 - 0.85 / width, 0.15, 0.15 / width, 0.7))
        fig.colorbar(image, cax=bar).set_label("speedup vs scalar (x); 1 = as fast")
    fig.suptitle(f"{result.column.label}: small_batch vs scalar finalize, L2 hot, "
                 + "; ".join(MODE_NAMES[m] for m in modes) + "\n"
                 f"(median over bf16/fp32 weights; red/hatched: slower than scalar, blue: "
                 f"faster; crossed: outside the small-batch regime ceil(H/256) x T < "
                 f"{REGIME_CTAS}; blank: inside it, not measured)", fontsize=9)
    return fig, [f"top-K {k} mode {m}" for k in ks for m in modes]


def bars_figure(results, pub):
    """Median speedup per top-K for every architecture, minimum marked: mode b beside mode a
    for every measured one, then the published columns (the seed's protocol)."""
    sweeps, series, ks = finalize_series(results, pub)
    values = {}
    for c, mode in series:
        for k in ks:
            if mode is None:
                if (k, c.key) in pub.finalize:
                    values[(c.key, mode, k)] = pub.finalize[(k, c.key)]
            else:
                v = finalize_speedups(sweeps[c.key], k, mode)
                if len(v):
                    values[(c.key, mode, k)] = (float(np.median(v)), float(np.min(v)))
    fig = _new(max(6.0, 0.25 * len(ks) * max(len(series), 1) + 2), 3.8)
    ax = fig.subplots()
    width = 0.8 / max(len(series), 1)
    labels = []
    for n, (c, mode) in enumerate(series):
        xs, meds, lows = [], [], []
        for i, k in enumerate(ks):
            if (c.key, mode, k) in values:
                xs.append(i - 0.4 + width * (n + 0.5))
                meds.append(values[(c.key, mode, k)][0])
                lows.append(values[(c.key, mode, k)][1])
        label = c.label + (" published" if mode is None else f" mode {mode}")
        labels.append(label)
        ax.bar(xs, meds, width, color=GRAYS[n % len(GRAYS)], edgecolor="black", linewidth=0.6,
               hatch=HATCHES[n % len(HATCHES)], label=label)
        ax.plot(xs, lows, **MIN_MARKER)
    ax.plot([], [], label="minimum", **MIN_MARKER)
    ax.axhline(1.0, color="black", linewidth=0.8, linestyle=":")
    ax.set_xticks(range(len(ks)), [str(k) for k in ks])
    ax.set_xlabel("top-K")
    ax.set_ylabel("speedup vs scalar (x)")
    ax.legend(fontsize=7, ncols=2)
    ax.set_title("Finalize only, small_batch vs scalar, median per top-K; measured: mode b "
                 "(producer -> finalize) beside mode a (back-to-back)\n"
                 + ", ".join(dict.fromkeys(c.label for c, _ in series)), fontsize=8)
    return fig, labels


def time_figure(result, H, modes=FINALIZE_MODES, l2="hot"):
    """Per-launch time vs tokens, one line per variant (small_batch highlighted), per top-K a
    panel per mode (mode b first), the launch floor drawn."""
    t = sweep_rows(result).where(H=H, l2=l2)
    modes = [m for m in modes if np.any(t.mask(mode=m))]
    t = t.take(np.isin(t["mode"], modes))
    ks = [int(k) for k in t.unique("K")]
    variants = [v for v in TIME_VARIANTS + tuple(a for _, a in ABLATIONS)
                if np.any(t.mask(variant=v))]
    others = [v for v in variants if v != STUDIED]
    nrows, ncols = _pair_grid(len(ks), len(modes))
    fig = _new(3.0 * ncols, 1.0 + 2.3 * nrows)
    axes = fig.subplots(nrows, ncols, squeeze=False)
    for n, k in enumerate(ks):
        pair = []
        for q, mode in enumerate(modes):
            p = n * len(modes) + q
            ax = axes[p // ncols][p % ncols]
            pair.append(ax)
            tm = t.where(mode=mode)
            for i, v in enumerate(others + ([STUDIED] if STUDIED in variants else [])):
                s = tm.where(K=k, variant=v)
                ts = sorted(set(s["T"].tolist()))
                ys = [float(np.median(s["median_us"][s.mask(T=x)])) for x in ts]
                if v == STUDIED:
                    style = dict(marker="o", markersize=5, linestyle="-", linewidth=2.4,
                                 color=HIGHLIGHT, zorder=5)
                else:
                    style = dict(marker=MARKERS[i % len(MARKERS)], markersize=3,
                                 linestyle=LINESTYLES[i % len(LINESTYLES)], linewidth=0.9,
                                 color=str(0.15 + 0.55 * i / max(len(others) - 1, 1)))
                ax.plot(ts, ys, label=v + (" (under study)" if v == STUDIED else ""), **style)
            floor = launch_floor(result, mode)
            if floor is not None:
                ax.axhline(floor, color="black", linewidth=1.2, linestyle=(0, (1, 1)),
                           label="launch floor")
            ax.set_xscale("log", base=2)
            ax.set_title(f"top-K {k}, mode {mode}" + (f" (floor {floor:.2f} us)"
                                                      if floor is not None else ""),
                         fontsize=8, fontweight="bold" if mode == "b" else "normal")
            ax.set_xlabel("tokens T", fontsize=7)
            ax.set_ylabel("per-launch time (us)", fontsize=7)
            ax.set_ylim(bottom=0)
            ax.tick_params(labelsize=7)
        top = max(ax.get_ylim()[1] for ax in pair)
        for ax in pair:  # the two modes of one top-K on one scale
            ax.set_ylim(0, top)
    for n in range(len(ks) * len(modes), nrows * ncols):
        axes[n // ncols][n % ncols].set_visible(False)
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=4, fontsize=7)
    fig.suptitle(f"{result.column.label}: finalize per-launch time vs tokens, H={H}, L2 {l2}, "
                 f"median over bf16/fp32 weights\n"
                 + "; ".join(MODE_NAMES[m] for m in modes), fontsize=9)
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
    """The race matrix of one preset, one panel per condition (e.g. carveout) side by side: rows are
    the trigger placements in the order measured, columns finalize's metadata placement x injected
    delay; gray = share of iterations with a mismatch, a hatched and boxed cell = the expected
    verdict is race (docs/reference/experiment-tables.md; verifier column, else the ordering rule
    of docs/design/pdl.md)."""
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
    verdict = "verifier" if "rule" not in source else "ordering rule"
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


FINALIZE_ORDER = {"new": 0, "previous": 1}
_FINALIZE_PART = re.compile(r"(^|,)finalize=([^,]*)")


def _finalize_of(key):
    m = _FINALIZE_PART.search(key or "")
    return m.group(2) if m else None


def timeline_groups(result):
    """Timelines of one configuration go into one figure: the same key measured under several
    conditions, and the new finalize beside the previous one (keys differing only in
    `finalize=`). [(the key without `finalize=`, or the group name, [(file path, Timeline),
    ...])], in file order; inside a figure new before previous."""
    groups = {}
    for path, tl in result.timelines:
        if len(tl):
            key = tl.attrs.get("key")
            # without a configuration key a timeline stands alone, named by its group
            key = _FINALIZE_PART.sub("", key).lstrip(",") if key else (path, tl.group)
            groups.setdefault(key, []).append((path, tl))
    out = []
    for k, entries in groups.items():
        entries = sorted(entries, key=lambda e: FINALIZE_ORDER.get(
            _finalize_of(e[1].attrs.get("key")), 2))
        out.append((k if isinstance(k, str) else k[1], entries))
    return out


TIMELINE_CHOICES = ("representative", "all")


def _family(entries):
    group = entries[0][1].group
    return re.sub(r"_?\d+$", "", group)


def _layer_ratio(result, entries):
    """new / previous time of a layer-sweep configuration (its `speedup_finalize` row), or
    None."""
    t = result.table("layer_sweep")
    if t is None or "speedup_finalize" not in t:
        return None
    for path, tl in entries:
        if _finalize_of(tl.attrs.get("key")) == "new":
            m = t.mask(key=tl.attrs.get("key"))
            if np.any(m):
                return float(t["speedup_finalize"][m][0])
    return None


def _race_seen(result, entries):
    t = result.table("race_matrix")
    if t is None:
        return False
    keys = {tl.attrs.get("key") for _, tl in entries}
    m = np.isin(t["key"], list(keys))
    return bool(np.any((t["mismatches"][m] > 0) | (t["stale_reads"][m] > 0)))


def select_timelines(result, groups, which="representative"):
    """The timeline figures to draw: every group ('all'), or a few representative ones per
    family of groups (timeline_layer_*, timeline_race_*, ...): of the layer sweep, per shape
    the fewest tokens with the seed-after placement, and the configuration where the new
    finalize gains least (its lowest speedup_finalize); of the race matrix, the configurations
    measured under several conditions and one where a race was observed; of any other family,
    its first group."""
    if which == "all":
        return list(groups)
    families = {}
    for g in groups:
        families.setdefault(_family(g[1]), []).append(g)
    chosen = []
    for family, items in families.items():
        keys = [k for k, _ in items]
        pick = []
        if all(_finalize_of(e[1].attrs.get("key")) for _, entries in items for e in entries):
            first = {}
            for k, entries in items:
                attrs = dict(part.split("=", 1) for part in k.split(",") if "=" in part)
                if attrs.get("placement", "seed-after") != "seed-after":
                    continue
                shape, T = attrs.get("shape", ""), int(attrs.get("T", "0") or 0)
                if shape not in first or T < first[shape][0]:
                    first[shape] = (T, k)
            pick += [k for _, k in first.values()]
            ratios = [(r, k) for k, entries in items
                      if (r := _layer_ratio(result, entries)) is not None]
            if ratios:
                pick.append(min(ratios)[1])
        elif family.endswith("race"):
            pick += [k for k, entries in items if len(entries) > 1]
            seen = [k for k, entries in items if _race_seen(result, entries)]
            if seen and not set(seen) & set(pick):
                pick.append(seen[0])
        if not pick:
            pick = keys[:1]
        chosen += [g for g in items if g[0] in set(pick)]
    order = {id(g): n for n, g in enumerate(groups)}
    return sorted(chosen, key=lambda g: order[id(g)])


def _gantt(ax, timeline, t0, max_ctas, xlim=None, highlight=STUDIED_KERNEL):
    """One panel: per kernel its first `max_ctas` CTAs (by index), each a bar from start to
    exit, hatched before the wait returned, with the CTA's start, wait return, trigger and exit
    marked; behind them the span of all the kernel's CTAs; the kernel named `highlight` in
    colour. Returns the y ticks (pos, label, highlighted). Bars and markers are drawn a few
    calls per panel: artists per CTA made rendering slow."""
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
        studied = timeline.kernels[k] == highlight
        post.append((rows, split, stop - split,
                     HIGHLIGHT if studied else GANTT_FILLS[n % len(GANTT_FILLS)]))
        for m, x, show in (("start", start, np.ones(len(idx), bool)),
                           ("exit", end, has["end_ns"]), ("wait", wait, has["wait_ns"]),
                           ("trigger", trig, has["trigger_ns"])):
            marks[m][0].extend(x[show])
            marks[m][1].extend(rows[show])
        label = timeline.kernels[k]
        ticks.append(((2 * y + len(idx) - 1) / 2,
                      f"{label} ({len(idx)} of {len(every)} CTAs)" if len(every) > len(idx)
                      else f"{label} ({len(every)} CTAs)", studied))
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


def _window(tl, kernel_name, t0):
    """(first wait return, last exit) of a kernel's CTAs in us after t0: the span of its own
    work, after it may read its predecessor's output (a CTA without a wait stamp counts from
    its start); None when the kernel has no stamps."""
    if kernel_name not in tl.kernels:
        return None
    s = tl.stamps
    m = (s["kernel"] == tl.kernels.index(kernel_name)) & (s["start_ns"] >= 0)
    if not np.any(m):
        return None
    begin = np.where(s["wait_ns"][m] >= 0, s["wait_ns"][m], s["start_ns"][m]).min()
    end = max(s["end_ns"][m].max(), s["start_ns"][m].max())
    return (begin - t0) / 1e3, (end - t0) / 1e3


def _row_label(result, path, tl):
    parts = [p for p in (result.condition_of.get(("timelines", path), ""),
                         f"finalize={_finalize_of(tl.attrs.get('key'))}"
                         if _finalize_of(tl.attrs.get("key")) else "") if p]
    return ", ".join(parts)


def timeline_figure(result, entries, max_ctas=4):
    """Per-CTA Gantt of one configuration: a row of panels per entry (condition, or the new and
    the previous finalize), the whole run beside finalize's window zoomed in (from its first
    wait return to its last exit), and, where finalize starts before the first kernel
    completed (an early PDL start), the launch phase;
    `entries` is one item of timeline_groups() or a single (path, Timeline)."""
    key, entries = entries if isinstance(entries[1], list) else (entries[1].group, [entries])
    rows = []
    for path, tl in entries:
        s = tl.stamps
        v = s["start_ns"]
        t0 = int(v[v >= 0].min()) if np.any(v >= 0) else 0
        full = (max(s["end_ns"].max(), s["start_ns"].max()) - t0) / 1e3
        first = s["kernel"] == s["kernel"].min()
        first_done = (s["end_ns"][first].max() - t0) / 1e3
        fin = _window(tl, STUDIED_KERNEL, t0)
        k = tl.kernels.index(STUDIED_KERNEL) if STUDIED_KERNEL in tl.kernels else -1
        started = s["start_ns"][(s["kernel"] == k) & (s["start_ns"] >= 0)]
        early = len(started) > 0 and (started.min() - t0) / 1e3 < first_done
        rows.append(dict(path=path, tl=tl, t0=t0, full=full, first_done=first_done, fin=fin,
                         early=early))
    launch = any(r["early"] and 0 < 1.25 * r["first_done"] < 0.5 * r["full"] for r in rows)
    zoom = any(r["fin"] is not None and r["fin"][1] - r["fin"][0] < 0.5 * r["full"]
               for r in rows)
    views = (["launch"] if launch else []) + ["whole"] + (["finalize"] if zoom else [])
    per_panel = 0.55 + 0.16 * sum(min(max_ctas, int(np.sum(rows[0]["tl"].stamps["kernel"] == k)))
                                  + 0.6 for k in set(rows[0]["tl"].stamps["kernel"].tolist()))
    fig = _new(3.6 + 3.4 * len(views), 1.6 + per_panel * len(rows))
    ratios = {"launch": 1, "whole": 1.4, "finalize": 1}
    axes = fig.subplots(len(rows), len(views), squeeze=False,
                        gridspec_kw={"width_ratios": [ratios[v] for v in views]})
    for n, r in enumerate(rows):
        tl, t0, full, fin = r["tl"], r["t0"], r["full"], r["fin"]
        label = _row_label(result, r["path"], tl)
        name = f"{pathlib.Path(r['path']).stem} /{tl.group}"
        first_name = tl.kernels[int(tl.stamps["kernel"].min())]
        for col, view in enumerate(views):
            ax = axes[n][col]
            if view == "launch":
                z = 1.25 * r["first_done"]
                xlim, what = (-0.02 * z, z), f"first {z:.0f} us ({first_name} running)"
            elif view == "whole":
                xlim, what = (-0.01 * full, 1.01 * full), f"{name}: whole run"
            elif fin is not None:
                pad = max(0.15 * (fin[1] - fin[0]), 0.5)
                xlim = (fin[0] - pad, fin[1] + pad)
                what = f"{STUDIED_KERNEL} after its wait, {fin[1] - fin[0]:.1f} us"
            else:
                ax.set_visible(False)
                continue
            ticks = _gantt(ax, tl, t0, max_ctas, xlim)
            ax.axvline(r["first_done"], color="black", linewidth=0.8, linestyle=(0, (4, 2)),
                       zorder=1)
            if view == "whole" and fin is not None and zoom:
                ax.axvspan(*fin, color=HIGHLIGHT, alpha=0.12, zorder=0, linewidth=0)
            ax.set_yticks([p for p, _, _ in ticks],
                          [lab for _, lab, _ in ticks] if col == 0 else [""] * len(ticks),
                          fontsize=6)
            for tick, (_, _, studied) in zip(ax.get_yticklabels(), ticks):
                if studied:
                    tick.set_fontweight("bold")
                    tick.set_color(HIGHLIGHT)
            ax.set_title(f"{label}: {what}" if label and col == 0 else what, fontsize=7)
            ax.tick_params(axis="x", labelsize=7)
            if n == len(rows) - 1:
                ax.set_xlabel("time since the first CTA started (us)", fontsize=7)
    handles = [ax.plot([], [], label=lab, **GANTT_MARKS[m])[0] for m, lab in
               (("start", "CTA start (launch)"), ("wait", "wait returned"),
                ("trigger", "trigger"), ("exit", "CTA exit"))]
    handles += [Patch(facecolor="white", edgecolor="black", hatch="////",
                      label="before the wait returned"),
                Patch(facecolor=GANTT_FILLS[0], edgecolor="black", label="after the wait"),
                Patch(facecolor=HIGHLIGHT, edgecolor="black",
                      label=f"{STUDIED_KERNEL}, after the wait"),
                Patch(facecolor="0.9", label="span of all the kernel's CTAs"),
                ax.plot([], [], color="black", linewidth=0.8, linestyle=(0, (4, 2)),
                        label="first kernel completed")[0]]
    fig.legend(handles=handles, fontsize=6, loc="outside lower center", ncols=5)
    tl0 = rows[0]["tl"]
    source = tl0.attrs.get("source", "")
    common = _common_condition(result, "timelines")
    fig.suptitle(f"{result.column.label}: per-CTA timeline" + (f" ({source})" if source else "")
                 + (f"\n{key}" if key != tl0.group else f" /{key}")
                 + (f"\n{common}" if common else ""), fontsize=8)
    return fig, [tl0.kernels[k] for k in sorted(set(tl0.stamps["kernel"].tolist()))]


FIGURE_GROUPS = ("finalize", "race matrices", "timelines")


def figure_jobs(results, pub, timelines="representative"):
    """Every figure the inputs support, in report order: [(group, name, title, function,
    arguments)], and a line on the timelines left out. Timeline names keep their number among
    all of an architecture's timeline figures, so a figure has one name whichever are drawn."""
    if timelines not in TIMELINE_CHOICES:
        raise ValueError(f"timelines: {timelines!r} is not one of {TIMELINE_CHOICES}")
    jobs = [("finalize", "finalize_speedup_bars",
             "Finalize-only median speedup per top-K, every architecture (minimum marked; "
             "measured: mode b beside mode a)", bars_figure, (results, pub))]
    race_jobs, timeline_jobs, drawn, total = [], [], 0, 0
    for r in results:
        slug = r.column.slug
        sweep = sweep_rows(r)
        modes = present_modes(sweep) if sweep is not None else []
        if modes:
            jobs.append(("finalize", f"finalize_heatmap_{slug}",
                         f"{r.column.label}: speedup per hidden size x tokens, per top-K mode "
                         f"{' beside mode '.join(modes)}", heatmap_figure, (r,)))
            hs = sweep.where(l2="hot").unique("H")
            # one hidden size keeps the report short: the middle one of the sweep (the tables
            # cover all; time_figure(result, H) draws any other)
            H = int(hs[len(hs) // 2])
            jobs.append(("finalize", f"finalize_time_{slug}_H{H}",
                         f"{r.column.label}: per-launch time vs tokens, H={H}, mode "
                         f"{' beside mode '.join(modes)}", time_figure, (r, H)))
        race = r.table("race_matrix")
        if race is not None and len(race):
            for preset in race.unique("preset"):
                race_jobs.append(("race matrices", f"race_matrix_{slug}_{_safe(preset)}",
                                  f"{r.column.label}: race matrix, preset {preset}",
                                  race_figure, (r, preset)))
        groups = timeline_groups(r)
        chosen = {id(g) for g in select_timelines(r, groups, timelines)}
        width = max(2, len(str(len(groups) - 1)))
        total += len(groups)
        for n, g in enumerate(groups):
            if id(g) not in chosen:
                continue
            drawn += 1
            key, entries = g
            labels = [_row_label(r, p, tl) for p, tl in entries]
            timeline_jobs.append(
                ("timelines", f"timeline_{slug}_{n:0{width}d}_{_safe(key)}",
                 f"{r.column.label}: per-CTA timeline {key}"
                 + (f" ({'; '.join(c for c in labels if c)})" if any(labels) else ""),
                 timeline_figure, (r, (key, entries))))
    note = ""
    if drawn < total:
        note = (f"timelines: {drawn} of {total} configurations drawn (representative ones; "
                f"--timelines all draws every one)")
    return jobs + race_jobs + timeline_jobs, note


_JOBS = []  # the jobs of the running build_figures, inherited by forked workers


def _render(i, out_dir):
    stem, group, name, title, function, args = _JOBS[i]
    fig, series = function(*args)
    return FigureInfo(stem, title, save(fig, out_dir, stem), list(series), name, group)


def _workers(jobs):
    """MOEFIN_REPORT_JOBS, else one per CPU (at most 4); 1 where fork is not available."""
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    want = os.environ.get("MOEFIN_REPORT_JOBS", "")
    n = int(want) if want.isdigit() and int(want) > 0 else min(4, os.cpu_count() or 1)
    return max(1, min(n, jobs))


def stderr_progress(line):
    print(line, file=sys.stderr, flush=True)


def build_figures(results, pub, out_dir, timelines="representative", progress=stderr_progress):
    """Renders the figures the inputs support into out_dir (timelines: 'representative' or
    'all'); returns FigureInfo per figure, in report order, named NN_<name>. `progress` gets
    a line before drawing and one per group of figures (finalize, race matrices, timelines)
    when it is done.

    Rendering is what a report spends its time on, so figures are drawn in forked worker
    processes (they inherit the results; only the small FigureInfo comes back)."""
    global _JOBS
    jobs, note = figure_jobs(results, pub, timelines)
    width = max(2, len(str(len(jobs))))
    _JOBS = [(f"{i + 1:0{width}d}_{name}", group, name, title, function, args)
             for i, (group, name, title, function, args) in enumerate(jobs)]
    counts = {g: sum(1 for j in jobs if j[0] == g) for g in FIGURE_GROUPS}
    progress = progress or (lambda line: None)
    try:
        workers = _workers(len(_JOBS))
        progress(f"analysis: drawing {len(jobs)} figures ("
                 + ", ".join(f"{g} {n}" for g, n in counts.items() if n)
                 + f") with {workers} process(es)" + (f"; {note}" if note else ""))
        start, out, done = time.monotonic(), [], {g: 0 for g in FIGURE_GROUPS}

        def collect(info):
            out.append(info)
            done[info.group] += 1
            if done[info.group] == counts[info.group]:
                progress(f"analysis: figures: {info.group}: {counts[info.group]} drawn "
                         f"({time.monotonic() - start:.0f} s)")

        if workers == 1:
            for i in range(len(_JOBS)):
                collect(_render(i, out_dir))
        else:
            with ProcessPoolExecutor(workers,
                                     mp_context=multiprocessing.get_context("fork")) as ex:
                for info in ex.map(_render, range(len(_JOBS)), [out_dir] * len(_JOBS)):
                    collect(info)
        return out
    finally:
        _JOBS = []


def _safe(text):
    return "".join(ch if ch.isalnum() else "_" for ch in str(text)).strip("_")
