"""A result file from another GPU gives a new column and new panels, with no code change:
exactly what a newcomer does (drop the file into the data directory, run the report)."""
from analysis import synthetic as syn

from .conftest import FIGURE_TOPK, run_analysis


def finalize_header(report_md):
    lines = report_md.splitlines()
    i = lines.index("### finalize_speedup")
    return next(line for line in lines[i:] if line.startswith("| top-K |"))


def test_a_new_gpu_file_adds_a_column_and_panels(tmp_path):
    data = tmp_path / "data"
    (data / "h200").mkdir(parents=True)
    syn.write_synthetic(data / "h200" / "sweep.h5", topk=FIGURE_TOPK,
                        experiments=("finalize_sweep", "layer_sweep", "race_matrix"))
    proc = run_analysis("report", data, "--out", tmp_path / "before")
    assert proc.returncode == 0, proc.stderr
    before = (tmp_path / "before" / "report.md").read_text()
    assert "NVIDIA B200" not in before and " B200 (SM100)" not in before

    (data / "b200").mkdir()
    syn.write_synthetic(data / "b200" / "sweep.h5", "NVIDIA B200", "sm_100", factor=1.2,
                        experiments=("finalize_sweep", "launch_floor", "layer_sweep"),
                        topk=FIGURE_TOPK)
    proc = run_analysis("report", data, "--out", tmp_path / "after")
    assert proc.returncode == 0, proc.stderr
    after = (tmp_path / "after" / "report.md").read_text()
    assert finalize_header(after) == (
        "| top-K | H200 (SM90) mode b | H200 (SM90) mode a | B200 (SM100) mode b | B200 (SM100) "
        "mode a | GB200 (SM100) published | GB300 (SM103) published | Rubin (SM107) published |")
    figures = tmp_path / "after" / "figures"
    for name in ("finalize_heatmap_b200_sm100", "finalize_time_b200_sm100_H2880"):
        (png,) = figures.glob(f"[0-9][0-9]_{name}.png")
        assert png.stat().st_size > 10000
        assert png.with_suffix(".pdf").is_file()
    assert "B200 (SM100) (seed-after)" in after  # whole-layer column
    assert "| B200 (SM100) | measured | NVIDIA B200 |" in after
    # what the B200 file lacks is said, what the H200 file has is not lost
    assert "race_matrix_h200_sm90_seed.png" in after
    assert "race_matrix_b200" not in after
