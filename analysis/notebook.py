"""Helpers of the notebooks in analysis/notebooks/: read what data/ holds, show tables and
figures inline, and say what has not been measured yet."""
import io
import os
import pathlib

from . import DATA_DIR
from .report import build_report


def data_dir():
    """data/ of the repository; MOEFIN_DATA_DIR points the notebooks at another directory of
    the same layout (the tests use it for synthetic files)."""
    return pathlib.Path(os.environ.get("MOEFIN_DATA_DIR", DATA_DIR))


def load():
    """The report of every result file under data/ and data/published/ (tables, no figures)."""
    d = data_dir()
    report = build_report([d], d / "published", log=print)
    labels = [r.column.label for r in report.results]
    print(f"{len(report.files)} result file(s) under {d}; measured architectures: "
          f"{', '.join(labels) if labels else 'none yet'}; published: "
          f"{', '.join(c.label for c in report.published.columns)}")
    return report


def say_missing(report, groups=None):
    """Prints what is not measured yet and how files were merged (all of it, or the notes
    naming one of `groups`)."""
    def mine(m):
        return groups is None or any(f"/{g}" in m for g in groups)

    notes = [m for m in report.missing if mine(m) or not report.results]
    for m in notes:
        print("not measured yet:", m)
    if not notes:
        print("everything this notebook shows is measured")
    for m in report.merging:
        if mine(m):
            print("merged:", m)


def table(t):
    from IPython.display import Markdown
    return Markdown(t.to_markdown())


def figure(made):
    """An inline PNG of a figure function's result ((Figure, series) or a Figure)."""
    from IPython.display import Image
    fig = made[0] if isinstance(made, tuple) else made
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    return Image(data=buf.getvalue(), format="png")
