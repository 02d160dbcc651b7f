"""Fixtures: synthetic result files (analysis.synthetic) and reports rendered from them."""
import os
import pathlib
import subprocess
import sys

import matplotlib
import pytest

matplotlib.use("Agg")

from analysis import DATA_DIR, REPO_ROOT, build_report, synthetic, write_report  # noqa: E402

H200 = ("NVIDIA H200", "sm_90")
B200 = ("NVIDIA B200", "sm_100")
B200_FACTOR = 1.1


@pytest.fixture(scope="session")
def h200_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("h200") / "h200.h5"
    return synthetic.write_synthetic(path, *H200)


@pytest.fixture(scope="session")
def b200_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("b200") / "b200.h5"
    return synthetic.write_synthetic(path, *B200, factor=B200_FACTOR,
                                     date_utc="2026-02-01T08:00:00Z")


@pytest.fixture(scope="session")
def report_h200(h200_file):
    """The report of the H200 file alone (tables only, no figures rendered)."""
    return build_report([h200_file])


FIGURE_TOPK = (4, 8, 22)  # three panels per figure are enough to test; rendering is slow


@pytest.fixture(scope="session")
def rendered_two(tmp_path_factory):
    """Report of an H200 and a B200 file (top-K 4, 8, 22), written with every figure:
    (report, out dir)."""
    d = tmp_path_factory.mktemp("figure_inputs")
    files = [synthetic.write_synthetic(d / "h200.h5", *H200, topk=FIGURE_TOPK),
             synthetic.write_synthetic(d / "b200.h5", *B200, factor=B200_FACTOR,
                                       topk=FIGURE_TOPK)]
    out = tmp_path_factory.mktemp("report_two")
    report = build_report(files)
    write_report(report, out)
    return report, out


def run_analysis(*args, env=None):
    """python -m analysis ... in a subprocess (the command as users run it)."""
    return subprocess.run([sys.executable, "-m", "analysis", *map(str, args)],
                          capture_output=True, text=True, cwd=REPO_ROOT,
                          env={**os.environ, **(env or {})})


@pytest.fixture(scope="session")
def moefin_binary():
    path = pathlib.Path(os.environ.get("MOEFIN_BINARY", REPO_ROOT / "build" / "moefin"))
    if not path.is_file():
        pytest.fail(f"moefin binary not found at {path}: run scripts/build.sh first")
    return path


@pytest.fixture(scope="session")
def data_report(tmp_path_factory):
    """`python -m analysis report data/` run once, as users run it: (process, out dir)."""
    out = tmp_path_factory.mktemp("data_report") / "report"
    return run_analysis("report", DATA_DIR, "--out", out), out


def read_md_table(path):
    """A table written by the report (tables/<name>.md): (header, rows of cell texts)."""
    lines = [line for line in pathlib.Path(path).read_text().splitlines()
             if line.startswith("| ")]

    def cells(line):
        return [c.strip().replace("\\|", "|") for c in line.strip()[2:-2].split(" | ")]

    return cells(lines[0]), [cells(line) for line in lines[2:]]
