"""The documentation lives in the repository and holds together: no tracked file or help text
points outside the checkout (to a specification or seed folder beside it), every relative link
of the front page and of docs/ reaches a tracked file and, with an #anchor, a heading of it, the
command reference covers every command, and the front page stays a front page (at most 250
lines; the depth is in docs/)."""
import functools
import re
import subprocess
import unicodedata

import pytest

from conftest import ROOT, run

# Spelled in pieces so that this file does not match itself.
FOLDER = "shared" + "/"  # the folder beside the checkout that holds the specification
OUTSIDE = [".." + "/" + FOLDER, FOLDER + "DESIGN" + ".md"]
BARE_DESIGN = re.compile(r"(?<![\w/.-])" + "DESIGN" + r"\.md")
# A path into that folder (not a value such as "max-shared|default"): allowed only in CI and in
# the scripts that install things.
SHARED_PATH = re.compile(r"(?<![\w-])" + re.escape(FOLDER))
SHARED_ALLOWED = (".ci/", "scripts/setup.sh", "scripts/fetch_released.sh")
README_MAX_LINES = 250


@functools.lru_cache(maxsize=None)
def tracked():
    """Every tracked path (files) and every folder that holds one, relative to the root."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, check=True,
                             capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"not a git checkout ({e}): the tracked files are unknown")
    files = {p for p in out.decode().split("\0") if p}
    folders = {"/".join(p.split("/")[:i]) for p in files for i in range(1, p.count("/") + 1)}
    return frozenset(files), frozenset(folders)


def text_files():
    for rel in sorted(tracked()[0]):
        path = ROOT / rel
        if not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary (HDF5, cubins): measured files keep what they stored
        yield rel, data.decode("utf-8", errors="replace")


def test_no_tracked_file_points_outside_the_checkout():
    hits = []
    for rel, text in text_files():
        if rel == "tests/python/test_docs.py":
            continue
        for number, line in enumerate(text.splitlines(), 1):
            where = f"{rel}:{number}"
            hits += [f"{where}: {s}" for s in OUTSIDE if s in line]
            if BARE_DESIGN.search(line):
                hits.append(f"{where}: a specification outside the repository (cite docs/design/)")
            if SHARED_PATH.search(line) and not rel.startswith(SHARED_ALLOWED):
                hits.append(f"{where}: a path into {FOLDER}")
    assert not hits, "\n".join(hits)


def commands(moefin):
    listing = run(moefin, "--help").stdout
    found = re.findall(r"^  (\S+(?: [a-z]+)?)\s{2,}", listing, flags=re.M)
    assert {"info", "verify", "sweep finalize", "race"} <= set(found), listing
    return found


def test_no_help_text_points_outside_the_checkout(moefin):
    texts = {"moefin --help": run(moefin, "--help").stdout}
    for command in commands(moefin):
        texts[f"moefin {command} --help"] = run(moefin, *command.split(), "--help").stdout
    texts["python -m analysis report --help"] = subprocess.run(
        [str(ROOT / ".venv" / "bin" / "python"), "-m", "analysis", "report", "--help"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout
    bad = [f"{name}: {s}" for name, text in texts.items() for s in OUTSIDE if s in text]
    bad += [f"{name}: a specification outside the repository" for name, text in texts.items()
            if BARE_DESIGN.search(text)]
    assert not bad, "\n".join(bad)


def test_the_command_reference_covers_every_command(moefin):
    reference = (ROOT / "docs" / "reference" / "commands.md").read_text(encoding="utf-8")
    missing = [c for c in commands(moefin) if f"`{c}`" not in reference]
    assert not missing, f"docs/reference/commands.md lacks: {', '.join(missing)}"


def test_the_front_page_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, \
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}: the depth goes in docs/)"


# -- links ----------------------------------------------------------------------------------------

FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"!?\[[^\]\n]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def slug(heading):
    """The anchor GitHub gives a heading: the text without markup, lower case, punctuation other
    than '-' and '_' dropped, spaces to '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.replace("`", "").replace("*", "")
    text = "".join(c for c in text.lower()
                   if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(rel):
    text = FENCE.sub("", (ROOT / rel).read_text(encoding="utf-8"))
    seen, out = {}, set()
    for heading in HEADING.findall(text):
        s = slug(heading)
        n = seen.get(s, 0)
        seen[s] = n + 1
        out.add(s if n == 0 else f"{s}-{n}")
    return frozenset(out)


def documents():
    files, _ = tracked()
    docs = sorted(p for p in files if p.startswith("docs/") and p.endswith(".md"))
    return ["README.md", "data/README.md"] + docs


def resolve(doc, target):
    """The tracked path a relative link of `doc` names (no anchor), normalised; None if it
    leaves the checkout."""
    base = ROOT.joinpath(doc).parent
    path = (base / target).resolve()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return None


def test_slug_follows_the_usual_rule():
    assert slug("The ordering rule") == "the-ordering-rule"
    assert slug("## `/route`".lstrip("# ")) == "route"
    assert slug("Finalize inside GEMM2 (`fused`)") == "finalize-inside-gemm2-fused"
    assert slug("small_batch_v2") == "small_batch_v2"
    assert slug("Writing, interruption and resuming") == "writing-interruption-and-resuming"


def test_every_relative_link_resolves():
    files, folders = tracked()
    bad, checked = [], 0
    for doc in documents():
        text = CODE.sub("", FENCE.sub("", (ROOT / doc).read_text(encoding="utf-8")))
        for target in LINK.findall(text):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # https:, mailto:
            path, _, anchor = target.partition("#")
            rel = resolve(doc, path) if path else doc
            if rel is None:
                bad.append(f"{doc}: {target}: leaves the checkout")
                continue
            checked += 1
            if rel not in files and rel not in folders:
                bad.append(f"{doc}: {target}: no tracked file or folder {rel}")
            elif anchor and (rel not in files or not rel.endswith(".md")):
                bad.append(f"{doc}: {target}: an anchor into something that is not a document")
            elif anchor and anchor not in anchors(rel):
                bad.append(f"{doc}: {target}: no heading '#{anchor}' in {rel}")
    assert checked > 100, f"only {checked} links checked: is the link pattern still right?"
    assert not bad, "\n".join(bad)
