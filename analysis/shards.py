"""Result files of several processes or GPUs, compared (numpy and h5py only, so it also runs as
`python3 analysis/shards.py` on a GPU machine that lacks the rest of this package's needs):

    same A.h5 B.h5 --table GROUP [--axes C1,C2]
        whether A and B hold the same rows of GROUP: the same keys with the same axis values
        (string and integer columns unless --axes names them), e.g. a merged sharded run against
        an unsharded one. Exit 0 same, 1 different (the first differences are printed).

    spread A.h5 B.h5 [--table finalize_sweep] [--metric median_us] [--json FILE]
        identical configurations measured in A (one GPU) and in B (another): the distribution of
        B/A of the metric over the keys both hold, beside the noise of the configurations each
        file measured twice (/finalize_repeat against its table), so that "is one GPU like
        another" is answered against how much one GPU differs from itself.

    summary MERGED.h5 [--wall-s W] [--single-s S] [--json FILE]
        a merged sharded run (`moefin merge`): per shard its GPU, configurations, estimated and
        measured seconds (/merge_shards); the balance (slowest shard over the mean); with the
        run's wall time W and a single-GPU time S of the same grid, the speedup S / W.

A missing, foreign or unreadable file, or one without the table asked for, is one line on
stderr naming it, exit 2 (exit 1 is `same`'s "different").
"""
import argparse
import json
import sys

import h5py
import numpy as np

STORE_FIELDS = ("key", "sample_offset", "sample_count")


class ShardsError(Exception):
    """A file this tool cannot use: the message names it."""


def _open(path):
    try:
        return h5py.File(path, "r")
    except FileNotFoundError:
        raise ShardsError(f"{path}: no such file") from None
    except OSError as e:
        raise ShardsError(f"{path}: cannot read it as an HDF5 result file ({e})") from None


def _text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    if isinstance(v, np.ndarray) and v.shape == ():
        return _text(v[()])
    return str(v)


def read_rows(path, table):
    """{key: {column: value}} of one table (store columns left out), and the root attributes."""
    with _open(path) as f:
        if table not in f or not isinstance(f[table], h5py.Group) or "table" not in f[table]:
            raise ShardsError(f"{path}: no table /{table}")
        rows = f[table]["table"][()]
        attrs = {k: _text(v) for k, v in f.attrs.items()}
    names = [n for n in rows.dtype.names if n not in STORE_FIELDS]
    columns = {n: (np.char.decode(rows[n], "utf-8") if rows.dtype[n].kind == "S" else rows[n])
               .tolist() for n in names}
    keys = np.char.decode(rows["key"], "utf-8").tolist() if len(rows) else []
    out = {k: {n: columns[n][i] for n in names} for i, k in enumerate(keys)}
    return out, attrs, {n: rows.dtype[n].kind for n in names}


def same_rows(a, b, table, axes=None):
    """(True, summary) when a and b hold the same keys with equal axis columns in `table`."""
    ra, _, kinds = read_rows(a, table)
    rb, _, _ = read_rows(b, table)
    if axes is None:
        axes = [n for n, k in kinds.items() if k in "Siu"]
    problems = []
    only_a, only_b = sorted(set(ra) - set(rb)), sorted(set(rb) - set(ra))
    if only_a:
        problems.append(f"{len(only_a)} keys only in {a}, e.g. {only_a[0]}")
    if only_b:
        problems.append(f"{len(only_b)} keys only in {b}, e.g. {only_b[0]}")
    for key in sorted(set(ra) & set(rb)):
        for col in axes:
            if ra[key].get(col) != rb[key].get(col):
                problems.append(f"{key}: {col} = {ra[key].get(col)!r} vs {rb[key].get(col)!r}")
                break
    if problems:
        return False, f"/{table}: different: " + "; ".join(problems[:5])
    return True, (f"/{table}: the same {len(ra)} rows (keys and axis columns "
                  f"{', '.join(axes)})")


def _relative(values):
    v = np.abs(np.asarray(values, dtype=float) - 1.0)
    return {"median": float(np.median(v)), "p90": float(np.quantile(v, 0.9)),
            "max": float(v.max())} if len(v) else None


def repeat_noise(path, table, metric):
    """|repeat/first - 1| statistics of /finalize_repeat against `table` in one file (or None)."""
    with _open(path) as f:
        has = "finalize_repeat" in f and "table" in f["finalize_repeat"]
    if not has or table != "finalize_sweep":
        return None
    first, _, _ = read_rows(path, table)
    again, _, _ = read_rows(path, "finalize_repeat")
    ratios = [again[k][metric] / first[k][metric] for k in again
              if k in first and first[k][metric] > 0]
    stats = _relative(ratios)
    if stats is not None:
        stats["configurations"] = len(ratios)
    return stats


def spread(a, b, table="finalize_sweep", metric="median_us"):
    """B/A of `metric` over the keys both files hold, with each file's own repeat noise."""
    ra, pa, _ = read_rows(a, table)
    rb, pb, _ = read_rows(b, table)
    keys = sorted(k for k in set(ra) & set(rb)
                  if ra[k][metric] > 0 and np.isfinite(ra[k][metric]) and np.isfinite(rb[k][metric]))
    if not keys:
        raise ShardsError(f"{a}, {b}: no configuration of /{table} in both")
    ratio = np.array([rb[k][metric] / ra[k][metric] for k in keys])
    worst = keys[int(np.argmax(np.abs(ratio - 1)))]
    gpu = lambda p: {n: p.get(n, "not recorded") for n in
                     ("gpu_name", "gpu_uuid", "gpu_pci_bus_id", "host", "date_utc")}
    return {
        "table": table, "metric": metric, "configurations": len(keys),
        "a": {"file": str(a), **gpu(pa), "repeat_noise": repeat_noise(a, table, metric)},
        "b": {"file": str(b), **gpu(pb), "repeat_noise": repeat_noise(b, table, metric)},
        "ratio_b_over_a": {"median": float(np.median(ratio)), "min": float(ratio.min()),
                           "max": float(ratio.max())},
        "abs_relative_difference": _relative(ratio),
        "worst": {"key": worst, "a": ra[worst][metric], "b": rb[worst][metric]},
    }


def spread_text(s):
    d, r = s["abs_relative_difference"], s["ratio_b_over_a"]
    lines = [f"/{s['table']} {s['metric']}: {s['configurations']} configurations measured on "
             f"both GPUs",
             f"  A: {s['a']['gpu_name']} {s['a']['gpu_uuid']} ({s['a']['gpu_pci_bus_id']})",
             f"  B: {s['b']['gpu_name']} {s['b']['gpu_uuid']} ({s['b']['gpu_pci_bus_id']})",
             f"  B/A: median {r['median']:.4f}, range {r['min']:.4f} .. {r['max']:.4f}; "
             f"|B/A - 1|: median {100 * d['median']:.2f}%, p90 {100 * d['p90']:.2f}%, "
             f"max {100 * d['max']:.2f}% ({s['worst']['key']})"]
    for side in ("a", "b"):
        n = s[side]["repeat_noise"]
        if n:
            lines.append(f"  noise within {side.upper()} (/finalize_repeat, "
                         f"{n['configurations']} configurations): |again/first - 1| median "
                         f"{100 * n['median']:.2f}%, max {100 * n['max']:.2f}%")
    return "\n".join(lines)


def shard_summary(path, wall_s=None, single_s=None):
    """Per-shard seconds and GPUs of a merged file, the balance, and S / W when both are given."""
    per, attrs, _ = read_rows(path, "merge_shards")
    shards_ = sorted(per.values(), key=lambda r: r["shard"])
    measured = np.array([r["measured_s"] for r in shards_], dtype=float)
    out = {"file": str(path), "command": attrs.get("grid_command", "not recorded"),
           "configurations": int(attrs.get("grid_configurations", 0)),
           "shard_count": int(attrs.get("shard_count", len(shards_))),
           "merge_state": attrs.get("merge_state", "not recorded"),
           "missing_configurations": int(attrs.get("missing_configurations", 0)),
           "estimated_grid_s": float(attrs.get("grid_cost_s", "nan")),
           "shards": shards_,
           "measured_s": {"sum": float(measured.sum()), "max": float(measured.max()),
                          "min": float(measured.min())},
           "balance_max_over_mean": float(measured.max() / measured.mean())
           if measured.mean() > 0 else None,
           "wall_s": wall_s, "single_gpu_s": single_s}
    out["speedup"] = single_s / wall_s if wall_s and single_s else None
    out["speedup_of_the_slowest_shard"] = (single_s / measured.max()
                                           if single_s and measured.max() > 0 else None)
    return out


def summary_text(s):
    lines = [f"{s['command']}: {s['configurations']} configurations over {s['shard_count']} "
             f"shards ({s['merge_state']}, {s['missing_configurations']} missing); estimate "
             f"{s['estimated_grid_s']:.1f} s for the grid on one GPU"]
    for r in s["shards"]:
        lines.append(f"  shard {r['shard']}: {r['gpu_name']} {r['gpu_uuid']} "
                     f"({r['gpu_pci_bus_id']}, device {r['device_ordinal']}), {r['done']} of "
                     f"{r['planned']} configurations, measured {r['measured_s']:.1f} s, "
                     f"estimated {r['estimated_s']:.1f} s")
    m = s["measured_s"]
    balance = s["balance_max_over_mean"]
    lines.append(f"  measured: sum {m['sum']:.1f} s, slowest shard {m['max']:.1f} s, fastest "
                 f"{m['min']:.1f} s" + (f"; slowest / mean {balance:.3f}" if balance else ""))
    if s["wall_s"]:
        text = f"  wall {s['wall_s']:.1f} s"
        if s["single_gpu_s"]:
            text += (f" against {s['single_gpu_s']:.1f} s on one GPU: speedup "
                     f"{s['speedup']:.2f}x on {s['shard_count']} (the slowest shard's own time: "
                     f"{s['speedup_of_the_slowest_shard']:.2f}x)")
        lines.append(text)
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="shards.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("same", help="the same keys and axis values in one table of two files")
    p.add_argument("a")
    p.add_argument("b")
    p.add_argument("--table", required=True)
    p.add_argument("--axes", help="comma-separated columns to compare (default: every string "
                                  "and integer column)")
    q = sub.add_parser("spread", help="B/A over the configurations two files both measured")
    q.add_argument("a")
    q.add_argument("b")
    q.add_argument("--table", default="finalize_sweep")
    q.add_argument("--metric", default="median_us")
    q.add_argument("--json", help="also write the numbers to this file")
    r = sub.add_parser("summary", help="per-shard GPUs and seconds of a merged file; speedup")
    r.add_argument("merged")
    r.add_argument("--wall-s", type=float, help="the sharded run's wall time (s)")
    r.add_argument("--single-s", type=float, help="the same grid's time on one GPU (s)")
    r.add_argument("--json", help="also write the numbers to this file")
    args = ap.parse_args(argv)
    try:
        return _run(args)
    except ShardsError as e:
        print(f"shards.py: error: {e}", file=sys.stderr)
    except (KeyError, ValueError) as e:  # a table of the expected name with other columns
        print(f"shards.py: error: a column or value this tool needs is missing or wrong: {e}",
              file=sys.stderr)
    return 2


def _run(args):
    if args.what == "same":
        ok, text = same_rows(args.a, args.b, args.table,
                             args.axes.split(",") if args.axes else None)
        print(text)
        return 0 if ok else 1
    if args.what == "summary":
        s = shard_summary(args.merged, args.wall_s, args.single_s)
        print(summary_text(s))
    else:
        s = spread(args.a, args.b, args.table, args.metric)
        print(spread_text(s))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(s, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
