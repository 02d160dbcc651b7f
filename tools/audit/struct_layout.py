#!/usr/bin/env python3
"""Field offsets of C/C++ structs, from their header, as a moefin layout file (JSON).

The member names are read from the header text; the offsets and sizes come from the compiler
(a generated program prints offsetof/sizeof of every member it found), so the layout cannot
drift from the header. Usage:

  struct_layout.py --header H [--header H2 ...] --struct NS::NAME[=ALIAS] [--struct ...]
                   [--prelude '#include <cuda.h>'] [--compiler g++|nvcc] [-I DIR ...]
                   [--kernel MATCH=PARAM:STRUCT[,PARAM:STRUCT...] ...]
                   [--expand STRUCT.FIELD=STRUCT2 ...] --out LAYOUT.json
                   [--emit-source FILE]   (write the program and stop; for a build system)

An --expand entry replaces the member FIELD of STRUCT (aliases) by the members of STRUCT2 at
their offsets within it, named FIELD.MEMBER (a struct member: `p.gemm.a`).
A --kernel entry says which structs the parameters of the kernels whose symbol contains MATCH
have, in order (ordinal 0, 1, ...); `moefin audit --layout` names parameter accesses with it.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def strip_template_args(name):
    out, depth = [], 0
    for ch in name:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip()


def find_struct(text, qualified):
    """(body, base short names) of `struct NAME` (template arguments and namespaces of the
    qualified name used to find it: the first definition after `namespace <last component>`)."""
    parts = strip_template_args(qualified).split("::")
    name, namespaces = parts[-1], parts[:-1]
    start = 0
    if namespaces:
        m = re.search(r"\bnamespace\s+(?:[\w:]*::)?" + re.escape(namespaces[-1]) + r"\s*\{", text)
        if m:
            start = m.end()
    pat = re.compile(r"\b(?:struct|class)\s+" + re.escape(name) + r"\s*(?:final\s*)?(:[^{;]*)?\{")
    m = pat.search(text, start) or pat.search(text)
    if not m:
        return None, []
    bases = []
    if m.group(1):
        for b in split_top_level(m.group(1)[1:], ","):
            b = re.sub(r"\b(public|private|protected|virtual)\b", "", b).strip()
            bases.append(strip_template_args(b).split("::")[-1])
    depth, i = 1, m.end()
    body_start = i
    while i < len(text) and depth:
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
        i += 1
    return (text[body_start:i - 1] if depth == 0 else None), bases


def split_top_level(s, sep):
    out, cur, depth = [], [], 0
    for ch in s:
        if ch in "<([{":
            depth += 1
        elif ch in ">)]}":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out


def all_member_names(text, qualified, seen=None):
    """Members of the struct and of its bases (bases first, as they are laid out)."""
    seen = seen or set()
    body, bases = find_struct(text, qualified)
    if body is None:
        return None
    names = []
    for b in bases:
        if b in seen:
            continue
        seen.add(b)
        inherited = all_member_names(text, b, seen)
        if inherited:
            names += inherited
    return names + member_names(body)


def top_level_statements(body):
    """Member declarations of a struct body: split at ';' and at closing braces of depth 1."""
    out, cur, depth = [], [], 0
    for ch in body:
        if ch in "{([":
            depth += 1
        elif ch in "})]":
            depth -= 1
            if depth == 0 and ch == "}":
                cur.append(ch)
                out.append("".join(cur))
                cur = []
                continue
        if ch == ";" and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    return [s.strip() for s in out if s.strip()]


def member_names(body):
    names = []
    for stmt in top_level_statements(body):
        s = re.sub(r"\s+", " ", stmt)
        if re.match(r"^(static|using|typedef|friend|template|enum|struct|class|union|public|private|protected)\b", s):
            continue
        s = re.sub(r"^(public|private|protected)\s*:\s*", "", s)
        # Drop a default member initializer: "= value" or "{value}" at the end.
        s = re.split(r"\s*=\s*", s, maxsplit=1)[0]
        s = re.sub(r"\{[^{}]*\}\s*$", "", s).strip()
        if "(" in s or s.endswith(")"):
            continue  # a member function (or a function pointer; not supported)
        for decl in s.split(","):
            m = re.search(r"([A-Za-z_]\w*)\s*((?:\[[^\]]*\])*)\s*$", decl.strip())
            if m and m.group(1) not in ("const", "volatile"):
                names.append(m.group(1))
    return names


def program(headers, prelude, structs):
    lines = [prelude, "#include <cstddef>", "#include <cstdio>"]
    lines += ['#include "%s"' % os.path.abspath(h) for h in headers]
    # offsetof is a macro: a type with commas (template arguments) goes through an alias.
    for i, (qual, alias, names) in enumerate(structs):
        lines.append("using LayoutStruct%d = %s;" % (i, qual))
    lines.append("int main() {")
    for i, (qual, alias, names) in enumerate(structs):
        t = "LayoutStruct%d" % i
        lines.append('  std::printf("S %s %%zu\\n", sizeof(%s));' % (alias, t))
        for n in names:
            lines.append('  std::printf("F %s %s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s*)nullptr)->%s));'
                         % (alias, n, t, n, t, n))
    lines.append("  return 0;\n}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--header", action="append", required=True)
    ap.add_argument("--struct", action="append", required=True)
    ap.add_argument("--prelude", default="#include <cstdint>")
    ap.add_argument("--compiler", default="g++")
    ap.add_argument("-I", dest="includes", action="append", default=[])
    ap.add_argument("--flag", action="append", default=[])
    ap.add_argument("--kernel", action="append", default=[])
    ap.add_argument("--expand", action="append", default=[])
    ap.add_argument("--out", required=True)
    ap.add_argument("--source", default="", help="text for the layout's 'source' key")
    args = ap.parse_args()

    text = ""
    for h in args.header:
        try:
            with open(h, encoding="utf-8", errors="replace") as f:
                text += strip_comments(f.read()) + "\n"
        except OSError as e:
            sys.exit("struct_layout: %s: %s" % (h, e.strerror))
    structs = []
    for spec in args.struct:
        qual, _, alias = spec.rpartition("=") if "=" in spec.split(">")[-1] else (spec, "", "")
        short = strip_template_args(qual).split("::")[-1]
        names = all_member_names(text, qual)
        if names is None:
            sys.exit("struct_layout: no definition of struct %s in %s" % (short, ", ".join(args.header)))
        if not names:
            sys.exit("struct_layout: struct %s has no data members" % short)
        structs.append((qual, alias or short, names))

    with tempfile.TemporaryDirectory() as tmp:
        ext = ".cu" if os.path.basename(args.compiler).startswith("nvcc") else ".cpp"
        src = os.path.join(tmp, "layout" + ext)
        exe = os.path.join(tmp, "layout")
        with open(src, "w") as f:
            f.write(program(args.header, args.prelude, structs))
        cmd = [args.compiler, "-std=c++17", "-w", "-o", exe, src] + ["-I" + i for i in args.includes] + args.flag
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("struct_layout: compiling the layout program failed (%s):\n%s" % (" ".join(cmd), r.stderr[-3000:]))
        r = subprocess.run([exe], capture_output=True, text=True, check=True)

    layout = {"source": args.source or ", ".join(os.path.basename(h) for h in args.header),
              "structs": {}, "kernels": []}
    for line in r.stdout.splitlines():
        parts = line.split()
        if parts[0] == "S":
            layout["structs"][parts[1]] = {"size": int(parts[2]), "fields": []}
        else:
            layout["structs"][parts[1]]["fields"].append(
                {"name": parts[2], "offset": int(parts[3]), "size": int(parts[4])})
    for spec in args.expand:
        target, _, inner = spec.partition("=")
        outer, _, field = target.partition(".")
        if outer not in layout["structs"] or inner not in layout["structs"]:
            sys.exit("struct_layout: --expand %s: unknown struct" % spec)
        fields = layout["structs"][outer]["fields"]
        hit = [f for f in fields if f["name"] == field]
        if not hit:
            sys.exit("struct_layout: --expand %s: %s has no member %s" % (spec, outer, field))
        base = hit[0]
        nested = [{"name": field + "." + f["name"], "offset": base["offset"] + f["offset"],
                   "size": f["size"]} for f in layout["structs"][inner]["fields"]]
        i = fields.index(base)
        fields[i:i + 1] = nested
    for spec in args.kernel:
        match, _, plist = spec.partition("=")
        params = []
        for p in plist.split(","):
            pname, _, stype = p.partition(":")
            if stype not in layout["structs"]:
                sys.exit("struct_layout: --kernel %s: unknown struct '%s'" % (spec, stype))
            params.append({"name": pname, "type": stype})
        layout["kernels"].append({"match": match, "params": params})
    with open(args.out, "w") as f:
        json.dump(layout, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
