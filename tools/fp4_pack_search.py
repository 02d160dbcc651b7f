#!/usr/bin/env python3
"""Search the bit layouts of a packed fp4 word (core/fp4.hpp, ValueLayout::kPacked): how few
integer instructions turn one 32-bit word of 8 e2m1 values into its 4 bf16 pairs.

A pair (nibbles i and i + 4 of the word) must end with its 8 bits on TARGET (kPairBits:
(e1 e0 m) at 8..6 and the sign at 15 of both halves) and zeros elsewhere. The family searched,
with the cost of one pair in integer instructions:
  in place   its bits already on TARGET:                     w & TARGET               1
  rotated    its bits on TARGET rotated right by r (1..31):  rotl(w, r) & TARGET      2
  copied     its bits anywhere else: mask them, one multiply adds shifted copies that overlap
             nowhere (no carries) and put exactly one right bit on each TARGET bit:
                                                             ((w & M) * K) & TARGET   3
(two copied pairs may share one mask only if their copies never collide; then they cost 5 for
two, still more than a rotated pair's 2 each). A word costs at least 1 + 2 + 2 + 2 = 7, which
needs the in-place pair and three rotated ones: four disjoint rotations of TARGET that cover the
32 bits. The search shows there are none, and lists every layout of cost 8: the in-place pair,
two rotated ones, and a copied one in the 8 bits left (one multiply, at most 3 shift terms,
left shifts only, since bits pushed past bit 31 vanish).

usage: tools/fp4_pack_search.py [--all]   (--all: every cost-8 layout, not the first 8)
"""

import argparse
import itertools
import sys

TARGET = [6, 7, 8, 15, 22, 23, 24, 31]  # bit b of a pair (low nibble 0..3, high 4..7) lands here


def rotations_tiling():
    """Sets {0, r1, r2, r3} of rotations whose rotated TARGETs are disjoint (cover all 32)."""
    out = []
    t = set(TARGET)
    for rs in itertools.combinations(range(1, 32), 3):
        used = set(t)
        ok = True
        for r in rs:
            s = {(p - r) % 32 for p in TARGET}
            if s & used:
                ok = False
                break
            used |= s
        if ok:
            out.append((0,) + rs)
    return out


def copied_layouts(free):
    """Ways to place a pair on the 8 bits `free` so that ((w & M) * K) & TARGET yields it: a list
    of (sources by pair bit, shifts of K)."""
    out = []
    for perm in itertools.permutations(sorted(free)):
        shifts = [TARGET[b] - perm[b] for b in range(8)]
        if min(shifts) < 0:
            continue
        ks = sorted(set(shifts))
        if len(ks) > 3:
            continue
        landed = {}
        clash = False
        for s in ks:
            for b, q in enumerate(perm):
                at = q + s
                if at > 31:
                    continue
                if at in landed:
                    clash = True  # overlapping copies would add with carries
                    break
                landed[at] = b
            if clash:
                break
        if clash:
            continue
        if all(landed.get(TARGET[b]) == b for b in range(8)):
            out.append((perm, ks))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--all", action="store_true", help="list every cost-8 layout")
    a = ap.parse_args()
    tilings = rotations_tiling()
    print("cost 7 (in place + three rotations): %d layouts%s" % (
        len(tilings), "" if tilings else " -- none exists"))
    for t in tilings:
        print("  rotations", t)
    found = 0
    for r1, r2 in itertools.combinations(range(1, 32), 2):
        sets = [set(TARGET), {(p - r1) % 32 for p in TARGET}, {(p - r2) % 32 for p in TARGET}]
        if sets[0] & sets[1] or sets[0] & sets[2] or sets[1] & sets[2]:
            continue
        free = set(range(32)) - sets[0] - sets[1] - sets[2]
        for perm, ks in copied_layouts(free):
            found += 1
            if a.all or found <= 8:
                mask = sum(1 << q for q in perm)
                mult = sum(1 << s for s in ks)
                print("cost 8: rotations 0, %d, %d; copied pair bits at %s, mask 0x%08X, "
                      "multiply by 0x%X (shifts %s)" % (r1, r2, list(perm), mask, mult, ks))
    print("cost 8 layouts: %d" % found)
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
