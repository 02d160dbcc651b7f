"""moefin audit --chain with a launch of several alternatives: the JSON's `chains` give every
distinct chain's verdicts (tools/audit/released_chain.py looks single choices up in them).
Inputs: the test build's tests/audit/pdl_cases.sm_90.cubin (built with test_audit)."""
import json
import os
import pathlib

import pytest

from conftest import ROOT, run

CUBIN = pathlib.Path(os.environ.get("MOEFIN_BUILD_DIR", ROOT / "build")) / "tests" / "audit" / \
    "pdl_cases.sm_90.cubin"


def test_every_distinct_chain_has_its_verdicts(moefin, tmp_path):
    if not CUBIN.is_file():
        pytest.skip("%s not built (the test_audit target builds it)" % CUBIN)
    # straight_line waits, triggers, then writes param_2; it reads param_0 before its wait.
    # roles_trigger_early at 64 threads: warp 1 triggers before any wait (tests/audit/pdl_cases.cu).
    launches = {
        "name": "alternatives",
        "launches": [
            {"name": "producer", "kernel": "straight_line", "params": {"param_2": "data"}},
            {"name": "middle", "kernel": [{"kernel": "straight_line"},
                                          {"kernel": "roles_trigger_early", "threads": 64}]},
            {"name": "consumer", "kernel": "straight_line", "params": {"param_0": "data"}},
        ],
        "check": [{"launch": "consumer", "buffer": "data", "where": "before_wait"}],
    }
    lf = tmp_path / "launches.json"
    lf.write_text(json.dumps(launches))
    out = tmp_path / "chain.json"
    p = run(moefin, "audit", CUBIN, "--chain", lf, "--chain-only", "--json", out, "-q",
            check=False)
    assert p.returncode == 1, p.stdout + p.stderr  # one choice races
    j = json.loads(out.read_text())
    assert j["choices"] == 2 and j["distinct_chains"] == 2
    middle = j["fragment_classes"][1]["classes"]
    by_kernel = {k: ci for ci, c in enumerate(middle) for k in c["kernels"]}
    chains = {tuple(c["classes"]): c for c in j["chains"]}
    assert sum(c["choices"] for c in j["chains"]) == 2
    linked = chains[(0, by_kernel["straight_line"], 0)]
    early = chains[(0, by_kernel["roles_trigger_early"], 0)]
    assert linked["verdict"] == "ordered"
    assert linked["checks"] == [{"outcome": "ordered after producer's writes through middle",
                                 "verdict": "ordered"}]
    assert early["checks"][0]["verdict"] == "race"
    assert early["checks"][0]["outcome"].startswith("RACE with producer's writes: no kernel of "
                                                    "middle waits before it triggers")
