"""python -m analysis report FILE_OR_DIR... [--out DIR] [--published DIR] [--chains DIR]

Exit status: 0 written; 1 a bad input file or an unwritable output (one line naming it);
2 bad usage.

The report is written into a fresh folder beside DIR (`.DIR.XXXX.partial`) and swapped in when
it is complete, so DIR holds either the previous report or the new one, never a mixture; a DIR
that holds anything else than a report is refused rather than replaced.
"""
import argparse
import ctypes
import ctypes.util
import errno
import os
import pathlib
import shutil
import sys
import tempfile

import matplotlib

matplotlib.use("Agg")

from . import CHAINS_DIR, PUBLISHED_DIR  # noqa: E402
from .errors import ResultFileError  # noqa: E402
from .report import FILES_WRITTEN, build_report, write_report  # noqa: E402

# What write_report puts into DIR (its top-level names): all a folder may hold to be replaced.
REPORT_ENTRIES = {name.split("/")[0] for name, _ in FILES_WRITTEN}
_RENAME_EXCHANGE = 2  # linux/fs.h


def _parser():
    prog = os.environ.get("MOEFIN_REPORT_PROG", "python -m analysis")
    p = argparse.ArgumentParser(prog=prog, description="Tables, figures and one report from "
                                "moefin result files (HDF5) and the published tables.")
    sub = p.add_subparsers(dest="command", required=True, metavar="report")
    r = sub.add_parser("report", help="write report.md, tables/ and figures/",
                       description="Reads every result file (directories are searched for "
                       "*.h5 and *.hdf5), validates it against docs/reference/result-files.md, "
                       "merges the files into one column per architecture (root attributes arch + "
                       "gpu_name) "
                       "beside the published columns, and writes DIR/report.md, "
                       "DIR/tables/*.md|.tex and DIR/figures/*.png|.pdf (into a fresh folder "
                       "beside DIR, swapped in when complete).")
    r.add_argument("inputs", nargs="+", metavar="FILE_OR_DIR", help="result files or directories")
    r.add_argument("--out", "-o", default="out/report", metavar="DIR",
                   help="output directory (default: out/report); replaced as a whole")
    r.add_argument("--published", default=str(PUBLISHED_DIR), metavar="DIR",
                   help=f"directory of the published CSVs (default: {PUBLISHED_DIR})")
    r.add_argument("--timelines", choices=("representative", "all"), default="representative",
                   help="per-CTA timeline figures: a few representative ones per family "
                   "(default), or every one")
    r.add_argument("--chains", default=str(CHAINS_DIR), metavar="DIR",
                   help="directory of the chain descriptions whose `measured` blocks hold the "
                   f"H200 table of docs/design/pdl.md (default: {CHAINS_DIR})")
    return p


class OutputError(Exception):
    """The output directory cannot be written or replaced: "DIR: what is wrong"."""

    def __init__(self, path, what):
        super().__init__(f"{path}: {what}")


def _check_replaceable(out):
    """DIR may be absent, empty or an earlier report; anything else is not ours to replace."""
    if not os.path.lexists(out):
        return
    if out.is_symlink() or not out.is_dir():
        raise OutputError(out, "exists and is not a directory (give another --out)")
    try:
        entries = set(os.listdir(out))
    except OSError as e:
        raise OutputError(out, f"cannot list it ({e.strerror})") from None
    other = sorted(entries - REPORT_ENTRIES)
    if other:
        raise OutputError(out, f"exists and holds other files than a report ({', '.join(other[:3])}"
                               f"{', ...' if len(other) > 3 else ''}); give another --out")


def _exchange(a, b):
    """Atomically swaps two directories (renameat2 RENAME_EXCHANGE); False where unsupported."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    rc = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(b))


def _swap_in(fresh, out):
    """Puts the finished report `fresh` at `out`; the previous report goes only afterwards."""
    if not os.path.lexists(out):
        os.rename(fresh, out)
        return
    _check_replaceable(out)  # again: it may have changed while the report was being written
    if _exchange(fresh, out):
        shutil.rmtree(fresh, ignore_errors=True)  # now the previous report
        return
    # Without an atomic exchange: the previous report is moved aside first, so that a run killed
    # in between leaves it beside DIR rather than destroying it.
    old = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
    os.rmdir(old)
    os.rename(out, old)
    os.rename(fresh, out)
    shutil.rmtree(old, ignore_errors=True)


def run_report(args):
    out = pathlib.Path(args.out)
    _check_replaceable(out)  # before the work, so a wrong --out fails at once
    report = build_report(args.inputs, args.published, log=print, chains_dir=args.chains)
    print(f"analysis: {len(report.files)} result file(s), {len(report.results)} measured "
          f"architecture(s): {', '.join(r.column.label for r in report.results) or 'none'}")
    parent = out.parent if str(out.parent) else pathlib.Path(".")
    try:
        parent.mkdir(parents=True, exist_ok=True)
        fresh = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial",
                                              dir=parent))
    except OSError as e:
        raise OutputError(out, f"cannot create a folder beside it ({e.strerror or e})") from None
    try:
        # Messages name DIR, where the report ends up, not the folder it is written in.
        write_report(report, fresh, log=lambda m: print(m.replace(str(fresh), str(out))),
                     timelines=args.timelines)
        _swap_in(fresh, out)
    except BaseException:
        shutil.rmtree(fresh, ignore_errors=True)
        raise
    return 0


def main(argv=None):
    parser = _parser()
    args = parser.parse_args(argv)
    # pathlib reads '' as '.': an empty name would report whatever lies in the current folder
    if any(not str(i).strip() for i in args.inputs):
        parser.error("FILE_OR_DIR: an empty name is not a file or folder")
    if not str(args.out).strip():
        parser.error("--out: an empty name is not a folder")
    try:
        return run_report(args)
    except ResultFileError as e:
        print(f"analysis: error: {e}", file=sys.stderr)
    except OutputError as e:
        print(f"analysis: error: {e}", file=sys.stderr)
    except OSError as e:
        where = e.filename or args.out
        print(f"analysis: error: {where}: cannot write the report ({e.strerror or e})",
              file=sys.stderr)
    except MemoryError:
        print("analysis: error: out of memory", file=sys.stderr)
    except RecursionError:
        print("analysis: error: an input nests too deeply", file=sys.stderr)
    return 1


def _entry():
    """The command line: every failure is one line, never a traceback."""
    try:
        return main()
    except KeyboardInterrupt:
        print("analysis: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - the last line of defence against a traceback
        text = str(e).strip().splitlines()
        print(f"analysis: error: {type(e).__name__}: {text[0][:200] if text else ''}",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(_entry())
