#!/usr/bin/env python3
"""check-layers.py: the layering rule of docs/design.md, checked.

Every C file of the library and the tools belongs to one layer (its folder). A
file may include, call or take the address of only what lives in its own layer
or a layer below; and no two files may depend on each other, directly or through
others (no cycles, also inside one folder). Exits 1 and names each offending
edge or cycle; exits 0 and prints a one-line summary otherwise.

Edges: `#include "..."` (resolved against the file's folder, the top of the tree
and include/), and a
reference from a .c file to a function that another file defines (not static).
Headers only contribute their includes: a declaration is not a use. A file's
definition of an OpenCL API function (cl + a capital: an interposer such as
bench/timeline/cl-timeline.c, preloaded to observe the driver) is not a
definition the others use: their calls of the OpenCL API go to the driver.
"""
import os
import re
import sys

# The OpenCL API's names: defined here only by interposers of the driver.
OPENCL_API_RE = re.compile(r"cl[A-Z]\w*$")

# Lowest first. A folder may depend on its own layer and every one before it.
LAYERS = [
    ("include", "public headers"),
    ("shapes", "symbol engine"),
    ("alloc", "device memory pool and planner"),
    ("runtime/core", "context, device, tensor, dtype, launch, errors, log"),
    ("runtime/interop", "DLPack"),
    ("runtime/cache", "program cache, disk cache"),
    ("runtime/ops", "op families"),
    ("runtime/graph", "graph build, plans, step execution"),
    ("runtime/dist", "data-parallel graphs (MPI)"),
    ("bench", "benchmarks and workloads"),
    ("tools", "the clbound command"),
]
# The generated kernel table (build tree) counts as part of runtime/core.
ROOTS = [l for l, _ in LAYERS if l != "include"]


def layer_of(path):
    best = None
    for i, (l, _) in enumerate(LAYERS):
        if path == l or path.startswith(l + "/"):
            if best is None or len(l) > len(LAYERS[best][0]):
                best = i
    return best


def strip(src):
    """Removes comments, string and char literals (keeps line structure)."""
    out = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), src, flags=re.S)
    out = re.sub(r"//[^\n]*", "", out)
    out = re.sub(r'"(\\.|[^"\\\n])*"', '""', out)
    out = re.sub(r"'(\\.|[^'\\\n])*'", "''", out)
    return out


DEF_RE = re.compile(
    r"(?m)^(?P<static>static\s+)?(?:inline\s+)?[A-Za-z_][\w\s\*]*?\b(?P<name>[A-Za-z_]\w*)\s*"
    r"\((?:[^()]|\([^()]*\))*\)\s*\{")
IDENT_RE = re.compile(r"\b[A-Za-z_]\w*\b")
INC_RE = re.compile(r'(?m)^\s*#\s*include\s+"([^"]+)"')


def main(top):
    files = []
    for root in ROOTS:
        base = os.path.join(top, root)
        if not os.path.isdir(base):
            continue
        for dp, dn, fn in os.walk(base):
            dn[:] = sorted(d for d in dn if layer_of(os.path.relpath(os.path.join(dp, d), top)) is not None)
            for f in sorted(fn):
                if f.endswith((".c", ".h")):
                    rel = os.path.relpath(os.path.join(dp, f), top)
                    if layer_of(rel) is not None:
                        files.append(rel)
    text, includes = {}, {}
    for f in files:
        with open(os.path.join(top, f), encoding="utf-8", errors="replace") as fh:
            raw = fh.read()
        text[f] = strip(raw)
        includes[f] = INC_RE.findall(re.sub(r"/\*.*?\*/", "", raw, flags=re.S))
    # Who defines each non-static function.
    definer = {}
    for f in files:
        if not f.endswith(".c"):
            continue
        for m in DEF_RE.finditer(text[f]):
            name = m.group("name")
            if m.group("static") or name in ("if", "for", "while", "switch", "return", "sizeof") \
                    or OPENCL_API_RE.match(name):
                continue
            definer.setdefault(name, f)
    edges = {f: {} for f in files}  # f -> {g: why}
    for f in files:
        d = os.path.dirname(f)
        for inc in includes[f]:
            for cand in (os.path.normpath(os.path.join(d, inc)), os.path.normpath(inc),
                         os.path.normpath(os.path.join("include", inc))):
                if os.path.isfile(os.path.join(top, cand)):
                    if cand != f and cand in edges:
                        edges[f].setdefault(cand, "includes " + inc)
                    break
        if f.endswith(".c"):
            for name in set(IDENT_RE.findall(text[f])):
                g = definer.get(name)
                if g and g != f:
                    edges[f].setdefault(g, "uses " + name + "()")
    problems = []
    for f in files:
        lf = layer_of(f)
        for g, why in sorted(edges[f].items()):
            lg = layer_of(g)
            if lg > lf:
                problems.append("upward: %s (%s) %s from %s (%s)" % (f, LAYERS[lf][0], why, g, LAYERS[lg][0]))
    # Cycles: strongly connected components (Tarjan, iterative).
    index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]
    for start in files:
        if start in index:
            continue
        work = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter[0]; counter[0] += 1
        stack.append(start); on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]; counter[0] += 1
                    stack.append(w); on.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop(); on.discard(w); comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    sccs.append(sorted(comp))
    for comp in sccs:
        inside = ["%s -> %s (%s)" % (a, b, edges[a][b]) for a in comp for b in sorted(edges[a]) if b in comp]
        problems.append("cycle between %s:\n      %s" % (", ".join(comp), "\n      ".join(inside)))
    if problems:
        for p in problems:
            print("check-layers: " + p)
        print("check-layers: %d problem(s) in %d files" % (len(problems), len(files)))
        return 1
    nedges = sum(len(e) for e in edges.values())
    print("check-layers: %d files, %d dependencies, every one downward, no cycles" % (len(files), nedges))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")))
