"""Merging result files into per-architecture results.

The architecture key of a file is its root attributes (arch, gpu_name): two GPUs of one
compute capability (an H100 and an H200) stay separate columns. Files of one key are merged
table by table. A row's identity is its configuration key *and* the condition its file was
measured under (the root attributes of CONDITION_ATTRS, e.g. the shared-memory carveout of a
race matrix): rows of two conditions stand side by side (column `condition` of the merged
table), and only when two files hold the same key under the same condition does the later run
(root attribute date_utc) win; the report counts those replaced rows. Tables of PER_RUN_GROUPS
keep every file's rows: their keys do not name the run's size (routings, reference checks).
"""
import pathlib
import re
from dataclasses import dataclass, field

import numpy as np

from .derived import with_stored_statistics
from .frame import Frame

# Root attributes that describe how a file's rows were measured rather than where; rows differing
# in them are different measurements of one configuration.
CONDITION_ATTRS = ("ctas_per_sm", "carveout", "launch")
NOT_RECORDED = "not recorded"
# Groups whose rows are kept per file: `moefin equivalence` keys name shape, tokens, preset and
# delay, not how many routings were run or whether the output was checked against the reference.
PER_RUN_GROUPS = ("equivalence",)


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
    conditions: dict = field(default_factory=dict)  # group -> condition labels, in run order
    condition_of: dict = field(default_factory=dict)  # (group, file path) -> condition label

    def table(self, group):
        """The merged table, or None when no file of this architecture has it."""
        return self.tables.get(group)

    def provenance_values(self, attr):
        return sorted({f.provenance.get(attr, "?") for f in self.files})


def condition_values(f):
    """The file's value of each condition attribute ('not recorded' when it has none)."""
    return {a: f.provenance.get(a, NOT_RECORDED) for a in CONDITION_ATTRS}


def shared_conditions(result, group):
    """['launch=graph', ...]: the condition attributes every file of `group` records alike
    (group 'timelines': the files holding timelines)."""
    files = [f for f in result.files
             if (f.timelines if group == "timelines" else group in f.tables)]
    shared = []
    for a in CONDITION_ATTRS:
        values = {f.provenance.get(a) for f in files}
        if len(values) == 1 and None not in values:
            shared.append(f"{a}={values.pop()}")
    return shared


def condition_labels(group, files):
    """{file path: label} for the files holding `group`: the condition attributes that differ
    between those files, 'carveout=max-shared'; '' when they agree. Per-run groups add the
    file name, since each file is a run of its own."""
    values = {f.path: condition_values(f) for f in files}
    varying = [a for a in CONDITION_ATTRS if len({v[a] for v in values.values()}) > 1]
    labels = {}
    for f in files:
        parts = [f"{a}={values[f.path][a]}" for a in varying]
        if group in PER_RUN_GROUPS and len(files) > 1:
            parts.insert(0, pathlib.Path(f.path).stem)
        labels[f.path] = ", ".join(parts)
    return labels


def _merge_group(frames_latest_first, labels_latest_first):
    """Rows of all files, a `condition` column added; of rows with one key and one condition the
    latest file's is kept. Returns (frame, replaced rows)."""
    parts = []
    for frame, label in zip(frames_latest_first, labels_latest_first):
        if frame is None:
            continue
        cols = dict(frame.columns)
        cols["condition"] = np.full(len(frame), label, dtype=object).astype(str)
        parts.append(Frame(cols, frame.samples))
    merged = Frame.concat(parts)
    if len(merged) == 0:
        return merged, 0
    identity = np.char.add(np.char.add(merged["condition"].astype(str), "\x1f"),
                           merged["key"].astype(str))
    _, first = np.unique(identity, return_index=True)
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
            holders = [f for f in r.files if g in f.tables]  # in run order
            labels = condition_labels(g, holders)
            r.conditions[g] = list(dict.fromkeys(labels[f.path] for f in holders))
            r.condition_of.update({(g, p): lab for p, lab in labels.items()})
            r.tables[g], n = _merge_group(
                [with_stored_statistics(g, f.tables.get(g)) for f in latest_first],
                [labels.get(f.path, "") for f in latest_first])
            if n:
                r.replaced[g] = n
        r.timelines = [(f.path, t) for f in r.files for t in f.timelines]
        holders = [f for f in r.files if f.timelines]
        r.condition_of.update({("timelines", p): lab
                               for p, lab in condition_labels("timelines", holders).items()})
        results.append(r)
    results.sort(key=lambda r: r.column.sort_key())
    return results
