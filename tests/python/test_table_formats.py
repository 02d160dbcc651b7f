"""Every table `moefin show --table` writes, of every committed result file, read back by the
tools people use: pandas gets the stored columns and values from the CSV (RFC 4180 quoting:
the `key` column holds commas), `json` loads the JSON, Markdown has a line per row."""
import io
import json

import h5py
import numpy as np
import pandas as pd
import pytest

from conftest import ROOT, run

FILES = sorted((ROOT / "data").rglob("*.h5"))
TABLES = [(f, g) for f in FILES for g in h5py.File(f, "r")
          if h5py.File(f, "r")[g].attrs.get("kind") in ("table", b"table")]


def stored(path, group):
    with h5py.File(path, "r") as f:
        rows = f[group]["table"][()]
    return {n: (np.char.decode(rows[n]) if rows.dtype[n].kind == "S" else rows[n])
            for n in rows.dtype.names}


def test_every_committed_table_is_covered():
    assert len(FILES) >= 9 and len(TABLES) >= 12
    assert {g for _, g in TABLES} >= {"finalize_sweep", "race_matrix", "layer_sweep",
                                      "equivalence", "pdl_probe", "finalize_check"}


@pytest.mark.parametrize("path,group", TABLES, ids=[f"{f.name}:{g}" for f, g in TABLES])
def test_csv_reads_back_with_the_stored_columns_and_values(moefin, path, group):
    proc = run(moefin, "show", path, "--table", group, "--format", "csv")
    want = stored(path, group)
    # keep strings as strings (an empty first_seed is '', not NaN)
    strings = {n: str for n, v in want.items() if v.dtype.kind == "U"}
    df = pd.read_csv(io.StringIO(proc.stdout), dtype=strings, keep_default_na=False,
                     na_values={n: [""] for n, v in want.items() if v.dtype.kind == "f"})
    assert list(df.columns) == list(want), group
    assert len(df) == len(want["key"])
    for n, v in want.items():
        got = df[n].to_numpy()
        if v.dtype.kind == "U":
            assert (got.astype(str) == v).all(), n
        elif v.dtype.kind == "f":
            np.testing.assert_array_equal(got.astype(float), v, err_msg=n)  # full precision
        else:
            assert (got == v).all(), n


@pytest.mark.parametrize("path,group", TABLES[:4] + TABLES[-3:],
                         ids=[f"{f.name}:{g}" for f, g in TABLES[:4] + TABLES[-3:]])
def test_json_and_markdown_and_text(moefin, path, group):
    want = stored(path, group)
    doc = json.loads(run(moefin, "show", path, "--table", group, "--format", "json").stdout)
    assert doc["name"] == group and doc["columns"] == list(want)
    assert len(doc["rows"]) == len(want["key"])
    assert [r["key"] for r in doc["rows"]] == list(want["key"])
    md = run(moefin, "show", path, "--table", group, "--format", "md").stdout.splitlines()
    body = [line for line in md if line.startswith("| ")]
    assert len(body) == len(want["key"]) + 2  # header, alignment line, rows
    assert md[0] == f"**/{group} of {path}**"
    text = run(moefin, "show", path, "--table", group, "--format", "text").stdout.splitlines()
    assert text[1].split() == list(want)


def test_overview_as_json_and_format_errors(moefin):
    path = ROOT / "data" / "h200" / "h200_chain_race.h5"
    doc = json.loads(run(moefin, "show", path, "--format", "json").stdout)
    assert doc["provenance"]["carveout"] == "max-shared"
    race = next(g for g in doc["groups"] if g["name"] == "race_matrix")
    assert race["kind"] == "table" and race["rows"] == 252
    assert {"name": "key", "type": "string"} in race["columns"]
    bad = run(moefin, "show", path, "--format", "csv", check=False)
    assert bad.returncode == 2 and "needs --table GROUP" in bad.stderr
    bad = run(moefin, "show", path, "--table", "race_matrix", "--format", "xml", check=False)
    assert bad.returncode == 2 and "--format: value 'xml' not one of" in bad.stderr
