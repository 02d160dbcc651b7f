"""studies/: every study folder has a README with the required headings, names every file it holds,
and lists the command that wrote each of its result files (and of every canonical file in data/),
as the file's provenance records it. Needs no GPU and no moefin binary."""
import os
import re
import shlex

import h5py
import pytest

from conftest import ROOT, load_script

STUDIES = ROOT / "studies"
HEADINGS = ("Question", "Commands", "GPU and commit", "Finding", "Open")
# Codenames that a folder or file name must not use (names say what they hold); a name is split
# into words at '_', '-', '.', '/'.
CODENAMES = {"v2p", "v2w", "wpack", "wide", "tscale", "layerfix", "aa", "a100", "b0", "ff", "rc",
             "ly", "bw", "last", "call"}

sc = load_script("study_commands")


def study_dirs():
    return sorted(p for p in STUDIES.iterdir() if p.is_dir())


def files_of(study):
    return sorted(p.relative_to(study) for p in study.rglob("*")
                  if p.is_file() and p.relative_to(study).as_posix() != "README.md")


def sections(text):
    """{heading: body} of the README's level-2 sections, in order."""
    parts = re.split(r"^## (.+)$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts) - 1, 2)}


def commands_in(text):
    """The normalised commands of every fenced code block."""
    out = set()
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, flags=re.M | re.S):
        for line in block.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            try:
                tokens = shlex.split(line, comments=True)
            except ValueError:  # not a shell line (unbalanced quotes): not a command
                continue
            if tokens:
                out.add(sc.normalise_tokens(tokens))
    return out


def recorded_command(path):
    with h5py.File(path, "r") as f:
        value = f.attrs.get("command_line")
    assert value is not None, f"{path}: no command_line attribute"
    return value.decode() if isinstance(value, bytes) else str(value)


def readme(study):
    path = study / "README.md"
    assert path.is_file(), f"{study.relative_to(ROOT)} has no README.md"
    return path.read_text()


def test_there_are_studies_and_results_is_gone():
    assert len(study_dirs()) >= 10
    assert not (ROOT / "results").exists(), "results/ became studies/"


@pytest.mark.parametrize("study", study_dirs(), ids=lambda p: p.name)
def test_readme_has_the_headings_in_order_and_each_says_something(study):
    found = sections(readme(study))
    assert [h for h in found if h in HEADINGS] == list(HEADINGS), \
        f"{study.name}/README.md: headings {list(found)}, expected {list(HEADINGS)} in order"
    for h in HEADINGS:
        assert len(found[h].strip()) > 40, f"{study.name}/README.md: section '{h}' is empty"


@pytest.mark.parametrize("study", study_dirs(), ids=lambda p: p.name)
def test_readme_names_every_file_of_the_study(study):
    text = readme(study)
    missing = []
    for rel in files_of(study):
        parts = rel.parts
        named = rel.as_posix() in text or (
            re.search(r"(?<![\w.])" + re.escape(parts[-1]) + r"(?![\w])", text)
            and all(d + "/" in text for d in parts[:-1]))
        if not named:
            missing.append(rel.as_posix())
    assert not missing, f"{study.name}/README.md does not name: {', '.join(missing)}"


@pytest.mark.parametrize("study", study_dirs(), ids=lambda p: p.name)
def test_every_result_file_command_is_in_the_readme(study):
    commands = commands_in(readme(study))
    absent = [rel.as_posix() for rel in files_of(study) if rel.suffix == ".h5"
              and sc.normalise(recorded_command(study / rel)) not in commands]
    assert not absent, (f"{study.name}/README.md lacks the recorded command of: "
                        f"{', '.join(absent)} (tools/study_commands.py prints them)")


def test_every_canonical_data_file_belongs_to_a_study_with_its_command():
    texts = {s.name: readme(s) for s in study_dirs()}
    commands = {name: commands_in(t) for name, t in texts.items()}
    data = sorted((ROOT / "data").glob("*/*.h5"))
    assert data, "no result files under data/<gpu>/"
    for path in data:
        rel = path.relative_to(ROOT).as_posix()
        owners = [n for n, t in texts.items() if rel in t]
        assert owners, f"no study README names {rel}"
        want = sc.normalise(recorded_command(path))
        assert any(want in commands[n] for n in owners), \
            f"{rel}: named by {', '.join(owners)}, none of which lists its recorded command"


def test_index_lists_every_study():
    index = (STUDIES / "README.md").read_text()
    for study in study_dirs():
        assert f"]({study.name}/)" in index, f"studies/README.md has no line for {study.name}"


def test_no_codename_in_a_study_or_data_file_name():
    bad = []
    for top in (STUDIES, ROOT / "data"):
        for p in top.rglob("*"):
            words = set(re.split(r"[_\-./]", p.relative_to(top).as_posix().lower()))
            if words & CODENAMES:
                bad.append(f"{p.relative_to(ROOT)} ({', '.join(sorted(words & CODENAMES))})")
    assert not bad, "codenames in names: " + "; ".join(bad)


def test_normalise_ignores_program_path_and_output_only():
    a = sc.normalise("/work/x/build-device/moefin sweep gemm --tokens 1,2 --out /tmp/a.h5")
    assert a == sc.normalise("moefin sweep gemm --tokens 1,2 --out studies/s/b.h5")
    assert a != sc.normalise("moefin sweep gemm --tokens 1,4 --out studies/s/b.h5")
    assert sc.normalise("python3 experiments/peers_torch.py --out=x.h5") == \
        sc.normalise(".venv/bin/python experiments/finalize/peers_torch.py --out=y.h5")


def test_commands_in_reads_only_code_blocks():
    text = "moefin race --out a.h5\n\n```sh\nmoefin race --tokens 4 --out b.h5  # a note\n```\n"
    assert commands_in(text) == {sc.normalise("moefin race --tokens 4 --out c.h5")}


def test_study_commands_tool_prints_each_file_command(tmp_path):
    study = STUDIES / "graph_length"
    out = sc.blocks(sc.result_files([str(study)]), str(ROOT))
    printed = {sc.normalise(cmd) for _, cmds in out for _, cmd in cmds}
    for rel in files_of(study):
        assert sc.normalise(recorded_command(study / rel)) in printed
    bad = tmp_path / "bad.h5"
    bad.write_text("not hdf5")
    assert sc.main([str(bad)]) == 1
    assert sc.main([str(tmp_path / "none")]) == 1


def test_names_stay_portable():
    for p in STUDIES.rglob("*"):
        name = p.name
        assert re.fullmatch(r"[A-Za-z0-9_.\-]+", name), f"{p.relative_to(ROOT)}: odd characters"
        assert len(os.fsencode(str(p.relative_to(ROOT)))) < 200
