"""Every figure is produced, as a PNG that is not blank and a PDF, and shows what it claims."""
import matplotlib.image as mpimg
import numpy as np


def expected_stems():
    stems = {"finalize_speedup_bars"}
    for slug in ("h200_sm90", "b200_sm100"):
        stems |= {f"finalize_heatmap_{slug}", f"finalize_time_{slug}_H2880",
                  f"race_matrix_{slug}_seed", f"race_matrix_{slug}_fixed",
                  f"timeline_{slug}_0_timeline_chain"}
    return stems


def test_each_figure_is_written_as_png_and_pdf(rendered_two):
    report, out = rendered_two
    assert {f.stem for f in report.figures} == expected_stems()
    for fig in report.figures:
        png, pdf = fig.paths
        assert png.parent == out / "figures" and png.suffix == ".png" and pdf.suffix == ".pdf"
        image = mpimg.imread(png)
        assert image.shape[0] > 200 and image.shape[1] > 300, fig.stem
        gray = image[..., :3].mean(axis=2)
        # not blank: a good share of the pixels is ink, and the drawing has dark and light parts
        assert (gray < 0.5).mean() > 0.005 and gray.std() > 0.05, fig.stem
        head = pdf.read_bytes()[:5]
        assert head == b"%PDF-" and pdf.stat().st_size > 5000, fig.stem


def test_figures_name_the_architecture_and_series(rendered_two):
    report, out = rendered_two
    by_stem = {f.stem: f for f in report.figures}
    bars = by_stem["finalize_speedup_bars"]
    assert bars.series == ["H200 (SM90)", "B200 (SM100)", "GB200 (SM100)", "GB300 (SM103)",
                           "Rubin (SM107)"]
    assert by_stem["finalize_heatmap_b200_sm100"].title.startswith("B200 (SM100)")
    assert by_stem["timeline_h200_sm90_0_timeline_chain"].series == [
        "routing", "permute", "gemm1", "activation", "gemm2", "finalize"]
    assert "small_batch" in by_stem["finalize_time_h200_sm90_H2880"].series
    md = (out / "report.md").read_text()
    for f in report.figures:
        assert f"](figures/{f.stem}.png)" in md


def test_figures_stay_readable_in_grayscale(rendered_two):
    """The bars of different architectures differ in gray level or hatching, not only hue:
    the PNG converted to gray still has several distinct fill levels."""
    report, _ = rendered_two
    bars = next(f for f in report.figures if f.stem == "finalize_speedup_bars")
    gray = np.round(mpimg.imread(bars.paths[0])[..., :3].mean(axis=2), 1)
    levels, counts = np.unique(gray, return_counts=True)
    assert (counts > 0.002 * gray.size).sum() >= 4
