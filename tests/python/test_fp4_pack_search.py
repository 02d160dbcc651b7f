"""tools/fp4_pack_search.py (no GPU): no packed-word layout lets all four pairs out by
rotation, and the layout core/fp4.hpp uses is one of the cost-8 layouts the search lists."""
import re
import subprocess
import sys

from conftest import ROOT
from conftest import load_script as load


def test_four_rotations_never_tile_the_word():
    m = load("fp4_pack_search")
    assert m.rotations_tiling() == []


def test_the_header_layout_is_a_cost_8_layout_of_the_search():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "fp4_pack_search.py"), "--all"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "none exists" in r.stdout
    header = (ROOT / "core" / "fp4.hpp").read_text()
    rots = [int(x) for x in re.findall(r"rotl32\(p, (\d+)\)", header)]
    mask = re.search(r"kPackedPair3Mask = (0x[0-9A-Fa-f]+)u", header).group(1)
    shifts = [int(x) for x in re.findall(
        r"kPackedPair3Copies = \(1u << (\d+)\) \| \(1u << (\d+)\) \| \(1u << (\d+)\)",
        header)[0]]
    assert len(rots) == 2
    line = "cost 8: rotations 0, %d, %d; copied pair bits at" % tuple(sorted(rots))
    mult = "multiply by 0x%X (shifts %s)" % (sum(1 << s for s in shifts), sorted(shifts))
    hits = [x for x in r.stdout.splitlines()
            if x.startswith(line) and "mask 0x%08X" % int(mask, 16) in x and mult in x]
    assert len(hits) == 1, r.stdout


def test_a_copied_pair_needs_copies_that_never_overlap():
    m = load("fp4_pack_search")
    # The 8 bits fp4.hpp leaves to pair 3 place it, and so do two nibbles as stored today (the
    # mask-multiply-mask of e2m1_pair_bits); the top byte cannot reach bit 6 with left shifts.
    assert ((3, 4, 0, 1, 19, 20, 16, 17), [3, 8, 14]) in m.copied_layouts(
        {0, 1, 3, 4, 16, 17, 19, 20})
    assert ((0, 1, 2, 3, 16, 17, 18, 19), [6, 12]) in m.copied_layouts(
        {0, 1, 2, 3, 16, 17, 18, 19})
    assert m.copied_layouts(set(range(24, 32))) == []
