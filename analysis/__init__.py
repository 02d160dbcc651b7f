"""moefin analysis: result files (HDF5, schema of docs/reference/result-files.md) from any number of
GPUs plus the published tables, merged into per-architecture tables, figures, notebooks and one
report.

    python -m analysis report FILE_OR_DIR... --out DIR

As a library: `analysis.load(FILE)` gives {group: pandas DataFrame} with the provenance in each
DataFrame's `.attrs` (analysis/dataframes.py); `analysis.compare(BASE, NEW)` the before/after
verdicts of `moefin compare` as a DataFrame, `analysis.compare_figure(df)` their figure
(analysis/comparison.py).

The report needs numpy, h5py and matplotlib only, so it also runs with a plain system Python
that has those three (the GPU machines have no package registry); load and compare also need
pandas (pinned in requirements.txt), imported only when they are called.
"""
import pathlib

REPO_ROOT = pathlib.Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "data"
PUBLISHED_DIR = DATA_DIR / "published"
CHAINS_DIR = DATA_DIR / "chains"

from .errors import ResultFileError  # noqa: E402
from .loader import load_result_file, discover  # noqa: E402
from .merging import merge, Column  # noqa: E402
from .published import load_published  # noqa: E402
from .report import build_report, write_report  # noqa: E402

# pandas only where it is used: the report runs without it
_LAZY = {"load": "dataframes", "load_many": "dataframes", "compare": "comparison",
         "compare_figure": "comparison"}


def __getattr__(name):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["REPO_ROOT", "DATA_DIR", "PUBLISHED_DIR", "CHAINS_DIR", "ResultFileError", "load_result_file",
           "discover", "merge", "Column", "load_published", "build_report", "write_report", "load",
           "load_many", "compare", "compare_figure"]
