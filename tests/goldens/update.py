"""Writes the golden outputs of every table command over the committed data/ files.

    .venv/bin/python tests/goldens/update.py [MOEFIN_BINARY]

Each line of MANIFEST is `NAME<TAB>CHECK<TAB>ARGS`: the output of `moefin ARGS` (run from the
repository root, stdout and stderr together) is stored as NAME (CHECK = text), or as its SHA-256
in NAME.sha256 (CHECK = sha256: outputs of megabytes). The report's tables (analysis/, the
`tables/*.md` of `python -m analysis report data/`) go to report/<table>.md.
tests/python/test_goldens.py compares byte for byte. Regenerate only for a deliberate change of a
table, and say so in the commit.
"""
import hashlib
import pathlib
import shlex
import subprocess
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def manifest():
    for line in (HERE / "MANIFEST").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, check, args = line.split("\t")
            yield name, check, shlex.split(args)


def run(binary, args):
    proc = subprocess.run([str(binary), *args], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        raise SystemExit(f"moefin {' '.join(args)} exited {proc.returncode}:\n"
                         f"{proc.stdout.decode(errors='replace')}")
    return proc.stdout


def report_tables():
    """{name: markdown} of the report of data/, as `python -m analysis report data/` writes it."""
    sys.path.insert(0, str(ROOT))
    from analysis import build_report
    return {t.name: t.to_markdown() for t in build_report([ROOT / "data"]).tables}


def main():
    binary = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "moefin")
    for name, check, args in manifest():
        out = run(binary, args)
        if check == "sha256":
            (HERE / f"{name}.sha256").write_text(hashlib.sha256(out).hexdigest() + "\n")
        else:
            (HERE / name).write_bytes(out)
    report = HERE / "report"
    report.mkdir(exist_ok=True)
    for old in report.glob("*.md"):
        old.unlink()
    for name, text in report_tables().items():
        (report / f"{name}.md").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
