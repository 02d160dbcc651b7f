"""The tables printed from every committed data/ file are the stored goldens, byte for byte
(tests/goldens/: MANIFEST names each command; update.py wrote the outputs)."""
import hashlib
import pathlib
import shlex
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDENS = ROOT / "tests" / "goldens"
sys.path.insert(0, str(GOLDENS))

import update  # noqa: E402  (tests/goldens/update.py: the manifest and the report's tables)

ENTRIES = list(update.manifest())


@pytest.mark.parametrize("name,check,args", ENTRIES, ids=[e[0] for e in ENTRIES])
def test_command_output_is_the_golden(moefin, name, check, args):
    proc = subprocess.run([str(moefin), *args], cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    assert proc.returncode == 0, proc.stdout.decode(errors="replace")
    if check == "sha256":
        want = (GOLDENS / f"{name}.sha256").read_text().strip()
        assert hashlib.sha256(proc.stdout).hexdigest() == want, f"moefin {shlex.join(args)}"
    else:
        want = (GOLDENS / name).read_bytes()
        assert proc.stdout == want, f"moefin {shlex.join(args)} differs from tests/goldens/{name}"


def test_report_tables_are_the_goldens():
    got = update.report_tables()
    stored = {p.stem: p.read_text(encoding="utf-8") for p in (GOLDENS / "report").glob("*.md")}
    assert sorted(got) == sorted(stored)
    for name, text in got.items():
        assert text == stored[name], f"report table {name} differs from tests/goldens/report"
