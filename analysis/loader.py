"""Reading and validating result files against the schema of data/README.md.

Every problem with a file becomes one ResultFileError naming it; nothing half-read leaks out.
"""
import json
import pathlib

import h5py
import numpy as np

from .errors import ResultFileError
from .frame import Frame

SCHEMA = "moefin-results/1"
STORE_FIELDS = ("key", "sample_offset", "sample_count")
SUFFIXES = (".h5", ".hdf5")

# The columns this package reads from each experiment table (data/README.md, "Experiment
# tables"), with their kind: i = int64, f = float64, s = fixed-length string. Writers may add
# columns; a table that lacks one of these cannot be analysed and is rejected.
REQUIRED_COLUMNS = {
    "finalize_sweep": {"H": "i", "T": "i", "K": "i", "weights": "s", "mode": "s", "l2": "s",
                       "variant": "s", "dispatch": "s", "in_regime": "i", "median_us": "f",
                       "min_us": "f", "speedup_vs_scalar": "f", "bytes": "i"},
    "launch_floor": {"mode": "s", "median_us": "f"},
    "copy_bandwidth": {"bytes": "i", "gbps": "f"},
    "finalize_check": {"variant": "s", "H": "i", "T": "i", "K": "i", "weights": "s",
                       "routing": "s", "rel_err": "f", "unwritten": "i", "nan": "i", "pass": "i"},
    "layer_sweep": {"shape": "s", "H": "i", "E": "i", "K": "i", "T": "i", "finalize": "s",
                    "placement": "s", "median_us": "f", "min_us": "f"},
    "equivalence": {"shape": "s", "T": "i", "preset": "s", "routings": "i", "mismatches": "i",
                    "max_rel_err": "f"},
    "race_matrix": {"preset": "s", "triggers": "s", "meta": "s", "delay_ns": "i",
                    "delayed_kernel": "s", "iterations": "i", "mismatches": "i",
                    "stale_reads": "i", "verifier": "s"},
    "pdl_probe": {"chain": "s", "launch": "s", "delay_ns": "i", "iterations": "i",
                  "stale_pre_wait": "i", "stale_post_wait": "i"},
}

TIMELINE_FIELDS = ("kernel", "cta", "start_ns", "wait_ns", "trigger_ns", "end_ns")


class Timeline:
    """Per-CTA stamps of one instrumented run or simulated schedule (an `arrays` group)."""

    def __init__(self, group, kernels, stamps, attrs):
        self.group = group
        self.kernels = kernels  # names, indexed by the `kernel` column
        self.stamps = stamps  # field -> int64 array, one entry per CTA
        self.attrs = attrs

    def __len__(self):
        return len(self.stamps["kernel"])


class ResultFile:
    """One validated result file: provenance, experiment tables, timelines, other groups."""

    def __init__(self, path, provenance, tables, timelines, other_groups):
        self.path = str(path)
        self.provenance = provenance
        self.tables = tables  # group name -> Frame
        self.timelines = timelines  # list of Timeline
        self.other_groups = other_groups  # group names this package does not read

    @property
    def arch_key(self):
        return (self.provenance["arch"], self.provenance["gpu_name"])


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.shape == ():
        return _text(value[()])
    return str(value)


def _kind_ok(dtype, kind):
    if kind == "i":
        return dtype.kind in "iu"
    if kind == "f":
        return dtype.kind == "f"
    return dtype.kind in "SU"


def _read_table(path, name, group):
    for member in ("table", "samples"):
        if member not in group or not isinstance(group[member], h5py.Dataset):
            raise ResultFileError(path, f"table /{name} has no '{member}' dataset")
    ds = group["table"]
    if ds.ndim != 1 or ds.dtype.names is None:
        raise ResultFileError(path, f"/{name}/table is not a 1-D compound dataset")
    if tuple(ds.dtype.names[:3]) != STORE_FIELDS:
        raise ResultFileError(path, f"/{name}/table does not start with fields "
                                    f"{', '.join(STORE_FIELDS)}")
    if group["samples"].ndim != 1 or group["samples"].dtype.kind != "f":
        raise ResultFileError(path, f"/{name}/samples is not a 1-D float dataset")
    try:
        rows = ds[()]
        samples = np.asarray(group["samples"][()], dtype=np.float64)
    except (OSError, RuntimeError, ValueError) as e:
        raise ResultFileError(path, f"cannot read /{name} (truncated or damaged?): {e}") from None
    columns = {}
    for field in ds.dtype.names:
        col = rows[field]
        if col.dtype.kind == "S":
            col = np.char.decode(col, "utf-8")
        columns[field] = np.asarray(col)
    for field, kind in REQUIRED_COLUMNS.get(name, {}).items():
        if field not in columns:
            raise ResultFileError(path, f"table /{name} lacks column '{field}'")
        if not _kind_ok(columns[field].dtype, kind):
            raise ResultFileError(path, f"/{name} column '{field}' has type "
                                        f"{columns[field].dtype}, expected "
                                        f"{ {'i': 'int', 'f': 'float', 's': 'string'}[kind]}")
    off, cnt = columns["sample_offset"], columns["sample_count"]
    if len(off) and (off.min() < 0 or cnt.min() < 0 or (off + cnt).max() > len(samples)):
        raise ResultFileError(path, f"/{name}: rows point past the {len(samples)} raw samples "
                                    f"(truncated?)")
    keys = columns["key"]
    if len(set(keys.tolist())) != len(keys):
        raise ResultFileError(path, f"/{name}: duplicate configuration keys")
    per_row = [samples[o:o + c] for o, c in zip(off.tolist(), cnt.tolist())]
    return Frame(columns, per_row)


def _parse_kernel_names(text, count):
    text = text.strip()
    if text.startswith("["):
        try:
            names = [str(n) for n in json.loads(text)]
        except json.JSONDecodeError:
            names = []
    else:
        names = [n.strip() for n in text.split(",") if n.strip()]
    while len(names) < count:
        names.append(f"kernel {len(names)}")
    return names


def _read_timeline(path, name, group, attrs):
    stamps = {}
    try:
        for field in TIMELINE_FIELDS:
            ds = group[field]
            if ds.ndim != 1 or ds.dtype.kind not in "iu":
                raise ResultFileError(path, f"timeline /{name}/{field} is not a 1-D int array")
            stamps[field] = np.asarray(ds[()], dtype=np.int64)
    except (OSError, RuntimeError, ValueError) as e:
        raise ResultFileError(path, f"cannot read /{name} (truncated or damaged?): {e}") from None
    if len({len(a) for a in stamps.values()}) != 1:
        raise ResultFileError(path, f"timeline /{name}: arrays of different lengths")
    kernel = stamps["kernel"]
    count = int(kernel.max()) + 1 if len(kernel) else 0
    if len(kernel) and kernel.min() < 0:
        raise ResultFileError(path, f"timeline /{name}: negative kernel index")
    names = _parse_kernel_names(attrs.get("kernels", ""), count)
    return Timeline(name, names, stamps, attrs)


def load_result_file(path):
    """Opens, validates and reads one result file; raises ResultFileError naming it."""
    path = pathlib.Path(path)
    if not path.is_file():
        raise ResultFileError(path, "cannot open for reading (missing or not a file)")
    try:
        with open(path, "rb"):
            pass
    except OSError:
        raise ResultFileError(path, "cannot open for reading (permission denied?)") from None
    if not h5py.is_hdf5(path):
        raise ResultFileError(path, "not an HDF5 file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ResultFileError(path, f"HDF5 library cannot open it (truncated or damaged?): "
                                    f"{str(e).splitlines()[0]}") from None
    with f:
        try:
            provenance = {k: _text(v) for k, v in f.attrs.items()}
            group_names = list(f.keys())
        except (OSError, RuntimeError) as e:
            raise ResultFileError(path, f"cannot read the root group (truncated or damaged?): "
                                        f"{e}") from None
        schema = provenance.get("moefin_schema")
        if schema is None:
            raise ResultFileError(path, "not a moefin result file (no moefin_schema attribute)")
        if schema != SCHEMA:
            raise ResultFileError(path, f"unsupported schema '{schema}' (this analysis reads "
                                        f"{SCHEMA})")
        for attr in ("arch", "gpu_name"):
            if attr not in provenance:
                raise ResultFileError(path, f"no '{attr}' root attribute (the architecture key)")
        tables, timelines, other = {}, [], []
        for name in group_names:
            try:
                group = f[name]
                attrs = {k: _text(v) for k, v in group.attrs.items()}
            except (OSError, RuntimeError, KeyError) as e:
                raise ResultFileError(path, f"cannot read /{name} (truncated or damaged?): "
                                            f"{e}") from None
            if not isinstance(group, h5py.Group):
                other.append(name)
                continue
            kind = attrs.get("kind")
            if kind == "table":
                tables[name] = _read_table(path, name, group)
            elif kind == "arrays":
                if all(field in group for field in TIMELINE_FIELDS):
                    timelines.append(_read_timeline(path, name, group, attrs))
                else:
                    other.append(name)
            else:
                raise ResultFileError(path, f"group /{name} has kind {kind!r}, expected "
                                            f"'table' or 'arrays'")
    return ResultFile(path, provenance, tables, timelines, other)


def discover(paths):
    """Expands files and directories (searched recursively for *.h5, *.hdf5) into file paths.

    A named file is taken whatever its suffix, so that a wrong file is reported, not skipped.
    """
    out = []
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.suffix in SUFFIXES and q.is_file()))
        elif p.exists():
            out.append(p)
        else:
            raise ResultFileError(p, "no such file or directory")
    seen, unique = set(), []
    for p in out:
        r = p.resolve()
        if r not in seen:
            seen.add(r)
            unique.append(p)
    return unique
