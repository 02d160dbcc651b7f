"""`moefin sweep finalize --estimate` (rows and time from the cost model, no GPU) and `moefin
info --check` as a gate for GPU jobs."""
import re

from conftest import ROOT, run

LOG = ROOT / "data" / "h200" / "h200_finalize_log.txt"
LINE = re.compile(r": (\d+) rows .*expected ~[\d.]+ min on an H200-class GPU \((\d+) s, (\d+) s "
                  r"of it timed replays")


# The variants of that run (the default list has grown since: small_batch_v2).
RUN_VARIANTS = ("scalar,small_batch,small_batch_nosplit,small_batch_late_trigger,"
                "small_batch_meta_after_wait,vecload")


def estimate(moefin, *args):
    proc = run(moefin, "sweep", "finalize", "--estimate", "--variants", RUN_VARIANTS, *args,
               check=False)
    m = LINE.search(proc.stdout)
    assert m, proc.stdout + proc.stderr
    return proc, int(m.group(1)), int(m.group(2)), int(m.group(3))


def test_full_grid_estimate_is_the_measured_h200_run(moefin):
    """The host constants were fitted to this run, so this guards the model against drifting
    away from the one measurement it stands on."""
    measured = float(re.search(r"\[sweep finalize\] 1152 configurations in ([\d.]+)s",
                               LOG.read_text()).group(1))
    proc, rows, total, timed = estimate(moefin, "--repeat-shapes", 0)
    assert proc.returncode == 0
    assert rows == 20736  # as written into h200_finalize_sweep.h5 by that run
    assert abs(total - 1.5 - measured) < 0.15 * measured, (total, measured)
    assert 0 < timed < total


def test_estimate_follows_rounds_launches_and_the_selection(moefin):
    _, rows, total, timed = estimate(moefin, "--hidden", "2048,4096")
    _, rows2, total2, timed2 = estimate(moefin, "--hidden", "2048,4096", "--rounds", 11)
    assert rows2 == rows
    assert abs(timed2 / timed - 12 / 6) < 0.02  # rounds + 1 replays of every graph
    _, rows3, _, timed3 = estimate(moefin, "--hidden", "2048,4096", "--launches", 200)
    assert rows3 == rows and abs(timed3 / timed - 2) < 0.02
    _, rows4, total4, _ = estimate(moefin, "--hidden", "2048,4096", "--modes", "a")
    assert rows4 * 3 == rows and total4 < total / 2


def test_empty_selection_warns_and_a_run_refuses(moefin):
    proc, rows, total, timed = estimate(moefin, "--l2", "cold", "--modes", "b")
    assert proc.returncode == 0 and rows == 0 and total == 0 and timed == 0
    assert "note: mode b is not measured with cold L2" in proc.stdout
    assert proc.stderr.strip() == ("moefin: warning: --modes b --l2 cold selects nothing to "
                                   "measure (every cell is skipped: see the notes); add --l2 hot "
                                   "or another mode")
    run_ = run(moefin, "sweep", "finalize", "--l2", "cold", "--modes", "b", check=False)
    assert run_.returncode == 2
    assert run_.stderr.strip().startswith("moefin: error: --modes b --l2 cold selects nothing")
    # cold L2 skips the shapes too small to rotate through twice the L2, and says so
    proc, rows, _, _ = estimate(moefin, "--hidden", "1024", "--tokens", "1,64", "--l2", "cold",
                                "--modes", "a")
    assert 0 < rows < 2 * 9 * 2 * 6 and "note: cold L2 needs more than 4096" in proc.stdout


def test_help_says_how_the_estimate_is_derived(moefin):
    out = run(moefin, "sweep", "finalize", "--help").stdout
    for words in ("floor + us/MB x bytes", "least squares on the H200 medians", "86 s"):
        assert words in out.replace("\n", " "), words


def test_info_check_fails_without_a_usable_gpu(moefin):
    info = run(moefin, "info").stdout
    proc = run(moefin, "info", "--check", check=False)
    if "GPU: no CUDA device" in info:
        reason = re.search(r"GPU: no CUDA device \((.*)\)", info).group(1)
        assert proc.returncode == 1
        assert f"device check: FAILED, no usable GPU ({reason})" in proc.stdout
    else:  # on a GPU machine the round trip decides
        assert proc.returncode == (0 if "device check: ok" in proc.stdout else 1), proc.stdout


def test_producer_of_mode_b_is_one_of_two_names(moefin):
    """--producer picks mode b's producer (docs/design/experiments.md: pdl-wait, the default) or the
    plain one of the files before it; anything else is a one-line usage error."""
    ok = run(moefin, "sweep", "finalize", "--estimate", "--producer", "plain", check=False)
    assert ok.returncode == 0, ok.stderr
    bad = run(moefin, "sweep", "finalize", "--estimate", "--producer", "eager", check=False)
    assert bad.returncode == 2
    assert "--producer" in bad.stderr and "eager" in bad.stderr and "pdl-wait" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    helptext = run(moefin, "sweep", "finalize", "--help").stdout
    assert "--producer" in helptext and "mode_b_producer" in helptext


def test_list_shows_the_shards_part_and_the_parts_cover_the_grid(moefin):
    """`--list --shard I/N` shows what that shard would run; the N lists partition the whole."""
    def units(*args):
        out = run(moefin, "sweep", "finalize", "--list", "--hidden", "2048,4096", *args).stdout
        return [line.split()[0] for line in out.splitlines() if line.startswith("[")], out

    whole, _ = units()
    parts = [units("--shard", f"{i}/3") for i in range(3)]
    assert all(f"of {len(whole)} units" in out for _, out in parts)
    assert all(0 < len(p) < len(whole) for p, _ in parts)
    assert sorted(u for p, _ in parts for u in p) == sorted(whole)
    bad = run(moefin, "sweep", "finalize", "--list", "--shard", "3/3", check=False)
    assert bad.returncode == 2 and "'3/3' has I >= N" in bad.stderr


def test_print_does_not_silently_drop_a_planning_flag(moefin):
    sweep = ROOT / "data" / "h200" / "h200_finalize_sweep.h5"
    for flag in ("--estimate", "--list"):
        proc = run(moefin, "sweep", "finalize", flag, "--print", sweep, check=False)
        assert proc.returncode == 2, (flag, proc.stderr)
        assert "give one of them" in proc.stderr and proc.stdout == "", flag


def test_an_empty_grid_value_is_an_error_not_the_default(moefin):
    for flag in ("--hidden", "--tokens", "--top-k", "--weights"):
        for command in ("sweep", "check"):
            proc = run(moefin, command, "finalize", "--list", flag, "", check=False)
            assert proc.returncode == 2, (command, flag, proc.stdout[:200])
            assert f"{flag}: empty list" in proc.stderr, (command, flag, proc.stderr)
