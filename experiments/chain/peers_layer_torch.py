#!/usr/bin/env python3
"""A PyTorch peer of the whole MoE layer, timed the way `moefin sweep layer` times the chain.

What a user would write in PyTorch for the seed's layer shapes (bf16 weights, as the chain's):
router logits -> softmax -> top-K -> renormalized weights; the (token, expert) pairs sorted by
expert; the gathered hidden states through each expert's gate/up matrix; SwiGLU or ReLU^2;
through each expert's down matrix; weighted and scatter-added back per token. The per-expert
matmuls take one of (probed at run time, first that works):

* ``grouped_mm``: torch._grouped_mm over expert offsets (the installed torch's grouped GEMM);
* ``gather_bmm``: every pair's weight matrices gathered (W[ids]) and one torch.bmm per GEMM.

Both are captured as one CUDA graph of N layers (layer i routes its own logits), a warm-up replay,
then R interleaved rounds; per-layer time = replay time / N; the rows' samples are the per-round
values. Each variant's output for the first layer is compared with an fp32 per-expert loop first
(max error relative to the output's peak). Rows go to ``/layer_sweep`` in the schema of
docs/reference/experiment-tables.md (finalize ``torch``, placement ``none``, finalize_kernel = the
variant; speedup columns NaN: no moefin chain ran in the same rounds).

Runs on the GPU machine (python3 with torch, h5py, numpy). The writer part imports no torch, so
the file format is tested without a GPU (tests/python/test_layer_peer_file.py).
"""
import argparse
import math
import os
import sys
import time

import numpy as np

# The finalize peer holds the writer, provenance and timing helpers both peers share.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "finalize"))
import peers_torch as common  # noqa: E402

# The seed's shapes, named exactly as core/chain/shape.hpp names them (top-16's I is moefin's
# choice), so that `sweep layer --peers` and analysis/ put a peer row beside the chain's.
SHAPES = {
    "top-8": dict(name="H6144/I512/E256/top-8", H=6144, I=512, E=256, K=8, act="swiglu"),
    "top-22": dict(name="H2048/I1280/E512/top-22", H=2048, I=1280, E=512, K=22, act="relu2"),
    "top-16": dict(name="H3584/I512/E896/top-16", H=3584, I=512, E=896, K=16, act="swiglu"),
}
VARIANTS = ["grouped_mm", "gather_bmm"]

# The columns of /layer_sweep, in the order moefin writes them
# (experiments/report/chain_tables.cpp).
LAYER_FIELDS = [
    ("shape", "S40"), ("H", "<i8"), ("I", "<i8"), ("E", "<i8"), ("K", "<i8"),
    ("activation", "S8"), ("T", "<i8"), ("finalize", "S12"), ("placement", "S16"),
    ("finalize_kernel", "S16"), ("tile_m", "<i8"), ("layers", "<i8"), ("median_us", "<f8"),
    ("min_us", "<f8"), ("q1_us", "<f8"), ("q3_us", "<f8"), ("max_us", "<f8"), ("rounds", "<i8"),
    ("speedup_finalize", "<f8"), ("speedup_finalize_lo", "<f8"), ("speedup_finalize_hi", "<f8"),
    ("speedup_placement", "<f8"), ("speedup_placement_lo", "<f8"),
    ("speedup_placement_hi", "<f8"), ("weights_format", "S12"),
]


def row_key(shape, tokens, variant):
    """The key of a peer row, in the pattern of `sweep layer`'s keys."""
    return f"shape={shape['name']},T={tokens},finalize=torch,placement=none,kernel={variant}"


def row_values(shape, tokens, variant, layers, rounds, us):
    v = dict(shape=shape["name"], H=shape["H"], I=shape["I"], E=shape["E"], K=shape["K"],
             activation=shape["act"], T=tokens, finalize="torch", placement="none",
             finalize_kernel=variant, tile_m=0, layers=layers, rounds=rounds,
             weights_format="bf16")
    v.update(common.summary(us))
    for name, _ in LAYER_FIELDS:
        if name.startswith("speedup"):
            v[name] = math.nan
    return v


# ------------------------------------------------------------------------------------------
# GPU part (torch imported by main only)


class Layer:
    """The weights of one shape and the two formulations of its forward pass."""

    def __init__(self, torch, shape, seed):
        self.torch, self.s = torch, shape
        H, I, E = shape["H"], shape["I"], shape["E"]
        n1 = 2 * I if shape["act"] == "swiglu" else I
        g = torch.Generator(device="cuda").manual_seed(seed)
        # Uniform in +-[0.05, 1] / sqrt(k), as the chain's weights (never zero).
        def weights(*size):
            k = size[-1]
            w = torch.empty(*size, device="cuda", dtype=torch.bfloat16)
            for e in range(0, size[0], 64):  # in slices: a float copy of 10 GB would not fit
                sl = torch.rand(min(64, size[0] - e), *size[1:], device="cuda", generator=g)
                coin = torch.rand(sl.shape, device="cuda", generator=g)
                sign = torch.where(coin < 0.5, -1.0, 1.0)
                w[e:e + sl.shape[0]] = ((sl * 0.95 + 0.05) * sign / math.sqrt(k)).to(torch.bfloat16)
            return w
        self.w1 = weights(E, n1, H)  # [E, n1, H]: out = x @ w1[e].T
        self.w2 = weights(E, H, I)   # [E, H, I]
        # torch._grouped_mm multiplies [M, K] by [G, K, N]: the transposed views.
        self.w1t = self.w1.transpose(1, 2)
        self.w2t = self.w2.transpose(1, 2)

    def route(self, logits):
        torch = self.torch
        K = self.s["K"]
        probs = torch.softmax(logits.float(), dim=-1)
        top, ids = torch.topk(probs, K, dim=-1)
        w = (top / top.sum(dim=-1, keepdim=True)).to(torch.bfloat16)
        return ids, w

    def act(self, h):
        torch = self.torch
        if self.s["act"] == "swiglu":
            gate, up = h.chunk(2, dim=-1)
            return torch.nn.functional.silu(gate) * up
        return torch.relu(h).square()

    def forward_grouped(self, x, logits):
        torch = self.torch
        T, E, K = x.shape[0], self.s["E"], self.s["K"]
        ids, w = self.route(logits)
        flat = ids.reshape(-1)
        order = torch.argsort(flat, stable=True)
        counts = torch.zeros(E, device="cuda", dtype=torch.int32)
        counts.scatter_add_(0, flat.to(torch.int64), torch.ones_like(flat, dtype=torch.int32))
        offs = torch.cumsum(counts, 0, dtype=torch.int32)
        xs = x.index_select(0, order // K)
        h = torch._grouped_mm(xs, self.w1t, offs=offs)
        y = torch._grouped_mm(self.act(h), self.w2t, offs=offs)
        y = y * w.reshape(-1).index_select(0, order).unsqueeze(1)
        out = torch.zeros(T, self.s["H"], device="cuda", dtype=torch.float32)
        out.index_add_(0, order // K, y.float())
        return out.to(torch.bfloat16)

    def forward_gather(self, x, logits):
        torch = self.torch
        T, K = x.shape[0], self.s["K"]
        ids, w = self.route(logits)
        flat = ids.reshape(-1)
        xs = x.repeat_interleave(K, dim=0).unsqueeze(1)         # [TK, 1, H]
        h = torch.bmm(xs, self.w1.index_select(0, flat).transpose(1, 2))
        y = torch.bmm(self.act(h), self.w2.index_select(0, flat).transpose(1, 2)).squeeze(1)
        y = y * w.reshape(-1, 1)
        return y.view(T, K, -1).float().sum(dim=1).to(torch.bfloat16)

    def reference(self, x, logits):
        """fp32, one matmul per used expert (a host loop: not capturable, used once)."""
        torch = self.torch
        T, K = x.shape[0], self.s["K"]
        ids, w = self.route(logits)
        out = torch.zeros(T, self.s["H"], device="cuda", dtype=torch.float32)
        for e in torch.unique(ids).tolist():
            t, k = (ids == e).nonzero(as_tuple=True)
            h = x[t].float() @ self.w1[e].float().T
            y = self.act(h) @ self.w2[e].float().T
            out.index_add_(0, t, y * w[t, k].float().unsqueeze(1))
        return out

    def fn(self, variant):
        return {"grouped_mm": self.forward_grouped, "gather_bmm": self.forward_gather}[variant]


def capture(torch, fn, xs, logits, layers):
    """A CUDA graph of `layers` calls, call i on logits[i]; the outputs stay in `outs`."""
    outs = [fn(xs, logits[i]) for i in range(layers)]  # warm-up, and the output buffers
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for i in range(layers):
            outs[i].copy_(fn(xs, logits[i]))
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(layers):
            outs[i].copy_(fn(xs, logits[i]))
    return graph, outs


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="out/layer_peer.h5", help="result file to create")
    ap.add_argument("--resume", default="", help="continue this result file")
    ap.add_argument("--seed", type=int, default=2026)
    ap.add_argument("--shapes", default="top-8,top-22,top-16", help=", ".join(SHAPES))
    ap.add_argument("--tokens", default="1,8,16,32,64,128", help="token counts")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=", ".join(VARIANTS))
    ap.add_argument("--layers", type=int, default=16, help="layers per CUDA graph")
    ap.add_argument("--gather-max-tokens", type=int, default=16,
                    help="gather_bmm copies every pair's weight matrices (GBs at large T): "
                         "only up to this T")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--max-minutes", type=float, default=0,
                    help="stop cleanly before this many minutes (0: no limit)")
    a = ap.parse_args(argv)
    shapes = a.shapes.split(",")
    variants = a.variants.split(",")
    if any(s not in SHAPES for s in shapes):
        ap.error(f"--shapes: {a.shapes}: each of {', '.join(SHAPES)}")
    if any(v not in VARIANTS for v in variants):
        ap.error(f"--variants: {a.variants}: each of {', '.join(VARIANTS)}")
    tokens = [int(t) for t in a.tokens.split(",")]
    if a.rounds < 3 or a.layers < 1 or any(t < 1 for t in tokens):
        ap.error("--rounds must be >= 3, --layers >= 1, token counts >= 1")

    import torch  # the GPU part

    if not torch.cuda.is_available():
        raise SystemExit("peers_layer_torch.py needs a CUDA device (torch.cuda.is_available())")
    f, seed = common.open_result(a.resume or a.out, bool(a.resume), a.seed, common.gpu_facts(torch))
    table = common.TableWriter(f, "layer_sweep",
                               "PyTorch peer of the whole layer, per-layer time (us) of a CUDA "
                               "graph of `layers` layers on distinct routings, no PDL; speedup "
                               "columns NaN", fields=LAYER_FIELDS)
    start = time.monotonic()
    failed = False
    stopped = False  # by --max-minutes: the file stays incomplete, for --resume
    for sname in shapes:
        shape = SHAPES[sname]
        if all(table.has(row_key(shape, t, v)) for t in tokens for v in variants):
            continue
        if a.max_minutes > 0 and time.monotonic() - start > a.max_minutes * 60:
            print(f"incomplete: --max-minutes reached before {sname}", file=sys.stderr)
            stopped = True
            break
        layer = Layer(torch, shape, seed & 0x7FFFFFFF)
        usable = []
        for v in variants:  # probe: does this torch run it (and capture it)?
            try:
                x = torch.randn(2, shape["H"], device="cuda", dtype=torch.bfloat16)
                lg = torch.randn(2, shape["E"], device="cuda")
                layer.fn(v)(x, lg)
                torch.cuda.synchronize()
                usable.append(v)
            except Exception as e:  # noqa: BLE001 (a missing op or an unsupported layout)
                print(f"{sname}: variant {v} not usable with torch {torch.__version__}: "
                      f"{type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
        for t in tokens:
            if all(table.has(row_key(shape, t, v)) for v in usable) or not usable:
                continue
            if a.max_minutes > 0 and time.monotonic() - start > a.max_minutes * 60:
                print(f"incomplete: --max-minutes reached before {sname} T={t}", file=sys.stderr)
                stopped = True
                break
            g = torch.Generator(device="cuda").manual_seed((seed * 31 + t) & 0x7FFFFFFF)
            x = ((torch.rand(t, shape["H"], device="cuda", generator=g) * 0.95 + 0.05) *
                 torch.where(torch.rand(t, shape["H"], device="cuda", generator=g) < 0.5, -1.0, 1.0)
                 ).to(torch.bfloat16)
            logits = torch.randn(a.layers, t, shape["E"], device="cuda", generator=g)
            ref = layer.reference(x, logits[0])
            peak = ref.abs().max().item()
            graphs, names = [], []
            for v in usable:
                if v == "gather_bmm" and t > a.gather_max_tokens:
                    continue
                try:
                    graph, outs = capture(torch, layer.fn(v), x, logits, a.layers)
                except Exception as e:  # noqa: BLE001
                    print(f"{sname} T={t}: {v} could not be captured: {type(e).__name__}: "
                          f"{str(e)[:200]}", file=sys.stderr)
                    continue
                graph.replay()
                torch.cuda.synchronize()
                err = (outs[0].float() - ref).abs().max().item() / max(peak, 1e-30)
                ok = math.isfinite(err) and err <= 2e-2
                failed = failed or not ok
                print(f"{sname} T={t} {v}: max error {err:.2e} of the output's peak "
                      f"({'ok' if ok else 'FAIL: above 2e-2'})", file=sys.stderr)
                graphs.append(graph)
                names.append(v)
            ms = common.time_rounds(torch, graphs, a.rounds)
            line = []
            for v, m in zip(names, ms):
                us = [x_ * 1e3 / a.layers for x_ in m]
                if not table.has(row_key(shape, t, v)):
                    table.append(row_key(shape, t, v),
                                 row_values(shape, t, v, a.layers, a.rounds, us), us)
                line.append(f"{v} {np.median(us):.1f}us")
            print(f"[layer peer {time.monotonic() - start:.0f}s] {sname} T={t}: "
                  f"{', '.join(line)}", file=sys.stderr, flush=True)
            del graphs
        del layer
        torch.cuda.empty_cache()
    print(f"wrote {f.filename} ({len(table.keys)} rows)")
    if stopped:
        f.close()
    else:
        common.finish_result(f)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
