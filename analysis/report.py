"""One report from any number of result files plus the published tables: report.md, every
table as Markdown and LaTeX (tables/), every figure as PNG and PDF (figures/)."""
import pathlib
from dataclasses import dataclass, field

from . import CHAINS_DIR, PUBLISHED_DIR
from .figures import build_figures, stderr_progress
from .loader import discover, load_result_file
from .merging import CONDITION_ATTRS, merge
from .pdl import load_design_table
from .published import load_published
from .tables import all_columns, build_tables

WRITERS = {"finalize_sweep": "moefin sweep finalize", "launch_floor": "moefin sweep finalize",
           "copy_bandwidth": "moefin sweep finalize", "finalize_repeat": "moefin sweep finalize",
           "finalize_check": "moefin check finalize", "layer_sweep": "moefin sweep layer",
           "equivalence": "moefin equivalence", "race_matrix": "moefin race",
           "pdl_probe": "moefin pdl-probe"}


@dataclass
class Report:
    inputs: list  # the paths given
    files: list  # ResultFile, in reading order
    results: list  # ArchResult, one per architecture
    published: object
    published_dir: pathlib.Path
    tables: list = field(default_factory=list)
    missing: list = field(default_factory=list)  # what no file measured yet
    merging: list = field(default_factory=list)  # how rows of several files were combined
    figures: list = field(default_factory=list)
    design: list = field(default_factory=list)  # pdl.DesignRow: the H200 table of docs/design/pdl.md

    def table(self, name):
        for t in self.tables:
            if t.name == name:
                return t
        raise KeyError(f"no table {name}; tables: {[t.name for t in self.tables]}")


def _missing(results, pub):
    notes = []
    if not results:
        notes.append("No measured result file was given or found: the tables show the "
                     "published columns only. Measure with the commands below and put the files "
                     "under data/<gpu>/.")
    for group, command in WRITERS.items():
        have = [r.column.label for r in results if r.table(group) is not None
                and len(r.table(group))]
        if not have:
            notes.append(f"/{group}: in no measured file yet (written by `{command}`).")
    if not any(r.timelines for r in results):
        notes.append("Timelines (per-CTA stamps): in no measured file yet (instrumented runs or "
                     "simulated schedules write them).")
    for name in pub.missing:
        notes.append(f"published table {name} is not in the published directory.")
    return notes


def _merging(results):
    notes = []
    for r in results:
        for group, labels in sorted(r.conditions.items()):
            if len(labels) > 1:
                notes.append(f"{r.column.label} /{group}: measured under {len(labels)} "
                             f"conditions, kept side by side: " + "; ".join(labels) + ".")
        for group, n in sorted(r.replaced.items()):
            notes.append(f"{r.column.label} /{group}: {n} rows measured twice under the same "
                         f"condition; the later file (date_utc) was used (`moefin compare OLD "
                         f"NEW` sets the two runs against each other).")
    return notes


def build_report(paths, published_dir=PUBLISHED_DIR, log=None, chains_dir=CHAINS_DIR):
    """Reads and merges everything; raises ResultFileError on the first bad file."""
    files = []
    for p in discover(paths):
        f = load_result_file(p)
        files.append(f)
        if log:
            log(f"  read {p}: {f.provenance['gpu_name']} ({f.provenance['arch']}), "
                f"{', '.join('/' + g for g in f.tables) or 'no tables'}")
    pub = load_published(published_dir)
    results = merge(files)
    report = Report(list(map(str, paths)), files, results, pub, pathlib.Path(published_dir))
    report.design = load_design_table(chains_dir)
    report.tables = build_tables(results, pub, report.design)
    report.missing = _missing(results, pub)
    report.merging = _merging(results)
    return report


def _md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c).replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(out)


def _inputs_section(report):
    lines = ["## Inputs", ""]
    if report.files:
        rows = []
        for f in report.files:
            p = f.provenance
            used = [g for g in f.tables if g in WRITERS]
            groups = ", ".join(["/" + g for g in used] + _timeline_text(f.timelines))
            ignored = ", ".join("/" + g for g in [g for g in f.tables if g not in WRITERS]
                                + f.other_groups)
            condition = ", ".join(f"{a}={p[a]}" for a in CONDITION_ATTRS if a in p)
            rows.append([f"`{f.path}`", f"{p['gpu_name']} ({p['arch']})",
                         p.get("git_commit", "?"), p.get("date_utc", "?"), condition or "-",
                         groups or "-", ignored or "-"])
        lines += [_md_table(["file", "GPU", "commit", "date (UTC)", "condition", "read",
                             "not used here"], rows), ""]
    else:
        lines += ["No result files (given: " + ", ".join(f"`{p}`" for p in report.inputs)
                  + ").", ""]
    lines.append(f"Published tables from `{report.published_dir}`:")
    lines.append("")
    for name, comments in report.published.sources.items():
        lines.append(f"- `{name}`: {' '.join(comments)}")
    lines.append("")
    return lines


def _timeline_text(timelines):
    """'/timeline_race_0..2 (3 timelines)' rather than every group name."""
    if not timelines:
        return []
    if len(timelines) == 1:
        return ["/" + timelines[0].group]
    return [f"{len(timelines)} timelines (/{timelines[0].group} .. /{timelines[-1].group})"]


def _arch_section(report):
    rows = []
    for r in report.results:
        def one(attr):
            return "/".join(r.provenance_values(attr))
        rows.append([r.column.label, "measured", one("gpu_name"), one("sm_count"),
                     one("l2_bytes"), one("driver_version"), one("cuda_runtime_version"),
                     str(len(r.files))])
    for c in sorted(report.published.columns, key=lambda c: c.sort_key()):
        rows.append([c.label, "published (seed)", "-", "-", "-", "-", "-", "-"])
    return ["## Architectures", "",
            _md_table(["column", "source", "GPU", "SMs", "L2 bytes", "driver", "CUDA runtime",
                       "files"], rows), ""]


def write_report(report, out_dir, log=None, timelines="representative",
                 progress=stderr_progress):
    """Writes report.md, tables/ and figures/ into out_dir (the names: FILES_WRITTEN); returns
    the report.md path. timelines: 'representative' (a few per family) or 'all'; progress
    gets a line per group of figures drawn."""
    out = pathlib.Path(out_dir)
    (out / "tables").mkdir(parents=True, exist_ok=True)
    report.figures = build_figures(report.results, report.published, out / "figures",
                                   timelines=timelines, progress=progress)
    for t in report.tables:
        (out / "tables" / f"{t.name}.md").write_text(t.to_markdown(), encoding="utf-8")
        (out / "tables" / f"{t.name}.tex").write_text(t.to_latex(), encoding="utf-8")
    (out / "tables" / "all_tables.tex").write_text(
        "% every table of the report; needs \\usepackage{booktabs}\n"
        + "".join(f"\\input{{tables/{t.name}.tex}}\n" for t in report.tables), encoding="utf-8")
    labels = [c.label + (" (published)" if c.published else "")
              for c in all_columns(report.results, report.published)]
    lines = ["# moefin report", "",
             f"{len(report.files)} result file(s), {len(report.results)} measured "
             f"architecture(s); columns: {', '.join(labels)}.", ""]
    lines += _inputs_section(report)
    lines += _arch_section(report)
    if report.missing:
        lines += ["## Not measured yet", ""] + [f"- {m}" for m in report.missing] + [""]
    if report.merging:
        lines += ["## Merged files", ""] + [f"- {m}" for m in report.merging] + [""]
    lines += ["## Tables", "",
              "Each table is also in `tables/<name>.md` and `tables/<name>.tex` (LaTeX, "
              "booktabs; `tables/all_tables.tex` inputs them all).", ""]
    for t in report.tables:
        lines += [f"### {t.name}", "", t.to_markdown()]
    lines += ["## Figures", "", "PNG shown; the PDF beside each has the same name. Finalize "
              "figures show mode b (producer -> finalize, the kernel in a chain) first, beside "
              "mode a (back-to-back launches, the seed's protocol).", ""]
    for fi in report.figures:
        png = fi.paths[0].relative_to(out)
        lines += [f"### {fi.stem}", "", f"{fi.title}", "", f"![{fi.title}]({png.as_posix()})", ""]
    lines += ["## Files of this report", ""] + [f"- `{n}`: {what}" for n, what in FILES_WRITTEN]
    lines.append("")
    path = out / "report.md"
    path.write_text("\n".join(lines), encoding="utf-8")
    if log:
        log(f"analysis: wrote {path} ({len(report.tables)} tables, {len(report.figures)} "
            f"figures as PNG and PDF)")
    return path


# Every name the report writes under its output directory (also in docs/reference/result-files.md).
FILES_WRITTEN = (
    ("report.md", "this report: inputs, architectures, what is not measured, every table and "
                  "figure"),
    ("tables/<name>.md", "each table in Markdown (the names are the `###` headings above)"),
    ("tables/<name>.tex", "the same table in LaTeX (booktabs)"),
    ("tables/all_tables.tex", "inputs every table's .tex"),
    ("figures/NN_<name>.png", "each figure, NN its place in the report (zero-padded, so the "
                              "files sort in report order)"),
    ("figures/NN_<name>.pdf", "the same figure as PDF"),
)

__all__ = ["Report", "build_report", "write_report", "FILES_WRITTEN"]
