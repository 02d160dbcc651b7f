"""Hostile inputs and interruption of the analysis package: every damaged, foreign, looping or
absurd input is one ResultFileError naming the file (one line on stderr, exit 1; never a
traceback), a bounded seeded corpus of mutants of the committed files proves it, and a report
killed at random moments never leaves a mixture of two reports behind."""
import os
import pathlib
import random
import re
import shutil
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest

from analysis import DATA_DIR, REPO_ROOT, ResultFileError, discover, load_result_file
from analysis import synthetic as syn

from .conftest import run_analysis

SEED = int(os.environ.get("MOEFIN_FUZZ_SEED", "20261203"), 0)
COMMITTED = sorted((DATA_DIR / "h200").glob("*.h5"))


def assert_one_line_error(proc, path, phrase=""):
    assert proc.returncode == 1, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{path}" in lines[0], lines[0]
    assert phrase in lines[0], lines[0]


def rejected(path, phrase):
    with pytest.raises(ResultFileError) as e:
        load_result_file(path)
    assert str(e.value).startswith(f"{path}: "), str(e.value)
    assert phrase in str(e.value), str(e.value)
    assert "\n" not in str(e.value)


@pytest.fixture()
def small(tmp_path):
    return syn.write_synthetic(tmp_path / "small.h5", experiments=("launch_floor", "timeline"))


def test_attribute_that_is_not_utf8(small):
    with h5py.File(small, "a") as f:
        f.attrs.create("host", np.bytes_(b"\xff\xfehost"))
    rejected(small, "attribute 'host' of / is not valid UTF-8")


def test_attribute_stored_as_an_array(small):
    with h5py.File(small, "a") as f:
        f.attrs["moefin_schema"] = ["moefin-results/1", "moefin-results/1"]
    rejected(small, "is an array of 2 values")


def test_soft_link_loop_and_external_link(small, tmp_path):
    loop = tmp_path / "loop.h5"
    shutil.copy(small, loop)
    with h5py.File(loop, "a") as f:
        f["zz_loop"] = h5py.SoftLink("/zz_loop")
    rejected(loop, "/zz_loop is a soft link")
    ext = tmp_path / "ext.h5"
    shutil.copy(small, ext)
    with h5py.File(ext, "a") as f:
        f["zz_ext"] = h5py.ExternalLink(str(small), "/")
    rejected(ext, "/zz_ext is an external link")


def test_absurd_extent_is_refused_before_reading(small):
    with h5py.File(small, "a") as f:
        f["launch_floor/table"].resize((10 ** 12,))
    rejected(small, "claims 1000000000000 elements")


def test_incomplete_and_unknown_states(small, tmp_path):
    other = tmp_path / "other.h5"
    shutil.copy(small, other)
    with h5py.File(small, "a") as f:
        f.attrs["moefin_state"] = "incomplete"
    rejected(small, "incomplete (moefin_state = incomplete")
    with h5py.File(other, "a") as f:
        f.attrs["moefin_state"] = "nearly"
    rejected(other, "unknown moefin_state 'nearly'")


def test_files_without_a_state_read_as_complete():
    # The committed files written before the state existed read as complete.
    old = []
    for p in COMMITTED:
        with h5py.File(p, "r") as f:
            if "moefin_state" not in f.attrs:
                old.append(p)
    assert old, "no committed file without moefin_state left to test"
    for p in old:
        load_result_file(p)


def test_empty_folder_and_link_loops_on_disk(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run_analysis("report", empty, "--out", tmp_path / "o")
    assert_one_line_error(proc, empty, "no result files")
    looping = tmp_path / "looping"
    looping.mkdir()
    os.symlink(looping, looping / "again")  # a directory loop is not followed
    os.symlink("self.h5", looping / "self.h5")  # a link to itself
    proc = run_analysis("report", looping, "--out", tmp_path / "o")
    assert_one_line_error(proc, looping / "self.h5", "broken or looping")


def test_no_traceback_from_the_command_line(tmp_path, small):
    with h5py.File(small, "a") as f:
        f["launch_floor/samples"].resize((10 ** 13,))
    proc = run_analysis("report", small, "--out", tmp_path / "o")
    assert_one_line_error(proc, small, "claims")
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------------------------------------
# The corpus: seeded mutants of the committed files (and of a synthetic one).

def _metadata_positions(data):
    pos = []
    for sig in (b"TREE", b"HEAP", b"SNOD", b"FRHP", b"FHDB", b"BTHD", b"BTLF", b"GCOL", b"OHDR"):
        pos += [m.start() for m in re.finditer(re.escape(sig), data)]
    return pos


def test_corpus_of_mutants_gives_results_or_one_error_naming_the_file(tmp_path, small):
    rng = random.Random(SEED)
    bases = COMMITTED + [small]
    counts = {"cases": 0, "read": 0, "rejected": 0, "other exceptions": 0}
    others = []
    for i in range(300):
        base = bases[rng.randrange(len(bases))]
        data = bytearray(base.read_bytes())
        meta = _metadata_positions(bytes(data))
        if rng.randrange(6) == 0:
            data = data[:rng.randrange(len(data))]
        else:
            for _ in range(1 + rng.randrange(8)):
                if meta and rng.randrange(4):
                    p = min(len(data) - 1, rng.choice(meta) + rng.randrange(96))
                else:
                    p = rng.randrange(len(data))
                data[p] = rng.randrange(256)
        path = tmp_path / f"m{i}.h5"
        path.write_bytes(bytes(data))
        counts["cases"] += 1
        try:
            load_result_file(path)
            counts["read"] += 1
        except ResultFileError as e:
            counts["rejected"] += 1
            assert str(e).startswith(f"{path}: ") and "\n" not in str(e), str(e)
        except Exception as e:  # noqa: BLE001 - what the corpus is looking for
            counts["other exceptions"] += 1
            others.append(f"{path.name} ({base.name}): {type(e).__name__}: {e}")
        path.unlink()
    print(f"[fuzz] analysis loader, seed {SEED}: {counts}")
    assert counts["other exceptions"] == 0, others[:5]
    assert counts["rejected"] > 0 and counts["read"] > 0  # the corpus reaches both outcomes


# ---------------------------------------------------------------------------------------------
# The report, killed.

def _report_generation(out):
    """Which input a complete report in `out` was made from, or None when it is not whole: every
    table file is the one report.md shows, every figure it shows is a complete PNG."""
    md = out / "report.md"
    if not md.is_file():
        return None
    text = md.read_text(encoding="utf-8")
    for t in (out / "tables").glob("*.md"):
        if t.read_text(encoding="utf-8") not in text:
            return None
    for png in re.findall(r"\]\((figures/[^)]+\.png)\)", text):
        data = (out / png).read_bytes() if (out / png).is_file() else b""
        if not data.endswith(b"IEND\xaeB`\x82"):
            return None
    for gen in ("H200", "B200"):
        if f"NVIDIA {gen}" in text:
            return gen
    return None


def test_report_killed_at_random_moments_leaves_one_whole_report(tmp_path):
    old_in = syn.write_synthetic(tmp_path / "old.h5", "NVIDIA H200", "sm_90",
                                 experiments=("launch_floor", "copy_bandwidth"))
    new_in = syn.write_synthetic(tmp_path / "new.h5", "NVIDIA B200", "sm_100",
                                 experiments=("launch_floor", "copy_bandwidth"))
    out = tmp_path / "report"
    env = {**os.environ, "MOEFIN_REPORT_JOBS": "1", "PYTHONPATH": str(REPO_ROOT)}
    cmd = [sys.executable, "-m", "analysis", "report", str(new_in), "--out", str(out)]
    first = subprocess.run([sys.executable, "-m", "analysis", "report", str(old_in), "--out",
                            str(out)], env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    assert first.returncode == 0, first.stderr
    baseline = out.with_name("baseline")
    shutil.copytree(out, baseline)
    t0 = time.monotonic()
    whole = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO_ROOT)
    span = time.monotonic() - t0
    assert whole.returncode == 0 and _report_generation(out) == "B200", whole.stderr
    rng = random.Random(SEED)
    kills = finished = mixed = 0
    while kills < int(os.environ.get("MOEFIN_KILLS", "50")):
        shutil.rmtree(out)
        shutil.copytree(baseline, out)
        for p in tmp_path.glob(".report.*"):
            shutil.rmtree(p, ignore_errors=True)
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, cwd=REPO_ROOT, start_new_session=True)
        time.sleep(rng.uniform(0, 1.05 * span))
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        if proc.returncode != -signal.SIGKILL:
            finished += 1
            continue
        kills += 1
        if _report_generation(out) not in ("H200", "B200"):
            mixed += 1
    print(f"[interrupt] report: a whole run takes {span:.2f} s; {kills} kills ({finished} runs "
          f"finished first); reports left mixed or partial: {mixed}")
    assert mixed == 0


def test_report_refuses_to_replace_a_folder_that_is_not_a_report(tmp_path, small):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("keep me")
    proc = run_analysis("report", small, "--out", out)
    assert_one_line_error(proc, out, "holds other files than a report")
    assert (out / "notes.txt").read_text() == "keep me"
