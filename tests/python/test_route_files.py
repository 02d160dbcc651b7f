"""`moefin route` and `moefin reference finalize` files, checked by an independent program: the
layout invariants of docs/design/computation.md re-derived with numpy, and the finalize recomputed
from the stored arrays (bitwise, in the documented fp32 order)."""
import h5py
import numpy as np
import pytest

from conftest import run

POISON_BF16 = 0x7FC1


def bf16_to_f32(bits):
    return (np.asarray(bits, np.uint32) << 16).view(np.float32)


def f32_to_bf16(values):
    """Round to nearest even (the inputs here are finite)."""
    u = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def e4m3_table():
    sub = [m * 2.0**-9 for m in range(8)]
    normal = [(8 + m) * 2.0**(e - 10) for e in range(1, 16) for m in range(8)
              if not (e == 15 and m == 7)]
    return np.array(sub + normal)


def f32_to_e4m3(values):
    """Nearest E4M3 value, ties to the even code, saturating at 448; sign kept."""
    table = e4m3_table()
    x = np.asarray(values, np.float64)
    a = np.abs(x)
    hi = np.clip(np.searchsorted(table, a), 1, len(table) - 1)
    lo = hi - 1
    d_lo, d_hi = a - table[lo], table[hi] - a
    code = np.where((d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0)), hi, lo)
    code = np.where(a >= table[-1], len(table) - 1, code)
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def e4m3_to_f64(codes):
    codes = np.asarray(codes, np.uint8)
    mag = e4m3_table()[codes & 0x7F]
    return np.where(codes & 0x80, -mag, mag)


def check_layout(g):
    """Every invariant of the permuted layout, from the definitions."""
    T, K = int(g.attrs["tokens"]), int(g.attrs["top_k"])
    E, tile = int(g.attrs["experts"]), int(g.attrs["tile"])
    begin, n_local = int(g.attrs["local_expert_begin"]), int(g.attrs["num_local_experts"])
    ids = g["expert_ids"][()]
    e2p = g["expanded_to_permuted"][()]
    p2t, p2e = g["permuted_to_token"][()], g["permuted_to_expanded"][()]
    counts, offsets = g["expert_counts"][()], g["expert_offsets"][()]
    cta = g["cta_to_expert"][()]
    total = int(g["total_padded_rows"][0])
    assert ids.shape == e2p.shape == (T, K)
    assert g["weights_fp32"].shape == g["weights_bf16"].shape == (T, K)
    assert ((ids >= 0) & (ids < E)).all()
    assert all(len(set(row)) == K for row in ids.tolist()), "K distinct experts per token"
    assert p2t.shape == p2e.shape == (total,) and cta.shape == (total // tile,)
    assert total % tile == 0 and offsets[0] == 0 and offsets[-1] == total
    local = (ids >= begin) & (ids < begin + n_local)
    assert (e2p[~local] == -1).all(), "dropped experts map to -1"
    np.testing.assert_array_equal(counts, np.bincount(ids[local] - begin, minlength=n_local))
    np.testing.assert_array_equal(np.diff(offsets), -(-counts // tile) * tile)
    rows = e2p[local]
    assert len(np.unique(rows)) == rows.size, "every local pair has its own row"
    expanded = np.flatnonzero(local.ravel())
    np.testing.assert_array_equal(p2e[rows], expanded)
    np.testing.assert_array_equal(p2t[rows], expanded // K)
    used = np.zeros(total, bool)
    used[rows] = True
    assert (p2t[~used] == -1).all() and (p2e[~used] == -1).all(), "padding rows are -1"
    for x in range(n_local):
        group = slice(offsets[x], offsets[x + 1])
        members = p2e[group][: counts[x]]
        assert (ids.ravel()[members] == begin + x).all(), "rows grouped by expert ascending"
        assert (np.diff(p2t[group][: counts[x]]) > 0).all(), "tokens ascending inside"
        assert (p2t[group][counts[x]:] == -1).all(), "padding at the end of the group"
        assert (cta[offsets[x] // tile: offsets[x + 1] // tile] == x).all()
    return ids, e2p, total


ROUTE_CASES = [
    ["--tokens", 40, "--experts", 32, "--top-k", 4],
    ["--tokens", 1, "--experts", 8, "--top-k", 1, "--tile", 1],
    ["--tokens", 30, "--experts", 64, "--top-k", 64, "--distribution", "round_robin"],
    ["--tokens", 50, "--experts", 16, "--top-k", 3, "--distribution", "zipf", "--zipf-s", 2.0,
     "--drop-fraction", 0.25, "--tile", 8],
    ["--tokens", 25, "--experts", 12, "--top-k", 2, "--distribution", "hot", "--hot-expert", 5,
     "--local-experts", "4:6", "--tile", 4],
    ["--tokens", 20, "--experts", 24, "--top-k", 6, "--distribution", "scores", "--weights",
     "fp32", "--tile", 16],
    ["--tokens", 9, "--experts", 16, "--top-k", 4, "--drop-fraction", 1.0],
]


@pytest.mark.parametrize("args", ROUTE_CASES, ids=lambda a: " ".join(map(str, a)))
def test_route_file_layout_satisfies_the_invariants(moefin, tmp_path, args):
    path = tmp_path / "route.h5"
    run(moefin, "route", *args, "--out", path)
    with h5py.File(path, "r") as f:
        g = f["route"]
        assert g.attrs["kind"] == "arrays"
        ids, e2p, total = check_layout(g)
        w32, w16 = g["weights_fp32"][()], g["weights_bf16"][()]
        np.testing.assert_array_equal(w16, f32_to_bf16(w32))
        if g.attrs["renormalize"] == "true":
            np.testing.assert_allclose(w32.astype(np.float64).sum(axis=1), 1.0, atol=1e-6)
        if g.attrs["distribution"] == "hot":
            assert ((ids == int(g.attrs["hot_expert"])).sum(axis=1) == 1).all()
        if g.attrs["distribution"] == "round_robin":
            T, K, E = ids.shape[0], ids.shape[1], int(g.attrs["experts"])
            np.testing.assert_array_equal(ids.ravel(), np.arange(T * K) % E)
        if float(g.attrs["drop_fraction"]) == 1.0:
            assert total == 0 and (e2p == -1).all()
        if g.attrs["distribution"] == "scores":
            scores = g["scores"][()]
            # top-K by score, ties to the lower id; renormalized softmax over the K.
            order = np.lexsort((np.arange(scores.shape[1])[None, :].repeat(len(scores), 0),
                                -scores), axis=1)[:, : ids.shape[1]]
            np.testing.assert_array_equal(ids, order)
            top = np.take_along_axis(scores.astype(np.float64), ids, axis=1)
            p = np.exp(top - top[:, :1])
            np.testing.assert_allclose(w32, p / p.sum(axis=1, keepdims=True), rtol=2e-7)


def recompute_finalize(f):
    """The finalize from the stored arrays, in numpy float32, k ascending."""
    r, g = f["route"], f["finalize"]
    H, Hp = int(g.attrs["hidden"]), int(g.attrs["hidden_padded"])
    e2p = r["expanded_to_permuted"][()]
    T, K = e2p.shape
    weights = g.attrs["weights"]
    if weights == "bf16":
        w = bf16_to_f32(r["weights_bf16"][()])
    elif weights == "fp32":
        w = r["weights_fp32"][()].astype(np.float32)
    else:
        w = np.ones((T, K), np.float32)
    gemm_out = g["gemm_out"][()]
    assert gemm_out.shape == (int(r["total_padded_rows"][0]), Hp)
    fp8 = g.attrs["variant"] == "deepseek_fp8"
    acc = np.zeros((T, H), np.float32)
    for k in range(K):
        rows = e2p[:, k]
        live = rows >= 0
        x = bf16_to_f32(gemm_out[rows[live], :H])
        assert not np.isnan(x).any(), "finalize inputs are never poisoned rows or columns"
        if fp8:
            s = g["in_scales"][()][rows[live]][:, np.arange(H) // 128].astype(np.float32)
            x = s * x
        acc[live] = acc[live] + w[live, k][:, None] * x
    return acc, gemm_out, e2p, H, Hp


FINALIZE_CASES = [
    ["--weights", "bf16"],
    ["--weights", "fp32", "--hidden", 300, "--hidden-padded", 320, "--drop-fraction", 0.3],
    ["--weights", "none", "--hidden", 77, "--top-k", 1, "--tokens", 1],
    ["--weights", "bf16", "--top-k", 64, "--experts", 64, "--hidden", 136, "--distribution",
     "round_robin"],
    ["--weights", "bf16", "--drop-fraction", 1.0, "--hidden", 64],
    ["--fp8", "--weights", "bf16", "--hidden", 260, "--hidden-padded", 264, "--drop-fraction",
     0.25],
    ["--fp8", "--weights", "fp32", "--hidden", 384, "--distribution", "zipf"],
]


@pytest.mark.parametrize("args", FINALIZE_CASES, ids=lambda a: " ".join(map(str, a)))
def test_reference_finalize_is_recomputed_bitwise_from_the_stored_arrays(moefin, tmp_path, args):
    path = tmp_path / "finalize.h5"
    options = {"--tokens": 12, "--experts": 32, "--top-k": 6, "--hidden": 256}
    flags = []
    for i, a in enumerate(args):
        if str(a).startswith("--") and (i + 1 == len(args) or str(args[i + 1]).startswith("--")):
            flags.append(a)
        elif str(a).startswith("--"):
            options[a] = args[i + 1]
    run(moefin, "reference", "finalize", *[w for kv in options.items() for w in kv], *flags,
        "--out", path)
    with h5py.File(path, "r") as f:
        check_layout(f["route"])
        g = f["finalize"]
        assert g.attrs["kind"] == "arrays"
        acc, gemm_out, e2p, H, Hp = recompute_finalize(f)
        used = np.zeros(gemm_out.shape[0], bool)
        used[e2p[e2p >= 0]] = True
        assert (gemm_out[~used] == POISON_BF16).all(), "padding rows are poisoned"
        assert (gemm_out[:, H:] == POISON_BF16).all(), "padding columns are poisoned"
        assert (gemm_out[used, :H] != 0).all(), "inputs are never zero"
        exact = g["out_exact"][()]
        if g.attrs["variant"] == "bf16":
            out = g["out"][()]
            assert out.dtype == np.uint16 and out.shape == acc.shape
            np.testing.assert_array_equal(out, f32_to_bf16(acc))
            decoded = bf16_to_f32(out).astype(np.float64)
            # bf16 keeps 8 significant bits: at most half a step (2^-8 relative) off the exact
            # sum, plus the fp32 summation's error.
            assert (np.abs(decoded - exact) <= 2.0**-8 * np.abs(exact) + 1e-6).all()
        else:
            out, scales = g["out"][()], g["out_scales"][()]
            assert out.dtype == np.uint8 and scales.shape == (acc.shape[0], -(-H // 128))
            blocks = np.arange(H) // 128
            amax = np.zeros_like(scales)
            np.maximum.at(amax, (slice(None), blocks), np.abs(acc))
            want_scales = np.where(amax == 0, np.float32(1), amax / np.float32(448))
            np.testing.assert_array_equal(scales, want_scales.astype(np.float32))
            q = f32_to_e4m3(acc / scales[:, blocks])
            np.testing.assert_array_equal(out, q)
            decoded = e4m3_to_f64(out) * scales[:, blocks]
            tol = 2.0**-4 * np.abs(exact) * (1 + 1e-6) + 2.0**-10 * scales[:, blocks] + 1e-6
            assert (np.abs(decoded - exact) <= tol).all()
        assert float(g.attrs["max_abs_err"]) == pytest.approx(np.abs(decoded - exact).max())
        if float(f["route"].attrs["drop_fraction"]) == 1.0:
            assert (exact == 0).all()


def test_reference_finalize_on_a_route_file_uses_its_routing(moefin, tmp_path):
    route, fin = tmp_path / "r.h5", tmp_path / "f.h5"
    run(moefin, "route", "--tokens", 7, "--experts", 20, "--top-k", 5, "--distribution", "zipf",
        "--local-experts", "3:12", "--tile", 8, "--out", route)
    run(moefin, "reference", "finalize", "--routing", route, "--hidden", 96, "--out", fin)
    with h5py.File(route, "r") as a, h5py.File(fin, "r") as b:
        for name in ("expert_ids", "expanded_to_permuted", "weights_bf16", "cta_to_expert"):
            np.testing.assert_array_equal(a["route"][name][()], b["route"][name][()])
        acc, *_ = recompute_finalize(b)
        np.testing.assert_array_equal(b["finalize"]["out"][()], f32_to_bf16(acc))


def test_e4m3_encoder_here_agrees_with_its_definition():
    """The numpy encoder above is the oracle of the FP8 test: pin it on known values."""
    x = np.array([0.0, 2.0**-10, 1.5 * 2.0**-9, 448.0, 464.0, 500.0, -3.0, 1.0625, 1.1875])
    np.testing.assert_array_equal(f32_to_e4m3(x),
                                  [0x00, 0x00, 0x02, 0x7E, 0x7E, 0x7E, 0xC4, 0x38, 0x3A])
