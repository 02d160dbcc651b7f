"""`moefin sweep gemm`, `moefin sweep routing` and the fp4 layout flags of `moefin sweep layer`
without a GPU: bad flags are one-line usage errors (exit 2) naming the flag, bad files one-line
file errors (exit 1), and the estimate counts the configurations the flags select."""
import re

import pytest

from conftest import ROOT, run

USAGE = [
    (("sweep", "gemm", "--tokens", "0"), "--tokens"),
    (("sweep", "gemm", "--formats", "int8"), "--formats"),
    (("sweep", "gemm", "--variants", "tiled", "--formats", "fp4"), "--variants/--formats"),
    (("sweep", "gemm", "--ctas-per-sm", "9"), "--ctas-per-sm"),
    (("sweep", "gemm", "--check-tokens", "99"), "--check-tokens"),
    (("sweep", "gemm", "--shapes", "H100/I1/E1/top-2"), "H100/I1/E1/top-2"),
    (("sweep", "gemm", "--candidates", "ks3"), "--candidates"),
    (("sweep", "gemm", "--candidates", "cta2+ks4+ks8"), "--candidates"),
    (("sweep", "gemm", "--candidates", "ks4,ks4"), "--candidates"),
    (("sweep", "gemm", "--candidates", "ks4", "--variants", "tiled"), "--candidates"),
    (("sweep", "routing", "--impls", "nope"), "--impls"),
    (("sweep", "routing", "--tokens", "0"), "--tokens"),
    (("sweep", "routing", "--tile", "0"), "--tile"),
    (("sweep", "layer", "--fp4-scales", "columns"), "--fp4-scales"),
    (("sweep", "layer", "--fp4-values", "bytes"), "--fp4-values"),
    (("sweep", "layer", "--fp4-scales", "rowmajor", "--fp4-values", "packed"),
     "--fp4-scales tiled"),
    (("sweep", "layer", "--fp4-gemm", "wide", "--fp4-values", "nibbles"), "--fp4-gemm wide"),
    (("sweep", "layer", "--fp4-gemm", "wide", "--fp4-scales", "rowmajor"), "--fp4-gemm wide"),
    (("sweep", "layer", "--fp4-gemm", "double"), "--fp4-gemm"),
    (("sweep", "layer", "--fp4-values", "tiles", "--fp4-gemm", "single"), "--fp4-values tiles"),
    (("sweep", "layer", "--fp4-values", "tiles", "--fp4-scales", "rowmajor"),
     "--fp4-scales tiled"),
    (("sweep", "gemm", "--candidates", "tiles+wide"), "--candidates"),
    (("sweep", "gemm", "--candidates", "cta2+wide+lean"), "--candidates"),
    (("sweep", "gemm", "--candidates", "wide+wpack"), "--candidates"),
]


@pytest.mark.parametrize("args,names", USAGE, ids=[" ".join(a[1:]) for a, _ in USAGE])
def test_bad_flags_are_one_line_usage_errors(moefin, args, names):
    # sweep gemm checks its flags before --estimate, sweep layer before --list; sweep routing
    # before it looks for a device.
    extra = {"gemm": ["--estimate"], "layer": ["--list"]}.get(args[1], [])
    proc = run(moefin, *args, *extra, check=False)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and names in lines[0], proc.stderr


@pytest.mark.parametrize("flags", [("--fp4-scales", "rowmajor"), ("--fp4-values", "nibbles"),
                                   ("--fp4-values", "packed"), ("--fp4-values", "tiles"),
                                   ("--fp4-gemm", "wide"),
                                   ("--fp4-gemm", "single"),
                                   ("--fp4-scales", "rowmajor", "--fp4-gemm", "single")])
def test_layout_flags_are_accepted_and_leave_the_rows_alone(moefin, flags):
    # (--fp4-gemm wide needs packed or tiled values, the default with tiled scales; single goes
    # with any but tiles, and alone takes packed values.)
    # Unset, the values are tiles with tiled scales and nibbles with row-major ones
    # (fp4::chain_value_layout), so row-major scales alone are no error; the rows do not change.
    # The listing does not name the layout: which one runs is test_fp4's rule and, on a GPU,
    # test_chain_equivalence's default.
    assert run(moefin, "sweep", "layer", *flags, "--list").stdout == \
        run(moefin, "sweep", "layer", "--list").stdout


@pytest.mark.parametrize("command", ["gemm", "routing"])
def test_unreadable_result_files_are_file_errors(moefin, tmp_path, command):
    junk = tmp_path / "junk.h5"
    junk.write_text("not hdf5")
    # Another experiment's file (the finalize sweep has a /copy_bandwidth of other columns):
    # refused whole, no half-printed table before the error.
    other = ROOT / "data" / "h200" / "h200_finalize_sweep.h5"
    for path, what in [(tmp_path / "missing.h5", "cannot open"), (junk, "not an HDF5 file"),
                       (other, f"no table for experiment '{command}_sweep'")]:
        proc = run(moefin, "sweep", command, "--print", path, check=False)
        assert proc.returncode == 1, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and str(path) in lines[0] and what in lines[0], proc.stderr
        assert proc.stdout == "", proc.stdout


def test_the_estimate_counts_the_selected_configurations(moefin):
    def counts(*flags):
        out = run(moefin, "sweep", "gemm", "--estimate", *flags).stdout
        m = re.search(r"(\d+) shapes x (\d+) token counts x (\d+) configurations", out)
        assert m, out
        return tuple(int(g) for g in m.groups())

    full = counts()
    assert full[0] == 3 and full[1] == 16
    # Fewer formats, variants or modes: fewer configurations; bf16 alone keeps tiled.
    fp4 = counts("--formats", "fp4")
    bf16 = counts("--formats", "bf16")
    assert fp4[2] < bf16[2] < full[2] and fp4[2] + bf16[2] == full[2]
    assert counts("--shapes", "top-8", "--tokens", "1,4")[:2] == (1, 2)
    assert counts("--modes", "isolated")[2] < full[2]


def test_candidates_add_configurations_and_name_the_ones_a_shape_cannot_run(moefin):
    def run_estimate(*flags):
        return run(moefin, "sweep", "gemm", "--estimate", "--shapes", "top-22", *flags).stdout

    def configs(out):
        return int(re.search(r"x (\d+) configurations", out).group(1))

    plain = run_estimate()
    # ks4: GEMM1/GEMM2 x bf16/fp4 x isolated/pdl; loads+cta2: isolated only; read: one per pair.
    more = run_estimate("--candidates", "ks4,loads+cta2", "--read-floor")
    assert configs(more) == configs(plain) + 8 + 4 + 4
    # fp4 GEMM2 of top-22 has 10 k steps (k = 1280): ks4 is skipped there, and said so once.
    skipped = [line for line in more.splitlines() if "skipped" in line]
    assert len(skipped) == 1 and "gemm2 fp4 sk+ks4" in skipped[0] and "10 k steps" in skipped[0]
