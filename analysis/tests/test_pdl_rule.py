"""The DESIGN.md section 3 rule the report applies to race-matrix cells (analysis.pdl) gives the
verdict of `moefin verify` on the same cells: `moefin race --describe` prints each cell's
kernels, written here as a chain description (data/README.md, "Chain descriptions")."""
import json
import re
import subprocess

import pytest

from analysis.pdl import probe_signature, race_cell_rule


def chain_of(cell):
    """A `moefin race --describe` cell as a chain: each kernel's ops in the order its trigger
    placement gives (finalize's 'default' trigger taken at entry, the weakest)."""
    kernels, buffers = [], set()
    for k in cell["kernels"]:
        pre = [f"read {b}" for b in k["reads_before_wait"]]
        post = [f"read {b}" for b in k["reads_after_wait"]] + [f"write {b}" for b in k["writes"]]
        buffers |= set(k["reads_before_wait"]) | set(k["reads_after_wait"]) | set(k["writes"])
        wait = ["wait"] if k["waits"] else []
        path = {"entry": ["trigger"] + pre + wait + post,
                "default": ["trigger"] + pre + wait + post,
                "after_wait": pre + wait + ["trigger"] + post,
                "after_writes": pre + wait + post + ["trigger"],
                "exit": pre + wait + post}[k["trigger"]]
        kernels.append({"name": k["name"], "pdl": k["pdl"], "path": path})
    return {"name": "race_cell", "buffers": {b: "moefin race buffer" for b in sorted(buffers)},
            "kernels": kernels, "iterations": 2}


def test_rule_gives_the_verifier_verdict_of_every_race_cell(moefin_binary, tmp_path):
    proc = subprocess.run([str(moefin_binary), "race", "--describe", "--delays", "0"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    parts = re.split(r"^# (.*)$", proc.stdout, flags=re.M)[1:]
    cells = list(zip(parts[0::2], parts[1::2]))
    assert len(cells) > 50
    verdicts = set()
    for key, text in cells:
        cell = json.loads(text)
        path = tmp_path / "cell.json"
        path.write_text(json.dumps(chain_of(cell)))
        v = subprocess.run([str(moefin_binary), "verify", str(path), "--quiet"],
                           capture_output=True, text=True)
        assert v.returncode in (0, 1), v.stdout + v.stderr
        trig = {k["name"]: k["trigger"] for k in cell["kernels"]}
        triggers = ",".join(f"{n}={trig[n]}" for n in ("permute", "gemm1", "act", "gemm2"))
        meta = re.search(r"meta=(\w+)", key).group(1)
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
