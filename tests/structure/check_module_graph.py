#!/usr/bin/env python3
"""Checks the module graph of the top-level README against the build and the sources.

The README's table (between <!-- module-graph --> and <!-- /module-graph -->) has one row per
production target: its folder (or, for a program, its main file), the Cutline targets it may use
and the external libraries it may use. A target may use what its row names and, through them,
what those targets may use (the closure): a public header of a dependency exposes its own
dependencies.

Two checks, each failing with one line per violation:
  links     every production target's direct link libraries (as CMake resolved them, written by
            cmake/ModuleGraph.cmake into the build folder) are in its allowed set; every
            cutline_* library and every program has a row, and every row names a real target.
  includes  every #include of a Cutline header ("cutline/...") or of an external library's
            header (<event2/...>, <openssl/...>, <simdjson.h>, ...) in a target's folder is
            allowed for that target.

  check_module_graph.py --root SRC --links BUILD/module_links.txt
"""

import argparse
import os
import re
import sys

# External libraries by the names the table uses: the CMake targets that stand for them and the
# header paths (prefixes) that belong to them.
EXTERNALS = {
    "threads": (["Threads::Threads"], []),
    "dl": (["dl"], ["dlfcn.h"]),
    "simdjson": (["simdjson::simdjson"], ["simdjson.h"]),
    "llhttp": (["cutline_llhttp"], ["llhttp.h"]),
    "libevent": (["PkgConfig::LIBEVENT"], ["event2/"]),
    "nghttp2": (["PkgConfig::NGHTTP2"], ["nghttp2/"]),
    "OpenSSL": (["OpenSSL::SSL", "OpenSSL::Crypto"], ["openssl/"]),
    "yaml-cpp": (["yaml-cpp"], ["yaml-cpp/"]),
    "CLI11": (["CLI11::CLI11"], ["CLI/"]),
    "prometheus-cpp": (["prometheus-cpp::core"], ["prometheus/"]),
    "hiredis": (["PkgConfig::HIREDIS"], ["hiredis/"]),
    "CUDA": (["CUDA::cudart", "CUDA::cublas"], ["cuda_runtime", "cublas", "cuda_fp16", "cuda_bf16"]),
}

# External libraries a build may lack (CMake builds a row that needs one only where it is found).
OPTIONAL_EXTERNALS = {"CUDA"}

# Headers CMake generates into the build folder, by the target that owns them.
GENERATED = {"cutline/cli/version.h": "cutline_cli"}
SOURCE_EXTS = (".h", ".cc", ".c", ".cu", ".cuh")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


class Row:
    def __init__(self, target, folder, uses, externals, line):
        self.target, self.folder, self.uses, self.externals, self.line = (
            target, folder, uses, externals, line)


def cell_names(cell):
    cell = cell.replace("`", "").strip()
    if cell in ("", "-", "—", "–"):
        return []
    return [name.strip() for name in cell.split(",") if name.strip()]


def read_table(readme):
    rows, errors = {}, []
    inside = False
    with open(readme, encoding="utf-8") as f:
        for number, text in enumerate(f, 1):
            if "<!-- module-graph -->" in text:
                inside = True
                continue
            if "<!-- /module-graph -->" in text:
                inside = False
                continue
            if not inside or not text.startswith("|"):
                continue
            cells = [c.strip() for c in text.strip().strip("|").split("|")]
            if len(cells) != 4 or cells[0] in ("target",) or set(cells[0]) <= set("-: "):
                continue
            target = cells[0].replace("`", "")
            folder = cells[1].replace("`", "").rstrip("/")
            externals = cell_names(cells[3])
            for name in externals:
                if name not in EXTERNALS:
                    errors.append(f"{readme}:{number}: {target}: unknown external library "
                                  f"'{name}' (known: {', '.join(sorted(EXTERNALS))})")
            rows[target] = Row(target, folder, cell_names(cells[2]), externals, number)
    if not rows:
        errors.append(f"{readme}: no module-graph table found")
    for row in rows.values():
        for dep in row.uses:
            if dep not in rows:
                errors.append(f"{readme}:{row.line}: {row.target} may use '{dep}', "
                              "which has no row")
    return rows, errors


def closure(rows, errors):
    """target -> (allowed targets, allowed external names), following the table transitively.
    A cycle in the table is an error: the layers must stack."""
    allowed = {}

    def visit(target, seen):
        if target in allowed:
            return allowed[target]
        targets, externals = set(), set(rows[target].externals)
        for dep in rows[target].uses:
            if dep in seen:
                errors.append(f"table: {target} may use {dep}, which may use {target}: a cycle")
                continue
            targets.add(dep)
            dep_targets, dep_externals = visit(dep, seen | {dep})
            targets |= dep_targets
            externals |= dep_externals
        allowed[target] = (targets, externals)
        return allowed[target]

    for target in rows:
        visit(target, {target})
    return allowed


def read_links(path):
    links = {}
    with open(path, encoding="utf-8") as f:
        for text in f:
            text = text.rstrip("\n")
            if not text or text.startswith("#"):
                continue
            target, _, deps = text.partition(":")
            links[target.strip()] = [d for d in deps.strip().split(";") if d]
    return links


def cmake_name_of(dep):
    match = re.fullmatch(r"\$<LINK_ONLY:(.*)>", dep)
    return match.group(1) if match else dep


def check_links(rows, allowed, links):
    errors = []
    external_of = {t: name for name, (targets, _) in EXTERNALS.items() for t in targets}
    for target in sorted(links):
        if target not in rows:
            errors.append(f"links: {target} has no row in the README's module graph")
            continue
        targets, externals = allowed[target]
        for dep in links[target]:
            dep = cmake_name_of(dep)
            if dep in rows:
                ok, what = dep in targets, dep
            elif dep in external_of:
                ok, what = external_of[dep] in externals, f"{dep} ({external_of[dep]})"
            else:
                ok, what = False, f"{dep} (not a module or a known external library)"
            if not ok:
                errors.append(f"links: {target} links {what}, which its row does not allow")
    for target in sorted(rows):
        # A row of its own optional toolkit (the CUDA plugin, built where nvcc is found) is
        # absent from a build without it; any other row must be a target of every build.
        optional = OPTIONAL_EXTERNALS & set(rows[target].externals)
        if target not in links and not optional:
            errors.append(f"links: README row {target} names no target of this build")
    return errors


def files_of(root, rows, row):
    """Source files of a row: its folder minus the folders other rows own, or its one file."""
    path = os.path.join(root, row.folder)
    if os.path.isfile(path):
        return [path]
    others = {os.path.join(root, r.folder) for r in rows.values() if r is not row}
    found = []
    for folder, subfolders, names in os.walk(path):
        subfolders[:] = sorted(s for s in subfolders if os.path.join(folder, s) not in others)
        found += [os.path.join(folder, n) for n in sorted(names)
                  if n.endswith(SOURCE_EXTS) and os.path.join(folder, n) not in others]
    return found


def header_owner(root, rows, header):
    for row in rows.values():
        if os.path.isfile(os.path.join(root, row.folder, "include", header)):
            return row.target
    return GENERATED.get(header)


def check_includes(root, rows, allowed):
    errors = []
    for row in rows.values():
        targets, externals = allowed[row.target]
        allowed_prefixes = [p for name in externals for p in EXTERNALS[name][1]]
        all_prefixes = {p: name for name, (_, ps) in EXTERNALS.items() for p in ps}
        for path in files_of(root, rows, row):
            rel = os.path.relpath(path, root)
            with open(path, encoding="utf-8", errors="replace") as f:
                for number, text in enumerate(f, 1):
                    match = INCLUDE_RE.match(text)
                    if not match:
                        continue
                    header = match.group(2)
                    if header.startswith("cutline/"):
                        owner = header_owner(root, rows, header)
                        if owner is None:
                            errors.append(f"{rel}:{number}: includes {header}, which no module "
                                          "of the table provides")
                        elif owner != row.target and owner not in targets:
                            errors.append(f"{rel}:{number}: {row.target} includes {header} "
                                          f"of {owner}, which its row does not allow")
                        continue
                    for prefix, name in all_prefixes.items():
                        if header.startswith(prefix) and prefix not in allowed_prefixes:
                            errors.append(f"{rel}:{number}: {row.target} includes <{header}> "
                                          f"of {name}, which its row does not allow")
    return errors


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", required=True, help="the source tree")
    parser.add_argument("--readme", help="the table's file (default: ROOT/README.md)")
    parser.add_argument("--links", required=True, help="module_links.txt from the build folder")
    args = parser.parse_args()
    rows, errors = read_table(args.readme or os.path.join(args.root, "README.md"))
    if not errors:
        allowed = closure(rows, errors)
    if not errors:
        errors += check_links(rows, allowed, read_links(args.links))
        errors += check_includes(args.root, rows, allowed)
    for error in errors:
        print(error)
    if errors:
        print(f"module graph: {len(errors)} violation(s)")
        return 1
    print(f"module graph: {len(rows)} targets, links and includes as the README's table says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
