"""scripts/gpu/sharded.sh on the host (SHARD_SELFTEST=1: every phase but the build, with
`moefin sweep synthetic` grids): both launchers, one and two "GPUs", a second call that finds
everything done, and the files it promises in $OUT with a merged grid equal to one run's rows.
"""
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, run
from analysis import shards

SCRIPT = ROOT / "scripts" / "gpu" / "sharded.sh"
FILES = {"sharded_log.txt", "sharded_summary.json", "sharded_finalize_sweep.h5",
         "sharded_finalize_check.h5", "sharded_shards.tar.gz"}


def script(tmp, moefin, **env):
    e = dict(os.environ, SHARD_SELFTEST="1", OUT=str(tmp / "out"), SHARD_WORK=str(tmp / "work"),
             SHARD_PYTHON=sys.executable, MOEFIN_BINARY=str(moefin), **env)
    proc = subprocess.run(["bash", str(SCRIPT)], env=e, capture_output=True, text=True,
                          cwd=ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


LAUNCHERS = ["hand"] + (["mpirun"] if shutil.which("mpirun") else [])


@pytest.mark.parametrize("launcher", LAUNCHERS)
@pytest.mark.parametrize("gpus", [1, 2])
def test_every_phase_runs_and_the_merged_grid_equals_one_run(tmp_path, moefin, launcher, gpus):
    out = script(tmp_path, moefin, SHARD_LAUNCHER=launcher, SHARD_GPUS=str(gpus))
    files = {p.name for p in (tmp_path / "out").iterdir()}
    expected = FILES | ({"sharded_spread_gpu0.h5", "sharded_spread_gpu1.h5"} if gpus > 1 else set())
    assert files == expected
    assert len(files) <= 8  # what comes back from the GPU machine
    log = (tmp_path / "out" / "sharded_log.txt").read_text()
    for phase in ["check", "grid"] + (["spread"] if gpus > 1 else []):
        assert f"done: {phase}" in log.splitlines(), out
    summary = json.loads((tmp_path / "out" / "sharded_summary.json").read_text())
    assert summary["gpus"] == gpus and summary["launcher"] == launcher
    grid = summary["grid"]
    assert grid["shard_count"] == gpus and grid["merge_state"] == "complete"
    assert [s["done"] for s in grid["shards"]] == [s["planned"] for s in grid["shards"]]
    assert sum(s["done"] for s in grid["shards"]) == grid["configurations"] == 180
    assert (summary["spread"] is not None) == (gpus > 1)
    one = tmp_path / "one.h5"
    run(moefin, "sweep", "synthetic", "--sizes", "1-60", "--out", one)
    ok, text = shards.same_rows(one, tmp_path / "out" / "sharded_finalize_sweep.h5",
                                "synthetic_sweep", ["n", "variant", "median", "min"])
    assert ok, text


def test_a_second_call_with_the_first_calls_files_skips_what_is_done(tmp_path, moefin):
    script(tmp_path / "a", moefin, SHARD_LAUNCHER="hand", SHARD_GPUS="2")
    second = script(tmp_path / "b", moefin, SHARD_LAUNCHER="hand", SHARD_GPUS="2",
                    SHARD_RESUME_DIR=str(tmp_path / "a" / "out"))
    assert "done before: check grid spread" in second
    assert ": moefin " not in second  # nothing launched again
    assert (tmp_path / "b" / "out" / "sharded_finalize_sweep.h5").is_file()


def test_a_grid_cut_short_resumes_in_the_next_call_from_the_returned_shards(tmp_path, moefin):
    first = script(tmp_path / "a", moefin, SHARD_LAUNCHER="hand", SHARD_GPUS="2",
                   SHARD_SELFTEST_STOP="20")
    assert "grid: incomplete" in first
    log = (tmp_path / "a" / "out" / "sharded_log.txt").read_text().splitlines()
    assert "done: check" in log and "done: grid" not in log
    summary = json.loads((tmp_path / "a" / "out" / "sharded_summary.json").read_text())
    assert summary["grid"]["merge_state"] == "partial"
    assert summary["grid"]["missing_configurations"] == 180 - 2 * 20
    second = script(tmp_path / "b", moefin, SHARD_LAUNCHER="hand", SHARD_GPUS="2",
                    SHARD_RESUME_DIR=str(tmp_path / "a" / "out"))
    assert "--resume" in second and "grid: merged" in second
    summary = json.loads((tmp_path / "b" / "out" / "sharded_summary.json").read_text())
    assert summary["grid"]["merge_state"] == "complete"
    one = tmp_path / "one.h5"
    run(moefin, "sweep", "synthetic", "--sizes", "1-60", "--out", one)
    ok, text = shards.same_rows(one, tmp_path / "b" / "out" / "sharded_finalize_sweep.h5",
                                "synthetic_sweep", ["n", "variant", "median", "min"])
    assert ok, text
