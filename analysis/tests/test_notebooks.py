"""The notebooks are stored without outputs and run headless (nbclient) on what data/ holds,
so they cannot rot; with no GPU file they still run and say what is missing. Each starts with a
cell of parameters (tagged `parameters`) a user edits."""
import pathlib
import re
import shutil
import sys

import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel
from nbclient import NotebookClient

from analysis import DATA_DIR, build_report


NOTEBOOKS = pathlib.Path(__file__).resolve().parents[1] / "notebooks"
REPORT_NOTEBOOKS = ("speedup_tables", "pdl_ordering_stress", "per_architecture_comparison")
DATAFRAME_NOTEBOOKS = ("explore_results", "compare_two_files")
NAMES = REPORT_NOTEBOOKS + DATAFRAME_NOTEBOOKS


@pytest.fixture(scope="module")
def kernel_name():
    try:
        spec = KernelSpecManager().get_kernel_spec("moefin")
    except NoSuchKernel:
        pytest.fail("no 'moefin' Jupyter kernel: run scripts/setup.sh (it registers .venv's python)")
    assert pathlib.Path(spec.argv[0]).resolve() == pathlib.Path(sys.executable).resolve(), \
        f"the moefin kernel runs {spec.argv[0]}, not this environment: rerun scripts/setup.sh"
    return "moefin"


def execute(name, kernel_name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name=kernel_name,
                   resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    text = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            assert out["output_type"] != "error", out
            text.append(out.get("text", ""))
            text.append(out.get("data", {}).get("text/markdown", ""))
            text.append(out.get("data", {}).get("text/plain", ""))
            if "image/png" in out.get("data", {}):
                text.append("<png>")
    return "".join(text)


@pytest.mark.parametrize("name", NAMES)
def test_notebook_is_stored_without_outputs(name):
    nb = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.kernelspec.name == "moefin"
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code
    for c in code:
        assert c.outputs == [] and c.execution_count is None
    # the first code cell holds the parameters: plain assignments a user edits
    first = code[0]
    assert "parameters" in first.metadata.get("tags", []), name
    assert first.source.startswith("# Parameters")
    assignments = [line for line in first.source.splitlines() if line and not line.startswith("#")]
    assert assignments and all(re.match(r"^[A-Z_]+(, [A-Z_]+)* = ", line) for line in assignments)


@pytest.mark.parametrize("name", REPORT_NOTEBOOKS)
def test_notebook_runs_on_data_and_says_what_is_missing(name, kernel_name, monkeypatch):
    monkeypatch.delenv("MOEFIN_DATA_DIR", raising=False)
    text = execute(name, kernel_name)
    assert "published: GB200 (SM100), GB300 (SM103), Rubin (SM107)" in text
    files = int(re.search(r"^(\d+) result file\(s\) under", text, flags=re.M).group(1))
    if files == 0:  # no GPU file committed yet
        assert "not measured yet:" in text
    report = build_report([DATA_DIR])
    assert files == len(report.files)
    if name == "pdl_ordering_stress":
        for r in report.results:  # every condition of a race matrix is named
            for cond in r.conditions.get("race_matrix", []):
                assert cond in text, cond
        for t in report.tables:
            if t.name.startswith(("race_summary_", "pdl_probe_", "equivalence_")):
                assert t.title in text, t.title
    if name == "speedup_tables":
        assert "| 22 |" in text and "1.81x (1.64x)" in text  # the published GB200 row
        assert r"\toprule" in text
        for r in report.results:  # the DataFrame view agrees with the table, mode b first
            t = report.table("finalize_speedup")
            m = re.search(re.escape(r.column.label) + r" b +([\d.]+) +([\d.]+) +\d+\n +a +([\d.]+)",
                          text)
            assert m, text[-3000:]
            assert float(m.group(1)) == round(t.cell(8, f"{r.column.label} mode b").value, 3)
            assert float(m.group(3)) == round(t.cell(8, f"{r.column.label} mode a").value, 3)
    if name == "per_architecture_comparison":
        assert "<png>" in text  # the bars of the published columns at least


def test_comparison_notebook_shows_a_measured_gpu(tmp_path, kernel_name, monkeypatch, h200_file):
    (tmp_path / "h200").mkdir()
    shutil.copy(h200_file, tmp_path / "h200" / "sweep.h5")
    shutil.copytree(NOTEBOOKS.parent.parent / "data" / "published", tmp_path / "published")
    monkeypatch.setenv("MOEFIN_DATA_DIR", str(tmp_path))
    text = execute("per_architecture_comparison", kernel_name)
    assert "measured architectures: H200 (SM90)" in text
    assert "H200 (SM90): 1 file(s), SMs ['132']" in text
    assert text.count("<png>") == 3  # bars, heatmap, time vs tokens
    assert "H200 (SM90) (seed-after)" in text


def test_dataframe_notebook_loads_picks_and_replots(kernel_name, monkeypatch):
    monkeypatch.delenv("MOEFIN_DATA_DIR", raising=False)
    text = execute("explore_results", kernel_name)
    assert "groups under" in text and "/finalize_sweep: " in text
    report = build_report([DATA_DIR])
    if any(r.table("finalize_sweep") is not None for r in report.results):
        assert "architecture H200 (SM90)" in text and "shape H=4096 K=8 weights=bf16" in text
        assert "<png>" in text  # the re-plot of the chosen shape
        assert re.search(r"median [\d.]+ us from 5 rounds: ", text)


def test_comparison_notebook_gives_verdicts(kernel_name, monkeypatch):
    monkeypatch.delenv("MOEFIN_DATA_DIR", raising=False)
    text = execute("compare_two_files", kernel_name)
    if not (DATA_DIR / "h200" / "h200_finalize_sweep.h5").is_file():
        assert "measure with `moefin sweep finalize`" in text
        return
    # the what-if: small_batch 5% slower, threshold 3%
    m = re.search(r"/finalize_sweep: (\d+) configurations in both files: (\d+) slower, 0 faster, "
                  r"(\d+) same, (\d+) noisy", text)
    assert m, text[:3000]
    total, slower, same, noisy = map(int, m.groups())
    assert total == 20736 and slower + noisy == total // 6 and slower > 0.9 * total // 6
    assert "<png>" in text
