"""The tables published with the seed change (data/published/*.csv), as per-architecture columns.

The CSVs start with comment lines ('#') naming their source; those lines are kept so the report
can cite them.
"""
import csv
import pathlib

from .errors import ResultFileError
from .merging import Column

FILES = {
    "finalize": ("finalize_only_speedup.csv", ("topk", "arch", "sm", "median_speedup",
                                               "min_speedup")),
    "notes": ("finalize_only_notes.csv", ("topk", "statement")),
    "whole_op": ("whole_op_speedup.csv", ("shape", "hidden", "experts", "topk", "tokens", "arch",
                                          "sm", "speedup")),
    "pdl": ("pdl_ordering_speedup.csv", ("shape", "hidden", "experts", "topk", "tokens", "arch",
                                         "sm", "speedup")),
}


class Published:
    def __init__(self):
        self.columns = []  # Column per published architecture, by SM number
        self.finalize = {}  # (topk, Column.key) -> (median, min)
        self.notes = {}  # topk (str, "other" included) -> statement
        self.whole_op = []  # dicts: H, E, K, T, shape, activation, column, speedup (None = "-")
        self.pdl = []  # same, for the PDL-ordering changes
        self.sources = {}  # file name -> its comment lines
        self.missing = []  # expected files that are not there

    def column(self, arch, sm):
        key = ("published", arch, int(sm))
        for c in self.columns:
            if c.key == key:
                return c
        c = Column(label=f"{arch} (SM{int(sm)})", sm=int(sm), source="published", key=key,
                   slug=f"pub_{arch.lower()}_sm{int(sm)}")
        self.columns.append(c)
        return c


def _read_csv(path, required):
    comments, lines = [], []
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ResultFileError(path, f"cannot read: {e}") from None
    for line in text.splitlines():
        if line.startswith("#"):
            comments.append(line[1:].strip())
        elif line.strip():
            lines.append(line)
    if not lines:
        raise ResultFileError(path, "no header line")
    rows = list(csv.DictReader(lines))
    header = next(csv.reader(lines[:1]))
    for col in required:
        if col not in header:
            raise ResultFileError(path, f"no '{col}' column (header: {','.join(header)})")
    return comments, rows


def _number(path, row, col, cast=float, empty_ok=False):
    text = (row.get(col) or "").strip()
    if not text and empty_ok:
        return None
    try:
        return cast(text)
    except ValueError:
        raise ResultFileError(path, f"column '{col}': '{text}' is not a number") from None


def load_published(directory):
    """Reads the published CSVs of `directory`; files that are not there are listed as missing."""
    pub = Published()
    directory = pathlib.Path(directory)
    for what, (name, required) in FILES.items():
        path = directory / name
        if not path.is_file():
            pub.missing.append(name)
            continue
        comments, rows = _read_csv(path, required)
        pub.sources[name] = comments
        for row in rows:
            if what == "notes":
                pub.notes[row["topk"].strip()] = row["statement"].strip()
                continue
            col = pub.column(row["arch"].strip(), _number(path, row, "sm", int))
            if what == "finalize":
                k = _number(path, row, "topk", int)
                pub.finalize[(k, col.key)] = (_number(path, row, "median_speedup"),
                                              _number(path, row, "min_speedup"))
            else:
                entry = {"shape": row["shape"].strip(), "H": _number(path, row, "hidden", int),
                         "E": _number(path, row, "experts", int),
                         "K": _number(path, row, "topk", int),
                         "T": _number(path, row, "tokens", int),
                         "activation": (row.get("activation") or "").strip(), "column": col,
                         "speedup": _number(path, row, "speedup", empty_ok=True)}
                (pub.whole_op if what == "whole_op" else pub.pdl).append(entry)
    pub.columns.sort(key=lambda c: c.sort_key())
    return pub
