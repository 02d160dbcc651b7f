"""PDL facts the report sets beside the measurements: the derived ordering rule of
docs/design/pdl.md for a race-matrix cell, and the H200 table of that page as the chain descriptions
in data/chains/ record it (`source` names the table row, `measured` holds its stale-read counts).
"""
import json
import pathlib
import re

from .errors import ResultFileError

PLACEMENTS = ("entry", "after_wait", "after_writes", "exit")
# a kernel with one of these placements waits before it triggers (exit: the implicit trigger of
# a CTA that waited)
WAIT_BEFORE_TRIGGER = ("after_wait", "after_writes", "exit")
BETWEEN = ("permute", "gemm1", "act", "gemm2")  # the kernels between routing and finalize


def race_cell_rule(triggers, meta):
    """'ordered', 'race' or 'unknown' for one `/race_matrix` cell, by the derived rule of
    docs/design/pdl.md#the-ordering-rule (docs/design/verification.md).

    In a `moefin race` cell every kernel is launched with PDL and waits on every path, and the
    only reads before a wait are finalize's routing metadata (meta=before). Those are ordered
    after routing's writes iff some kernel between routing and finalize waits before it
    triggers; with meta=after every read follows a wait. Routing's own trigger does not matter:
    a trigger publishes nothing."""
    if meta == "after":
        return "ordered"
    placements = {}
    for item in triggers.split(","):
        name, _, where = item.partition("=")
        placements[name.strip()] = where.strip()
    if meta != "before" or any(placements.get(k) not in PLACEMENTS for k in BETWEEN):
        return "unknown"
    return "ordered" if any(placements[k] in WAIT_BEFORE_TRIGGER for k in BETWEEN) else "race"


def probe_signature(chain):
    """('producer triggers at end', (middle triggers before its wait, ...), every kernel with
    PDL) from a `/pdl_probe` chain name such as 'producer -> m1 (after) -> m2 (before) ->
    consumer'; None when the name does not read that way."""
    parts = [p.strip() for p in chain.split("->")]
    if len(parts) < 2 or not parts[0].startswith("producer") or \
            not parts[-1].startswith("consumer"):
        return None
    at_end = "at end" in parts[0] or "after its write" in parts[0]
    middles = []
    for p in parts[1:-1]:
        m = re.search(r"\((?:trigger )?(before|after)\b", p)
        if m is None:
            return None
        middles.append(m.group(1) == "before")
    return at_end, tuple(middles), True


def _chain_signature(kernels):
    """The same signature from a chain description's kernels (producer first, consumer last)."""
    if len(kernels) < 2 or any(len(k.get("paths", [k.get("path")])) != 1 for k in kernels):
        return None
    path = [k.get("path") or k["paths"][0] for k in kernels]
    if any("fence" in op for p in path for op in p):
        return None  # a fence changes the chain; the H200 table has none

    def before(p, first, then):
        ops = [op.split()[0] for op in p]
        return first in ops and then in ops and ops.index(first) < ops.index(then)

    at_end = before(path[0], "write", "trigger")
    middles = tuple(before(p, "trigger", "wait") for p in path[1:-1])
    return at_end, middles, all(k.get("pdl", True) for k in kernels)


class DesignRow:
    """One row of the H200 table of docs/design/pdl.md#measured-on-an-h200."""

    def __init__(self, row, chain_file, description, signature, expected, runs, pre, post):
        self.row = row
        self.chain_file = chain_file
        self.description = description
        self.signature = signature
        self.expected = expected  # the verifier's verdict the chain file records
        self.runs, self.pre, self.post = runs, pre, post  # stale reads before / after the wait


def load_design_table(chains_dir):
    """The H200 table's rows recorded in `chains_dir` (h200_*.json with a `measured`
    block and a source naming 'row N'), ordered by row; [] when the directory is absent."""
    rows = []
    directory = pathlib.Path(chains_dir)
    for path in sorted(directory.glob("*.json")) if directory.is_dir() else []:
        try:
            chain = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ResultFileError(path, f"cannot read the chain description: {e}") from None
        m = re.search(r"H200 table\b.*; row (\d+)", chain.get("source", ""))
        measured = chain.get("measured")
        if m is None or not measured:
            continue
        stale = {r.get("where"): r.get("stale") for r in measured.get("reads", [])}
        rows.append(DesignRow(int(m.group(1)), path.name,
                              chain.get("description", "").split(":")[0].split(". ")[0],
                              _chain_signature(chain.get("kernels", [])),
                              chain.get("expected", "?"), measured.get("runs"),
                              stale.get("before_wait"), stale.get("after_wait")))
    rows.sort(key=lambda r: r.row)
    return rows
