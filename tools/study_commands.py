#!/usr/bin/env python3
"""The commands that wrote a study's result files, read from their provenance.

Every moefin result file records the command that wrote it (root attribute `command_line`), the
commit of its binaries (`git_commit`), the GPU (`gpu_name`), the driver and CUDA versions and
the time (`date_utc`). This prints, for the files given (directories are searched for *.h5),
one block per (commit, GPU, driver) with each file's command as it would write the file where it
lies in the repository: the recorded command with the program as `moefin` (or the script's path
in this tree) and `--out` naming the file. A study's README quotes these blocks under
"Commands"; tests/python/test_studies.py checks that every file's command is there.

usage: tools/study_commands.py PATH... [--root DIR]
Exit status: 0 printed; 1 a file unreadable or without provenance; 2 bad usage.
"""
import argparse
import os
import shlex
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Scripts that write result files, by the name their command line records (older trees had some
# elsewhere): their path in this tree.
SCRIPTS = {
    "peers_torch.py": "experiments/finalize/peers_torch.py",
    "peers_layer_torch.py": "experiments/chain/peers_layer_torch.py",
    "released_summary.py": "tools/audit/released_summary.py",
}
OUT_PLACEHOLDER = "<out>"


def _text(value):
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def provenance(path):
    """The root attributes of a result file, as text."""
    import h5py  # only here: normalise() is usable without it
    try:
        with h5py.File(path, "r") as f:
            return {k: _text(v) for k, v in f.attrs.items()}
    except OSError as e:
        raise ValueError(f"{path}: not a readable HDF5 file ({e})") from None


def _program(tokens):
    """(program, rest): the interpreter dropped, the program's name as this tree calls it."""
    if tokens and os.path.basename(tokens[0]).startswith("python"):
        tokens = tokens[1:]
    if not tokens:
        return "", []
    name = os.path.basename(tokens[0])
    return SCRIPTS.get(name, name), tokens[1:]


def normalise(command_line):
    """The tokens of a command with what may differ between machines replaced: the program's
    path (a build folder, an interpreter) and the output file (`--out X`, `--out=X`)."""
    return normalise_tokens(shlex.split(command_line))


def normalise_tokens(tokens):
    """normalise() of a command already split into words."""
    program, rest = _program(list(tokens))
    out, i = [program], 0
    while i < len(rest):
        t = rest[i]
        if t == "--out" and i + 1 < len(rest):
            out += ["--out", OUT_PLACEHOLDER]
            i += 2
            continue
        out.append("--out=" + OUT_PLACEHOLDER if t.startswith("--out=") else t)
        i += 1
    return tuple(out)


def command_here(command_line, path):
    """The recorded command as it writes PATH here."""
    program, rest = _program(shlex.split(command_line))
    if program.endswith(".py"):
        program = ".venv/bin/python " + program
    words, i = [program], 0
    while i < len(rest):
        t = rest[i]
        if t == "--out" and i + 1 < len(rest):
            words += ["--out", shlex.quote(path)]
            i += 2
            continue
        words.append("--out=" + shlex.quote(path) if t.startswith("--out=") else shlex.quote(t))
        i += 1
    return " ".join(words)


def result_files(paths):
    found = []
    for p in paths:
        if os.path.isdir(p):
            for d, dirs, files in os.walk(p):
                dirs.sort()
                found += [os.path.join(d, n) for n in sorted(files) if n.endswith(".h5")]
        else:
            found.append(p)
    return found


def blocks(files, root):
    """[(heading, [(relative path, command)])], grouped by commit, GPU and driver in time order."""
    groups = {}
    for path in files:
        a = provenance(path)
        if "command_line" not in a:
            raise ValueError(f"{path}: no command_line attribute (not a moefin result file?)")
        rel = os.path.relpath(os.path.abspath(path), root)
        key = (a.get("git_commit", "not recorded"), a.get("gpu_name", "not recorded"),
               a.get("driver_version", "not recorded"), a.get("cuda_runtime_version", ""))
        groups.setdefault(key, []).append((a.get("date_utc", ""), rel, a))
    out = []
    for (commit, gpu, driver, cuda), entries in sorted(groups.items(),
                                                       key=lambda kv: min(e[0] for e in kv[1])):
        entries.sort()
        dates = sorted({e[0][:10] for e in entries if e[0]})
        state = [e[1] for e in entries if e[2].get("moefin_state") == "incomplete"]
        head = (f"binaries of `{commit}`, {gpu}, driver {driver}"
                + (f", CUDA runtime {cuda}" if cuda else "")
                + (f", {' / '.join(dates)}" if dates else "")
                + (f"; incomplete (moefin_state): {', '.join(state)}" if state else ""))
        out.append((head, [(rel, command_here(a["command_line"], rel)) for _, rel, a in entries]))
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("paths", nargs="+", help="result files or folders holding them")
    ap.add_argument("--root", default=ROOT, help="paths are printed relative to this folder")
    args = ap.parse_args(argv)
    try:
        files = result_files(args.paths)
        if not files:
            raise ValueError(f"{' '.join(args.paths)}: no result files (*.h5)")
        for head, cmds in blocks(files, args.root):
            print(head[0].upper() + head[1:] + ":\n\n```sh")
            for _, cmd in cmds:
                print(cmd)
            print("```\n")
    except (OSError, ValueError) as e:
        print(f"study_commands: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
