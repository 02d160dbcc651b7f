"""Contracts flow down: what each layer of the tree may include, checked on every source file.

- core/ includes nothing from kernels/, reference/ or experiments/;
- core/ops/ (the contract floor) is header-only and includes only core/ops/ and the C++ standard
  library: no CUDA, no Boost, no HDF5;
- no CUDA unit (.cu, .cuh) needs Boost (the command line stays above the kernels);
- experiments/ holds only main.cpp and the command table at its top; runners live in family
  folders (harness: what every runner shares, and no command; demo, synthetic, finalize, chain,
  pdl, routing, report, gemm, audit: `moefin audit`).
"""
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parents[2]
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
SOURCES = (".hpp", ".cpp", ".cu", ".cuh", ".h")


def includes(path):
    return INCLUDE.findall(path.read_text(encoding="utf-8"))


def files(folder, suffixes=SOURCES):
    return sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in suffixes)


def test_core_includes_nothing_above_it():
    bad = [f"{p.relative_to(ROOT)}: {name}" for p in files("core") for kind, name in includes(p)
           if kind == '"' and name.split("/")[0] in ("kernels", "reference", "experiments")]
    assert files("core"), "no sources under core/"
    assert not bad, "core/ reaches up: " + "; ".join(bad)


def test_core_ops_is_a_header_only_floor():
    ops = files("core/ops", SOURCES)
    assert ops and all(p.suffix == ".hpp" for p in ops), [p.name for p in ops]
    bad = []
    for p in ops:
        for kind, name in includes(p):
            if kind == '"' and not name.startswith("core/ops/"):
                bad.append(f"{p.name}: \"{name}\"")
            if kind == "<" and ("/" in name or "." in name or name.startswith(("cuda", "H5"))):
                bad.append(f"{p.name}: <{name}>")
    assert not bad, "core/ops/ includes outside itself and the standard library: " + "; ".join(bad)


def test_cuda_units_need_no_boost():
    units = files("kernels", (".cu", ".cuh"))
    assert units
    bad = [f"{p.relative_to(ROOT)}: {name}" for p in units for kind, name in includes(p)
           if name.startswith("boost/") or name == "core/cli.hpp"]
    assert not bad, "; ".join(bad)


FAMILIES = ("harness", "demo", "synthetic", "finalize", "chain", "pdl", "routing", "report", "gemm",
            "audit")


def test_experiments_runners_live_in_family_folders():
    top = sorted(p.name for p in (ROOT / "experiments").iterdir() if p.is_file())
    assert top == ["CMakeLists.txt", "commands.cpp", "commands.hpp", "main.cpp"], top
    folders = sorted(p.name for p in (ROOT / "experiments").iterdir() if p.is_dir())
    unknown = [f for f in folders if f not in FAMILIES and f != "__pycache__"]
    # A new family is a new folder; name it in FAMILIES with what it holds.
    assert not unknown, f"experiments/ folders outside the families {FAMILIES}: {unknown}"


def test_harness_is_a_floor_without_commands():
    harness = files("experiments/harness")
    assert harness
    commands = [p.name for p in harness if p.name.startswith("cmd_")]
    assert not commands, f"commands inside experiments/harness/: {commands}"
    bad = [f"{p.name}: {name}" for p in harness for kind, name in includes(p)
           if kind == '"' and name.startswith("experiments/")
           and not name.startswith("experiments/harness/")]
    assert not bad, "experiments/harness/ reaches up into the runners: " + "; ".join(bad)


def test_audit_depends_on_the_pdl_model_only():
    audit = files("audit")
    assert audit, "no sources under audit/"
    allowed = ("audit/", "core/pdl/", "core/ops/")
    bad = [f"{p.name}: {name}" for p in audit for kind, name in includes(p)
           if kind == '"' and not name.startswith(allowed)]
    assert not bad, "audit/ includes outside itself and the PDL model: " + "; ".join(bad)


def test_the_store_internals_stay_inside_the_store():
    inner = "core/store/hdf5_file.hpp"
    outside = [str(p.relative_to(ROOT)) for folder in ("core", "experiments", "tests", "audit")
               for p in files(folder) if not str(p.relative_to(ROOT)).startswith("core/store/")
               and any(name == inner for _, name in includes(p))]
    assert not outside, f"{inner} included outside core/store/: {outside}"
