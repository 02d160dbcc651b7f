#!/usr/bin/env python3
"""Copies the released FlashInfer files a build really compiles into a small folder for the GPU
machine (called by scripts/device_prepare.sh).

Every compile command of the build that reads from the released packages (compile_commands.json
of a configured build) is re-run with dependency output only (-M); every file it names under the
packages' root (the released sources themselves and every header they include) is copied under
DEST with its path below the root kept, so that DEST can stand in for the root
(-DMOEFIN_FLASHINFER_ROOT=DEST). Headers those files include under preprocessor conditions this
machine's compilers did not take (the GPU machine's host compiler is another version) are added
too: every #include of a copied file that resolves under the root, followed to its end (a few
files). Prints one summary line; exit 1 when a command fails.

usage: flashinfer_closure.py BUILD_DIR ROOT DEST
"""

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"flashinfer_closure: {msg}", file=sys.stderr)
    sys.exit(1)


def dependency_command(entry, depfile):
    """The entry's compile command with its outputs replaced by a dependency list into depfile."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    out = []
    skip = False
    for a in args:
        if skip:
            skip = False
            continue
        if a in ("-o", "-MF", "-MT", "-MQ"):
            skip = True
            continue
        if a in ("-c", "-MD", "-MMD"):
            continue
        out.append(a)
    return out + ["-M", "-MF", depfile]


def command_text(entry):
    """The entry's command with its response files (CMake passes nvcc's include paths in one)."""
    args = entry.get("arguments") or shlex.split(entry["command"])
    text = " ".join(args)
    for i, a in enumerate(args):
        rsp = None
        if a == "--options-file" and i + 1 < len(args):
            rsp = args[i + 1]
        elif a.startswith("@"):
            rsp = a[1:]
        if rsp:
            path = os.path.join(entry["directory"], rsp)
            if os.path.isfile(path):
                text += " " + open(path, encoding="utf-8").read()
    return text


def include_dirs(entry):
    """The -I / -isystem folders of an entry (response files included), absolute."""
    args = shlex.split(command_text(entry))
    dirs = []
    for i, a in enumerate(args):
        for flag in ("-I", "-isystem"):
            if a == flag and i + 1 < len(args):
                dirs.append(args[i + 1])
            elif a.startswith(flag) and len(a) > len(flag) and flag == "-I":
                dirs.append(a[len(flag):])
    return [os.path.abspath(os.path.join(entry["directory"], d)) for d in dirs]


INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)


def textual_includes(path, dirs):
    """Files that `path` names in an #include, whatever the conditions around it."""
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError:
        return []
    found = []
    for name in INCLUDE.findall(text):
        for d in [os.path.dirname(path)] + dirs:
            candidate = os.path.normpath(os.path.join(d, name))
            if os.path.isfile(candidate):
                found.append(candidate)
                break
    return found


def parse_depfile(path):
    text = open(path, encoding="utf-8").read().replace("\\\n", " ")
    deps = []
    for line in text.splitlines():
        if ":" not in line:
            continue
        _, rest = line.split(":", 1)
        deps += rest.split()
    return deps


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    build, root, dest = argv[1:]
    db_path = os.path.join(build, "compile_commands.json")
    if not os.path.isfile(db_path):
        fail(f"{db_path}: missing (configure the build first)")
    # The packages' folders are links into the cache: match their paths as given and resolved.
    prefixes = []
    for name in sorted(os.listdir(root)):
        p = os.path.join(root, name)
        prefixes += [(os.path.abspath(p) + os.sep, name), (os.path.realpath(p) + os.sep, name)]
    root_abs = os.path.abspath(root)
    entries = [e for e in json.load(open(db_path, encoding="utf-8"))
               if root_abs in command_text(e)]
    if not entries:
        fail(f"{db_path}: no compile command reads from {root_abs} (the released kernels are "
             "not in this build)")
    files = {}
    dirs = []

    def under_root(full):
        for prefix, name in prefixes:
            if full.startswith(prefix):
                return os.path.join(name, full[len(prefix):])
        return None

    with tempfile.TemporaryDirectory() as tmp:
        for i, e in enumerate(entries):
            depfile = os.path.join(tmp, f"{i}.d")
            cmd = dependency_command(e, depfile)
            r = subprocess.run(cmd, cwd=e["directory"], capture_output=True, text=True)
            if r.returncode != 0:
                last = (r.stderr.strip().splitlines() or ["?"])[-1]
                fail(f"dependency scan of {e['file']} failed: {last}")
            for d in parse_depfile(depfile):
                full = os.path.abspath(os.path.join(e["directory"], d))
                rel = under_root(full)
                if rel:
                    files[rel] = full
            dirs += [d for d in include_dirs(e) if d not in dirs]
    scanned = len(files)
    todo = list(files.values())
    while todo:
        for full in textual_includes(todo.pop(), dirs):
            rel = under_root(full)
            if rel and rel not in files:
                files[rel] = full
                todo.append(full)
    if os.path.isdir(dest):
        shutil.rmtree(dest)
    size = 0
    for rel, src in sorted(files.items()):
        target = os.path.join(dest, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(src, target)
        size += os.path.getsize(target)
    with open(os.path.join(dest, "MANIFEST"), "w", encoding="utf-8") as m:
        m.write("".join(f"{rel}\n" for rel in sorted(files)))
    print(f"flashinfer_closure: {len(files)} files ({scanned} from nvcc -M), {size / 1e6:.1f} MB "
          f"from {len(entries)} compile commands -> {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
