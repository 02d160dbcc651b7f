"""Every figure is produced, as a PNG that is not blank and a PDF, shows what it claims, and the
file names sort in report order."""
import matplotlib.image as mpimg
import numpy as np
from matplotlib.colors import TwoSlopeNorm

from analysis import figures

NAMES = ["finalize_speedup_bars"]
for _slug in ("h200_sm90", "b200_sm100"):
    NAMES += [f"finalize_heatmap_{_slug}", f"finalize_time_{_slug}_H2880"]
for _slug in ("h200_sm90", "b200_sm100"):
    NAMES += [f"race_matrix_{_slug}_fixed", f"race_matrix_{_slug}_seed"]
NAMES += ["timeline_h200_sm90_00_timeline_chain", "timeline_b200_sm100_00_timeline_chain"]


def test_each_figure_is_written_as_png_and_pdf(rendered_two):
    report, out = rendered_two
    assert [f.name for f in report.figures] == NAMES
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


def test_figure_names_sort_in_report_order(rendered_two):
    report, out = rendered_two
    stems = [f.stem for f in report.figures]
    assert stems == [f"{n:02d}_{name}" for n, name in enumerate(NAMES, start=1)]
    on_disk = sorted(p.stem for p in (out / "figures").glob("*.png"))
    assert on_disk == stems  # what a file browser or `ls` shows is the report's order
    md = (out / "report.md").read_text()
    shown = [line.split("](figures/")[1].split(".png")[0] for line in md.splitlines()
             if line.startswith("![")]
    assert shown == stems


def test_figures_name_the_architecture_and_series(rendered_two):
    report, out = rendered_two
    by_name = {f.name: f for f in report.figures}
    bars = by_name["finalize_speedup_bars"]
    # measured columns: mode b first, beside mode a; then the published ones
    assert bars.series == ["H200 (SM90) mode b", "H200 (SM90) mode a", "B200 (SM100) mode b",
                           "B200 (SM100) mode a", "GB200 (SM100) published",
                           "GB300 (SM103) published", "Rubin (SM107) published"]
    heat = by_name["finalize_heatmap_b200_sm100"]
    assert heat.title.startswith("B200 (SM100)")
    assert heat.series == [f"top-K {k} mode {m}" for k in (4, 8, 22) for m in ("b", "a")]
    assert by_name["timeline_h200_sm90_00_timeline_chain"].series == [
        "routing", "permute", "gemm1", "activation", "gemm2", "finalize"]
    assert "small_batch" in by_name["finalize_time_h200_sm90_H2880"].series
    md = (out / "report.md").read_text()
    for f in report.figures:
        assert f"](figures/{f.stem}.png)" in md


def test_heatmap_scale_is_centred_on_one_and_time_plots_highlight_small_batch(report_h200):
    r = report_h200.results[0]
    fig, _ = figures.heatmap_figure(r)
    images = [im for ax in fig.axes for im in ax.get_images()]
    assert images and all(isinstance(im.norm, TwoSlopeNorm) and im.norm.vcenter == 1.0
                          for im in images)
    # 1.0 is the neutral middle of the colour map, a factor x and 1/x equally deep
    norm = images[0].norm
    assert float(norm(1.0)) == 0.5 and abs(norm.vmin * norm.vmax - 1) < 1e-9
    titles = [ax.get_title() for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert titles[0].startswith("top-K") and "mode b" in titles[0] and "mode a" in titles[1]
    fig, _ = figures.time_figure(r, 2880)
    lines = [line for ax in fig.axes for line in ax.get_lines()
             if line.get_label().startswith("small_batch")]
    studied = [line for line in lines if "under study" in line.get_label()]
    others = [line for ax in fig.axes for line in ax.get_lines()
              if line not in studied and line.get_label() not in ("launch floor",)]
    assert studied and min(x.get_linewidth() for x in studied) > \
        2 * max(x.get_linewidth() for x in others)
    assert {x.get_color() for x in studied} == {figures.HIGHLIGHT}


def test_figures_stay_readable_in_grayscale(rendered_two):
    """The bars of different architectures differ in gray level or hatching, not only hue:
    the PNG converted to gray still has several distinct fill levels."""
    report, _ = rendered_two
    bars = next(f for f in report.figures if f.name == "finalize_speedup_bars")
    gray = np.round(mpimg.imread(bars.paths[0])[..., :3].mean(axis=2), 1)
    levels, counts = np.unique(gray, return_counts=True)
    assert (counts > 0.002 * gray.size).sum() >= 4
