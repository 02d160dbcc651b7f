"""Reading and validating result files against the schema of docs/reference/result-files.md.

Every problem with a file becomes one ResultFileError naming it; nothing half-read leaks out.
Everything is checked before it is read: links are plain (no soft or external links, which can
loop or reach into other files), attributes are scalar strings or numbers, datasets hold no more
elements than their storage in the file can encode, and the file is complete (`moefin_state`).
"""
import json
import os
import pathlib
import re

import h5py
import numpy as np

from .errors import ResultFileError
from .frame import Frame

SCHEMA = "moefin-results/1"
STATE_ATTR = "moefin_state"
STATES = ("complete", "incomplete")
STORE_FIELDS = ("key", "sample_offset", "sample_count")
SUFFIXES = (".h5", ".hdf5")

# What a moefin file holds at most; beyond this a file is damaged or hostile and is rejected before
# anything of that size is allocated (the C++ reader, core/store/hdf5_file.cpp, uses the same).
MAX_ATTR_BYTES = 1 << 20
MAX_ATTRIBUTES = 4096
MAX_MEMBERS = 4096
MAX_COLUMNS = 1024
MAX_STRING_COLUMN = 4096
# zlib's deflate cannot expand data by more than ~1032:1; unfiltered data not at all.
MAX_DEFLATE_RATIO = 1100.0
KNOWN_FILTERS = {1, 2, 3}  # deflate, shuffle, fletcher32

# The columns this package reads from each experiment table (docs/reference/experiment-tables.md,
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

# /layer_sweep `weights_format` (docs/reference/experiment-tables.md): the GEMMs and weights of the
# layer. Files written before the column have none (or empty values): the tiled bf16 GEMM, except
# the torch peer's rows, whose weights are bf16.
WEIGHTS_FORMATS = ("bf16-tiled", "bf16", "fp4")
DEFAULT_WEIGHTS_FORMAT = "bf16-tiled"
# Peer files written before the peer took the chain's shape names end top-22's with its
# activation ("H2048/I1280/E512/top-22/relu2").
ACTIVATIONS = ("swiglu", "relu2")

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


def _hard_member(path, group, name, where):
    """The object `name` of `group` through a plain link; soft and external links are refused."""
    try:
        link = group.get(name, getlink=True)
    except (KeyError, OSError, RuntimeError, ValueError, UnicodeError) as e:
        raise ResultFileError(path, f"cannot read the link {where} (damaged?): "
                                    f"{_first_line(e)}") from None
    if link is None:
        raise ResultFileError(path, f"no object {where}")
    if isinstance(link, h5py.SoftLink):
        raise ResultFileError(path, f"{where} is a soft link (moefin files hold only plain "
                                    f"groups and datasets)")
    if isinstance(link, h5py.ExternalLink):
        raise ResultFileError(path, f"{where} is an external link to {link.filename!r} (moefin "
                                    f"files hold only plain groups and datasets)")
    try:
        return group[name]
    except (KeyError, OSError, RuntimeError, ValueError, UnicodeError) as e:
        raise ResultFileError(path, f"cannot open {where} (damaged?): {_first_line(e)}") from None


def _first_line(e):
    text = str(e).strip().splitlines()
    return text[0][:200] if text else type(e).__name__


def _names(path, group, where):
    try:
        names = list(group.keys())
    except (KeyError, OSError, RuntimeError, ValueError) as e:
        raise ResultFileError(path, f"cannot list {where} (damaged?): {_first_line(e)}") from None
    except UnicodeError:
        raise ResultFileError(path, f"{where} has a member name that is not UTF-8") from None
    if len(names) > MAX_MEMBERS:
        raise ResultFileError(path, f"{where} has {len(names)} members (at most {MAX_MEMBERS})")
    if not all(isinstance(n, str) for n in names):
        raise ResultFileError(path, f"{where} has a member name that is not UTF-8")
    return names


def _attrs(path, obj, where):
    """The attributes of an object as text, each checked to be a scalar string or number."""
    try:
        names = list(obj.attrs.keys())
    except (KeyError, OSError, RuntimeError, ValueError) as e:
        raise ResultFileError(path, f"cannot list the attributes of {where} (damaged?): "
                                    f"{_first_line(e)}") from None
    except UnicodeError:
        raise ResultFileError(path, f"{where} has an attribute name that is not UTF-8") from None
    if len(names) > MAX_ATTRIBUTES:
        raise ResultFileError(path, f"{where} has {len(names)} attributes (at most "
                                    f"{MAX_ATTRIBUTES})")
    if not all(isinstance(n, str) for n in names):
        raise ResultFileError(path, f"{where} has an attribute name that is not UTF-8")
    out = {}
    for name in names:
        what = f"attribute '{name[:80]}' of {where}"
        try:
            aid = h5py.h5a.open(obj.id, name.encode("utf-8"))
            shape, dtype = aid.shape, aid.dtype
        except (KeyError, OSError, RuntimeError, ValueError, TypeError) as e:
            raise ResultFileError(path, f"cannot open {what} (damaged?): "
                                        f"{_first_line(e)}") from None
        if shape not in ((), (1,)):
            count = int(np.prod(shape)) if shape is not None else 0
            raise ResultFileError(path, f"{what} is an array of {count} values (expected a "
                                        f"single string)")
        if dtype.kind not in "SUOiuf" or dtype.names is not None or dtype.subdtype is not None:
            raise ResultFileError(path, f"{what} is neither a string nor a number "
                                        f"(dtype {dtype})")
        if dtype.kind in "SU" and dtype.itemsize > MAX_ATTR_BYTES:
            raise ResultFileError(path, f"{what} is a string of {dtype.itemsize} bytes (at most "
                                        f"{MAX_ATTR_BYTES})")
        try:
            value = obj.attrs[name]
        except UnicodeError:
            raise ResultFileError(path, f"{what} is not valid UTF-8") from None
        except (KeyError, OSError, RuntimeError, ValueError, TypeError) as e:
            raise ResultFileError(path, f"cannot read {what} (damaged?): "
                                        f"{_first_line(e)}") from None
        if isinstance(value, np.ndarray):
            value = value.reshape(-1)[0] if value.size else ""
        if isinstance(value, bytes):
            try:
                value = value.decode("utf-8")
            except UnicodeError:
                raise ResultFileError(path, f"{what} is not valid UTF-8") from None
        text = _text(value)
        if len(text) > MAX_ATTR_BYTES:
            raise ResultFileError(path, f"{what} is longer than {MAX_ATTR_BYTES} bytes")
        out[name] = text
    return out


def _check_extent(path, ds, where):
    """Before a dataset is read: its elements must fit in the storage the file gives it."""
    try:
        size = int(ds.size) if ds.shape is not None else 0
        itemsize = ds.dtype.itemsize
        stored = ds.id.get_storage_size()
        dcpl = ds.id.get_create_plist()
        filters = [dcpl.get_filter(i)[0] for i in range(dcpl.get_nfilters())]
    except (OSError, RuntimeError, ValueError, TypeError) as e:
        raise ResultFileError(path, f"cannot read the layout of {where} (damaged?): "
                                    f"{_first_line(e)}") from None
    unknown = [f for f in filters if f not in KNOWN_FILTERS]
    if unknown:
        raise ResultFileError(path, f"{where} uses the HDF5 filter {unknown[0]} (moefin reads "
                                    f"deflate, shuffle and fletcher32 only)")
    if size == 0:
        return
    file_size = os.path.getsize(path)
    if stored > file_size:
        raise ResultFileError(path, f"{where} claims {stored} stored bytes in a file of "
                                    f"{file_size} (truncated or damaged?)")
    ratio = MAX_DEFLATE_RATIO if filters else 1.0
    if size * itemsize > ratio * stored:
        raise ResultFileError(path, f"{where} claims {size} elements ({size * itemsize} bytes) "
                                    f"but stores {stored} bytes (damaged?)")


def _read(path, ds, where):
    _check_extent(path, ds, where)
    try:
        return ds[()]
    except (OSError, RuntimeError, ValueError, TypeError) as e:
        raise ResultFileError(path, f"cannot read {where} (truncated or damaged?): "
                                    f"{_first_line(e)}") from None
    except MemoryError:
        raise ResultFileError(path, f"cannot allocate {where}") from None


def _kind_ok(dtype, kind):
    if kind == "i":
        return dtype.kind in "iu"
    if kind == "f":
        return dtype.kind == "f"
    return dtype.kind in "SU"


def _read_table(path, name, group):
    members = _names(path, group, f"/{name}")
    for member in ("table", "samples"):
        if member not in members:
            raise ResultFileError(path, f"table /{name} has no '{member}' dataset")
        if not isinstance(_hard_member(path, group, member, f"/{name}/{member}"), h5py.Dataset):
            raise ResultFileError(path, f"table /{name} has no '{member}' dataset")
    ds = group["table"]
    if ds.ndim != 1 or ds.dtype.names is None:
        raise ResultFileError(path, f"/{name}/table is not a 1-D compound dataset")
    if len(ds.dtype.names) > MAX_COLUMNS:
        raise ResultFileError(path, f"/{name}/table has {len(ds.dtype.names)} columns (at most "
                                    f"{MAX_COLUMNS})")
    if tuple(ds.dtype.names[:3]) != STORE_FIELDS:
        raise ResultFileError(path, f"/{name}/table does not start with fields "
                                    f"{', '.join(STORE_FIELDS)}")
    for field in ds.dtype.names:
        ft = ds.dtype[field]
        if ft.kind not in "iufS" or ft.subdtype is not None or ft.itemsize > MAX_STRING_COLUMN:
            raise ResultFileError(path, f"/{name}/table column '{field[:80]}' has the "
                                        f"unsupported type {ft}")
    if ds.dtype["key"].kind != "S" or ds.dtype["sample_offset"].kind not in "iu" or \
            ds.dtype["sample_count"].kind not in "iu":
        raise ResultFileError(path, f"/{name}/table: key must be a string, sample_offset and "
                                    f"sample_count integers")
    samples_ds = group["samples"]
    if samples_ds.ndim != 1 or samples_ds.dtype.kind != "f":
        raise ResultFileError(path, f"/{name}/samples is not a 1-D float dataset")
    rows = _read(path, ds, f"/{name}/table")
    samples = np.asarray(_read(path, samples_ds, f"/{name}/samples"), dtype=np.float64)
    columns = {}
    for field in ds.dtype.names:
        col = rows[field]
        if col.dtype.kind == "S":
            try:
                col = np.char.decode(col, "utf-8")
            except UnicodeError:
                raise ResultFileError(path, f"/{name}/table column '{field[:80]}' holds text "
                                            f"that is not UTF-8") from None
        columns[field] = np.asarray(col)
    for field, kind in REQUIRED_COLUMNS.get(name, {}).items():
        if field not in columns:
            raise ResultFileError(path, f"table /{name} lacks column '{field}'")
        if not _kind_ok(columns[field].dtype, kind):
            raise ResultFileError(path, f"/{name} column '{field}' has type "
                                        f"{columns[field].dtype}, expected "
                                        f"{ {'i': 'int', 'f': 'float', 's': 'string'}[kind]}")
    if name == "layer_sweep":
        _layer_columns(path, columns)
    off = columns["sample_offset"].astype(np.int64, copy=False)
    cnt = columns["sample_count"].astype(np.int64, copy=False)
    n = len(samples)
    # Compared without adding, so that huge values cannot wrap around.
    if len(off) and (off.min() < 0 or cnt.min() < 0 or off.max() > n or (cnt > n - off).any()):
        raise ResultFileError(path, f"/{name}: rows point past the {n} raw samples "
                                    f"(truncated?)")
    keys = columns["key"]
    if len(set(keys.tolist())) != len(keys):
        raise ResultFileError(path, f"/{name}: duplicate configuration keys")
    if len(keys) and (keys == "").any():
        raise ResultFileError(path, f"/{name}: a row with an empty key")
    per_row = [samples[o:o + c] for o, c in zip(off.tolist(), cnt.tolist())]
    return Frame(columns, per_row)


def _layer_columns(path, columns):
    """/layer_sweep: `weights_format` filled where absent or empty and checked against
    WEIGHTS_FORMATS; peer shape names with a trailing activation made the chain's."""
    n = len(columns["shape"])
    torch = columns["finalize"] == "torch"
    if "weights_format" in columns:
        fmt = columns["weights_format"]
        if fmt.dtype.kind not in "SU":
            raise ResultFileError(path, f"/layer_sweep column 'weights_format' has type "
                                        f"{fmt.dtype}, expected string")
        fmt = fmt.astype(object)
    else:
        fmt = np.full(n, "", dtype=object)
    fmt[(fmt == "") & torch] = "bf16"
    fmt[fmt == ""] = DEFAULT_WEIGHTS_FORMAT
    bad = sorted(set(fmt.tolist()) - set(WEIGHTS_FORMATS))
    if bad:
        raise ResultFileError(path, f"/layer_sweep column 'weights_format': '{bad[0][:40]}' is not "
                                    f"one of {', '.join(WEIGHTS_FORMATS)} "
                                    "(docs/reference/experiment-tables.md)")
    columns["weights_format"] = fmt.astype(str)
    shapes = columns["shape"].astype(str).tolist()
    acts = columns["activation"].astype(str).tolist() if "activation" in columns else [None] * n
    keys = columns["key"].astype(str).tolist()
    for i, (shape, act) in enumerate(zip(shapes, acts)):
        for a in ACTIVATIONS:
            if shape.endswith("/" + a) and act in (None, a):
                shapes[i] = shape[:-len(a) - 1]
                keys[i] = keys[i].replace(f"shape={shape},", f"shape={shapes[i]},", 1)
    columns["shape"] = np.asarray(shapes, dtype=str)
    columns["key"] = np.asarray(keys, dtype=str)


def _parse_kernel_names(text, count):
    text = text.strip()
    if text.startswith("["):
        try:
            names = [str(n) for n in json.loads(text)]
        except (ValueError, TypeError, RecursionError):
            names = []
    else:
        names = [n.strip() for n in text.split(",") if n.strip()]
    while len(names) < count:
        names.append(f"kernel {len(names)}")
    return names


def _read_timeline(path, name, group, attrs):
    stamps = {}
    for field in TIMELINE_FIELDS:
        ds = _hard_member(path, group, field, f"/{name}/{field}")
        if not isinstance(ds, h5py.Dataset) or ds.ndim != 1 or ds.dtype.kind not in "iu":
            raise ResultFileError(path, f"timeline /{name}/{field} is not a 1-D int array")
        stamps[field] = np.asarray(_read(path, ds, f"/{name}/{field}"), dtype=np.int64)
    if len({len(a) for a in stamps.values()}) != 1:
        raise ResultFileError(path, f"timeline /{name}: arrays of different lengths")
    kernel = stamps["kernel"]
    if len(kernel) and kernel.min() < 0:
        raise ResultFileError(path, f"timeline /{name}: negative kernel index")
    if len(kernel) and kernel.max() >= MAX_MEMBERS:
        raise ResultFileError(path, f"timeline /{name}: kernel index {int(kernel.max())} (at "
                                    f"most {MAX_MEMBERS - 1})")
    count = int(kernel.max()) + 1 if len(kernel) else 0
    names = _parse_kernel_names(attrs.get("kernels", ""), count)
    return Timeline(name, names, stamps, attrs)


def load_result_file(path):
    """Opens, validates and reads one result file; raises ResultFileError naming it."""
    path = pathlib.Path(path)
    try:
        regular = path.is_file()
    except OSError:
        regular = False
    if not regular:
        raise ResultFileError(path, "cannot open for reading (missing or not a file)")
    try:
        with open(path, "rb"):
            pass
    except OSError:
        raise ResultFileError(path, "cannot open for reading (permission denied?)") from None
    try:
        is_hdf5 = h5py.is_hdf5(path)
    except (OSError, RuntimeError, ValueError):
        is_hdf5 = False
    if not is_hdf5:
        raise ResultFileError(path, "not an HDF5 file")
    try:
        f = h5py.File(path, "r")
    except (OSError, RuntimeError, ValueError) as e:
        raise ResultFileError(path, f"HDF5 library cannot open it (truncated or damaged?): "
                                    f"{_first_line(e)}") from None
    with f:
        provenance = _attrs(path, f, "/")
        group_names = _names(path, f, "/")
        schema = provenance.get("moefin_schema")
        if schema is None:
            raise ResultFileError(path, "not a moefin result file (no moefin_schema attribute)")
        if schema != SCHEMA:
            raise ResultFileError(path, f"unsupported schema '{schema[:80]}' (this analysis "
                                        f"reads {SCHEMA})")
        # Files written before the state existed have the schema and no state: complete.
        state = provenance.get(STATE_ATTR, "complete")
        if state == "incomplete":
            raise ResultFileError(path, "incomplete (moefin_state = incomplete: the run writing "
                                        "it was interrupted or is still running; continue it "
                                        "with moefin --resume)")
        if state not in STATES:
            raise ResultFileError(path, f"unknown moefin_state '{state[:80]}' (expected "
                                        f"complete or incomplete)")
        for attr in ("arch", "gpu_name"):
            if attr not in provenance:
                raise ResultFileError(path, f"no '{attr}' root attribute (the architecture key)")
        tables, timelines, other = {}, [], []
        for name in group_names:
            group = _hard_member(path, f, name, f"/{name}")
            if not isinstance(group, h5py.Group):
                other.append(name)
                continue
            attrs = _attrs(path, group, f"/{name}")
            kind = attrs.get("kind")
            if kind == "table":
                tables[name] = _read_table(path, name, group)
            elif kind == "arrays":
                members = _names(path, group, f"/{name}")
                if all(field in members for field in TIMELINE_FIELDS):
                    timelines.append(_read_timeline(path, name, group, attrs))
                else:
                    other.append(name)
            else:
                raise ResultFileError(path, f"group /{name} has kind {kind!r}, expected "
                                            f"'table' or 'arrays'")
    if provenance.get(PRODUCER_ATTR, "plain") != "pdl-wait":
        for frame in tables.values():
            _relabel_plain_mode_b(frame)
    return ResultFile(path, provenance, tables, timelines, other)


# Root attribute naming how mode b's producer was launched
# (docs/design/experiments.md#finalize-sweep): "pdl-wait" (with the PDL attribute, waiting at entry,
# as GEMM2). Files without it ("plain": no attribute, no wait) measured another chain; their mode b
# rows are read as mode "b0", as `moefin sweep finalize --print` and `moefin compare` do, so that no
# table pools the two.
PRODUCER_ATTR = "mode_b_producer"
_MODE_B_KEY = re.compile(r"(^|,)mode=b(,|$)")


def _relabel_plain_mode_b(frame):
    if "mode" not in frame.columns:
        return
    mode = frame.columns["mode"]
    if not (mode == "b").any():
        return
    frame.columns["mode"] = np.asarray(["b0" if m == "b" else m for m in mode.tolist()], dtype=str)
    if "key" in frame.columns:
        frame.columns["key"] = np.asarray(
            [_MODE_B_KEY.sub(r"\1mode=b0\2", k) if m == "b" else k
             for k, m in zip(frame.columns["key"].tolist(), mode.tolist())], dtype=str)


def _walk(root):
    """Result files below a directory; linked directories are not followed (no loops)."""
    found = []

    def fail(e):
        raise ResultFileError(e.filename or root, f"cannot list the directory "
                                                  f"({e.strerror or e})")

    for d, dirs, files in os.walk(root, onerror=fail, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            q = pathlib.Path(d) / name
            if q.suffix not in SUFFIXES:
                continue
            if os.path.islink(q) and not os.path.exists(q):
                raise ResultFileError(q, "a symbolic link to nothing (broken or looping)")
            try:
                if q.is_file():
                    found.append(q)
            except OSError:
                pass
    return found


def discover(paths):
    """Expands files and directories (searched recursively for *.h5, *.hdf5) into file paths.

    A named file is taken whatever its suffix, so that a wrong file is reported, not skipped; a
    directory without result files is an error too (nothing would be reported from it).
    """
    out = []
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            found = _walk(p)
            if not found:
                raise ResultFileError(p, "no result files (*.h5, *.hdf5) in this directory")
            out.extend(found)
        elif p.exists():
            out.append(p)
        elif os.path.lexists(p):
            raise ResultFileError(p, "a symbolic link to nothing (broken or looping)")
        else:
            raise ResultFileError(p, "no such file or directory")
    seen, unique = set(), []
    for p in out:
        try:
            r = p.resolve()
        except (OSError, RuntimeError):
            r = pathlib.Path(os.path.abspath(p))
        if r not in seen:
            seen.add(r)
            unique.append(p)
    return unique
