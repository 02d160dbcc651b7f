"""python -m analysis report and its wrappers: moefin report, and the step of moefin demo."""
import os
import subprocess

from analysis import DATA_DIR, discover, load_result_file, synthetic as syn
from analysis.merging import measured_column


def test_report_of_data_dir_has_the_published_columns_and_says_what_is_missing(data_report):
    proc, out = data_report
    assert proc.returncode == 0, proc.stderr
    assert f"analysis: wrote {out / 'report.md'}" in proc.stdout
    md = (out / "report.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| top-K |"))
    for col in ("GB200 (SM100) published", "GB300 (SM103) published", "Rubin (SM107) published"):
        assert f"| {col} |" in header
    measured = [load_result_file(p) for p in discover([DATA_DIR])]
    for f in measured:  # every GPU with a committed file has its columns, mode b first
        label = measured_column(*f.arch_key).label
        assert f"| {label} mode b | {label} mode a |" in header
    if not measured:
        assert "## Not measured yet" in md and "`moefin sweep finalize`" in md
    for name in ("finalize_speedup", "whole_layer_speedup", "pdl_ordering_speedup"):
        assert (out / "tables" / f"{name}.md").read_text().startswith("**")
        assert r"\toprule" in (out / "tables" / f"{name}.tex").read_text()
    assert (out / "figures" / "01_finalize_speedup_bars.png").stat().st_size > 10000
    assert "\\input{tables/finalize_speedup.tex}" in (out / "tables" / "all_tables.tex").read_text()


def run_moefin(binary, *args, env=None):
    return subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True,
                          env={**os.environ, **(env or {})})


def test_moefin_report_runs_the_package(moefin_binary, tmp_path):
    small = syn.write_synthetic(tmp_path / "small.h5", experiments=("launch_floor",))
    proc = run_moefin(moefin_binary, "report", small, "--out", tmp_path / "r")
    assert proc.returncode == 0, proc.stderr
    assert "measured architecture(s): H200 (SM90)" in proc.stdout
    assert "| H200 (SM90) |" in (tmp_path / "r" / "report.md").read_text()
    help_ = run_moefin(moefin_binary, "report", "--help")
    assert help_.returncode == 0 and help_.stdout.startswith("usage: moefin report")


def test_moefin_report_without_the_environment_says_how_to_get_it(moefin_binary, tmp_path):
    missing = tmp_path / "no-venv" / "bin" / "python"
    proc = run_moefin(moefin_binary, "report", DATA_DIR, env={"MOEFIN_PYTHON": str(missing)})
    assert proc.returncode == 1
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"moefin: error: {missing}: ")
    assert "scripts/setup.sh" in lines[0]


def test_moefin_report_passes_bad_files_through(moefin_binary, tmp_path):
    bad = tmp_path / "bad.h5"
    bad.write_text("no")
    proc = run_moefin(moefin_binary, "report", bad, "--out", tmp_path / "r")
    assert proc.returncode == 1
    assert proc.stderr.strip() == f"analysis: error: {bad}: not an HDF5 file"


def test_moefin_report_refuses_an_empty_name(moefin_binary, tmp_path):
    """'' would read as the current folder: a usage error, nothing read or written."""
    small = syn.write_synthetic(tmp_path / "small.h5", experiments=("launch_floor",))
    for args, what in [(["", "--out", tmp_path / "r"], "FILE_OR_DIR: an empty name"),
                       ([small, "--out", ""], "--out: an empty name")]:
        proc = run_moefin(moefin_binary, "report", *args)
        assert proc.returncode == 2, proc.stderr
        assert what in proc.stderr and "read " not in proc.stdout, proc.stdout + proc.stderr
    assert not (tmp_path / "r").exists()


def test_demo_renders_the_report_of_data(moefin_binary, tmp_path):
    proc = run_moefin(moefin_binary, "demo", "--rounds", 3, "--out-dir", tmp_path / "demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = tmp_path / "report" / "report.md"
    assert f"report: {report} " in proc.stdout
    assert "GB200 (SM100) published" in report.read_text()
