"""The ordering rule of docs/design/pdl.md the report applies to race-matrix cells (analysis.pdl)
gives the verdict of `moefin verify` on the same cells, as `moefin race --describe` prints them."""
import json
import re
import subprocess

import pytest

from analysis.pdl import probe_signature, race_cell_rule


def test_rule_gives_the_verifier_verdict_of_every_race_cell(moefin_binary, tmp_path):
    """`moefin race --describe` prints each cell's chain in the format `moefin verify` reads;
    the rule's verdict from the cell's trigger placements must be the verifier's."""
    proc = subprocess.run([str(moefin_binary), "race", "--describe", "--delay-ns", "0"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    parts = re.split(r"^# (.*)$", proc.stdout, flags=re.M)[1:]
    cells = list(zip(parts[0::2], parts[1::2]))
    assert len(cells) > 50
    verdicts = set()
    for key, text in cells:
        cell = json.loads(text)
        path = tmp_path / "cell.json"
        path.write_text(json.dumps(cell))
        v = subprocess.run([str(moefin_binary), "verify", str(path), "--quiet"],
                           capture_output=True, text=True)
        assert v.returncode in (0, 1), v.stdout + v.stderr
        trig = dict(re.findall(r"(\w+)\{trigger=(\w+)\}", cell["description"]))
        triggers = ",".join(f"{n}={trig[n]}" for n in ("permute", "gemm1", "act", "gemm2"))
        meta = re.search(r"meta=(\w+)", key).group(1)
        if "finalize small_batch" not in key and "finalize vecload" not in key:
            meta = "after"  # scalar and deepseek_fp8 read their metadata after the wait
        rule = race_cell_rule(triggers, meta)
        assert rule == ("race" if v.returncode == 1 else "ordered"), (key, v.stdout[-400:])
        verdicts.add(rule)
    assert verdicts == {"race", "ordered"}


@pytest.mark.parametrize("triggers,meta,verdict", [
    ("permute=entry,gemm1=entry,act=entry,gemm2=entry", "after", "ordered"),
    ("permute=entry,gemm1=default,act=entry,gemm2=entry", "before", "unknown"),
    ("permute=entry,act=entry,gemm2=entry", "before", "unknown"),
    ("permute=entry,gemm1=entry,act=entry,gemm2=entry", "sometimes", "unknown")])
def test_rule_says_unknown_for_what_it_cannot_read(triggers, meta, verdict):
    assert race_cell_rule(triggers, meta) == verdict


def test_probe_names_read_as_trigger_orders():
    assert probe_signature("producer -> consumer") == (False, (), True)
    assert probe_signature("producer (trigger at end) -> consumer") == (True, (), True)
    assert probe_signature("producer -> m1 (after) -> m2 (before) -> consumer") == \
        (False, (False, True), True)
    assert probe_signature("producer -> middle (trigger before its wait) -> consumer") == \
        (False, (True,), True)
    assert probe_signature("producer -> middle -> consumer") is None
