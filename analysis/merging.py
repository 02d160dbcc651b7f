"""Merging result files into per-architecture results.

The architecture key of a file is its root attributes (arch, gpu_name): two GPUs of one
compute capability (an H100 and an H200) stay separate columns. Files of one key are merged
table by table; when two files hold the same configuration key, the later run (root attribute
date_utc) wins and the report counts the replaced rows.
"""
import re
from dataclasses import dataclass, field

import numpy as np

from .frame import Frame


@dataclass(frozen=True)
class Column:
    """One architecture column of the report: measured (from files) or published (CSV)."""
    label: str
    sm: int
    source: str  # "measured" or "published"
    key: tuple
    slug: str

    @property
    def published(self):
        return self.source == "published"

    def sort_key(self):
        return (self.sm, 0 if self.source == "measured" else 1, self.label)


def sm_number(arch):
    """'sm_90' -> 90, 'sm_100a' -> 100; -1 when there is no GPU or the text is unknown."""
    m = re.fullmatch(r"sm_?(\d+)[a-z]?", arch.strip().lower())
    return int(m.group(1)) if m else -1


def measured_column(arch, gpu_name):
    sm = sm_number(arch)
    if gpu_name == "none" or arch == "none":
        return Column("no GPU (host)", -1, "measured", ("measured", arch, gpu_name), "host")
    name = re.sub(r"^NVIDIA\s+", "", gpu_name.strip())
    label = f"{name} (SM{sm})" if sm >= 0 else f"{name} ({arch})"
    slug = re.sub(r"[^a-z0-9]+", "_", f"{name} sm{sm if sm >= 0 else arch}".lower()).strip("_")
    return Column(label, sm, "measured", ("measured", arch, gpu_name), slug)


@dataclass
class ArchResult:
    column: Column
    files: list = field(default_factory=list)
    tables: dict = field(default_factory=dict)  # group -> Frame
    timelines: list = field(default_factory=list)  # (file path, Timeline)
    replaced: dict = field(default_factory=dict)  # group -> rows replaced by a later file

    def table(self, group):
        """The merged table, or None when no file of this architecture has it."""
        return self.tables.get(group)

    def provenance_values(self, attr):
        return sorted({f.provenance.get(attr, "?") for f in self.files})


def _merge_group(frames_latest_first):
    merged = Frame.concat(frames_latest_first)
    if len(merged) == 0:
        return merged, 0
    _, first = np.unique(merged["key"], return_index=True)
    keep = np.zeros(len(merged), dtype=bool)
    keep[first] = True
    return merged.take(keep), int(len(merged) - keep.sum())


def merge(files):
    """ResultFiles -> ArchResults, ordered by SM number then name."""
    by_key = {}
    for order, f in enumerate(files):
        by_key.setdefault(f.arch_key, []).append((f.provenance.get("date_utc", ""), order, f))
    results = []
    for (arch, gpu), entries in by_key.items():
        entries.sort(key=lambda e: (e[0], e[1]))
        latest_first = [e[2] for e in reversed(entries)]
        r = ArchResult(measured_column(arch, gpu), files=[e[2] for e in entries])
        groups = sorted({g for f in latest_first for g in f.tables})
        for g in groups:
            r.tables[g], n = _merge_group([f.tables.get(g) for f in latest_first])
            if n:
                r.replaced[g] = n
        r.timelines = [(f.path, t) for f in r.files for t in f.timelines]
        results.append(r)
    results.sort(key=lambda r: r.column.sort_key())
    return results
