"""Shared fixtures: the moefin binary the C++ build produced, and the scripts/ tools as modules."""
import importlib.util
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def moefin():
    """Path of the moefin binary (MOEFIN_BINARY, else build/moefin); fails if it is missing."""
    path = pathlib.Path(os.environ.get("MOEFIN_BINARY", ROOT / "build" / "moefin"))
    if not path.is_file():
        pytest.fail(f"moefin binary not found at {path}: run scripts/build.sh first")
    return path


TOOL_FOLDERS = ("tools", "tools/sass", "tools/audit")


def tool_path(name):
    """tools/.../NAME.py: the first of TOOL_FOLDERS that holds it."""
    for folder in TOOL_FOLDERS:
        path = ROOT / folder / (name + ".py")
        if path.is_file():
            return path
    raise FileNotFoundError(f"no tool {name}.py under {', '.join(TOOL_FOLDERS)}")


def load_script(name):
    """tools/.../NAME.py as a module (the tools are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, tool_path(name))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run(binary, *args, check=True):
    """Runs moefin with args; returns the CompletedProcess (text output)."""
    proc = subprocess.run([str(binary), *map(str, args)], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"moefin {' '.join(map(str, args))} exited {proc.returncode}:\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc
