"""python -m analysis report FILE_OR_DIR... [--out DIR] [--published DIR] [--chains DIR]

Exit status: 0 written; 1 a bad input file or an unwritable output (one line naming it);
2 bad usage.
"""
import argparse
import os
import sys

import matplotlib

matplotlib.use("Agg")

from . import CHAINS_DIR, PUBLISHED_DIR  # noqa: E402
from .errors import ResultFileError  # noqa: E402
from .report import build_report, write_report  # noqa: E402


def _parser():
    prog = os.environ.get("MOEFIN_REPORT_PROG", "python -m analysis")
    p = argparse.ArgumentParser(prog=prog, description="Tables, figures and one report from "
                                "moefin result files (HDF5) and the published tables.")
    sub = p.add_subparsers(dest="command", required=True, metavar="report")
    r = sub.add_parser("report", help="write report.md, tables/ and figures/",
                       description="Reads every result file (directories are searched for "
                       "*.h5 and *.hdf5), validates it against data/README.md, merges the files "
                       "into one column per architecture (root attributes arch + gpu_name) "
                       "beside the published columns, and writes DIR/report.md, "
                       "DIR/tables/*.md|.tex and DIR/figures/*.png|.pdf.")
    r.add_argument("inputs", nargs="+", metavar="FILE_OR_DIR", help="result files or directories")
    r.add_argument("--out", "-o", default="out/report", metavar="DIR",
                   help="output directory (default: out/report)")
    r.add_argument("--published", default=str(PUBLISHED_DIR), metavar="DIR",
                   help=f"directory of the published CSVs (default: {PUBLISHED_DIR})")
    r.add_argument("--timelines", choices=("representative", "all"), default="representative",
                   help="per-CTA timeline figures: a few representative ones per family "
                   "(default), or every one")
    r.add_argument("--chains", default=str(CHAINS_DIR), metavar="DIR",
                   help="directory of the chain descriptions whose `measured` blocks hold the "
                   f"H200 table of DESIGN.md section 3 (default: {CHAINS_DIR})")
    return p


def main(argv=None):
    args = _parser().parse_args(argv)
    try:
        report = build_report(args.inputs, args.published, log=print, chains_dir=args.chains)
        print(f"analysis: {len(report.files)} result file(s), {len(report.results)} measured "
              f"architecture(s): {', '.join(r.column.label for r in report.results) or 'none'}")
        write_report(report, args.out, log=print, timelines=args.timelines)
    except ResultFileError as e:
        print(f"analysis: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:
        where = e.filename or args.out
        print(f"analysis: error: {where}: cannot write the report ({e.strerror or e})",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
