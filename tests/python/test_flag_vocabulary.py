"""One flag vocabulary (docs/reference/flags.md; `moefin --help`): the renamed spellings
fail at parse time, so a script or test that still uses one would only fail when it runs (a GPU
script: on the GPU). This walks the scripts, tests and documentation for them, and checks that no
command's default value uses the old range spelling `lo-hi` (ranges are `lo:hi[:step]`)."""
import re

from conftest import ROOT, run

# The table of renamed spellings is core/cli.cpp's renamed_flags(); read it from there so that
# the two cannot drift apart.
_TABLE = re.findall(r'\{"(--[a-z-]+)", "(--[a-z-]+)"(?:, "([a-z -]+)")?\}',
                    (ROOT / "core" / "cli.cpp").read_text())
# Renamed in every command, and renamed in one command (e.g. sweep finalize --table -> --print).
RENAMED = [(old, new) for old, new, command in _TABLE if not command]
SCOPED = [(old, new, command) for old, new, command in _TABLE if command]

# An integer list value written with the old range spelling: "--tokens 1-16", "--sizes=1-30";
# not other programs' flags (sbatch --array=0-7).
OLD_RANGE = re.compile(r"--(?!array\b)[a-z][a-z-]*[ =]['\"]?(\d+,)*\d+-\d+\b")

# Where a renamed spelling may appear: the table itself, the tests of the refusal, and records
# of past runs (data/, the goldens' provenance lines), and the reference page that lists them.
ALLOWED = {"core/cli.cpp", "tests/test_cli.cpp", "tests/python/test_flag_vocabulary.py",
           "docs/reference/flags.md"}
SUFFIXES = {".sh", ".py", ".cpp", ".hpp", ".cu", ".md", ".ipynb"}
FOLDERS = ("scripts", "tools", "tests", "analysis", "experiments", "core", "kernels", "notebooks",
           "docs")


def _files():
    yield ROOT / "README.md"
    for folder in FOLDERS:
        base = ROOT / folder
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*")):
            rel = path.relative_to(ROOT).as_posix()
            if (path.is_file() and path.suffix in SUFFIXES and rel not in ALLOWED
                    and not rel.startswith("tests/goldens/")):
                yield path


def test_the_table_of_renamed_spellings_is_read():
    assert ("--shape", "--shapes") in RENAMED
    assert ("--delays", "--delay-ns") in RENAMED
    assert ("--table", "--print", "sweep finalize") in SCOPED


def test_no_script_test_or_document_uses_a_renamed_spelling():
    hits = []
    for path in _files():
        lines = path.read_text(errors="replace").splitlines()
        # A line that names the renaming itself (README) may quote the old spellings.
        for number, line in enumerate(lines, 1):
            if "renamed" in line:
                continue
            where = f"{path.relative_to(ROOT)}:{number}"
            for old, new in RENAMED:
                # The old flag as a word of a command line: not a prefix of a longer flag.
                if re.search(re.escape(old) + r"(?![a-z-])", line):
                    hits.append(f"{where}: {old} (now {new})")
            for old, new, command in SCOPED:
                # The command's words, then its old flag, on one line: shell words or the items
                # of a Python/C++ argument list ("sweep", "finalize", "--table").
                sep = r"""["']?,?\s*["']?"""
                words = sep.join(map(re.escape, command.split()))
                if re.search(words + r"""["']?(?:,?\s+\S+)*?,?\s*["']?""" + re.escape(old) +
                             r"(?![a-z-])", line):
                    hits.append(f"{where}: {command} {old} (now {new})")
            hits += [f"{where}: range '{m.group(0)}' (now lo:hi)" for m in OLD_RANGE.finditer(line)]
    assert not hits, "renamed spellings in use:\n" + "\n".join(hits)


def test_no_default_value_uses_the_old_range_spelling(moefin):
    listing = run(moefin, "--help").stdout
    commands = re.findall(r"^  (\S+(?: [a-z]+)?)\s{2,}", listing, flags=re.M)
    assert {"race", "sweep finalize", "sweep layer", "check finalize"} <= set(commands), listing
    bad = []
    for command in commands:
        help_ = run(moefin, *command.split(), "--help", check=False).stdout
        bad += [f"{command}: {d}" for d in re.findall(r"\(=([^)]*\d-\d[^)]*)\)", help_)]
    assert not bad, "defaults written lo-hi (ranges are lo:hi):\n" + "\n".join(bad)
