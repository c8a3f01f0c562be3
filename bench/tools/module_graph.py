#!/usr/bin/env python3
"""Print the import graph between the runtime's modules and fail on a cycle.

Usage: python3 bench/tools/module_graph.py [runtime/src] [--depth N] [--edges]

A module is a top-level module of `runtime/src` (`callback`, `monitor`, `state`, ...); with
`--depth 2`, a file or folder one level below (`monitor::csv`, `callback::order`). An edge A -> B
is any `crate::B...` path in A's code (a `use`, or a path written inline), `super::` resolved, and
`crate::Name` resolved through `lib.rs`'s `pub use module::{Name}` re-exports. Comments (doc links
included) are not imports. Exit status 1 when the graph has a cycle, which is printed.
"""

import os
import re
import sys


def module_of(rel_path, depth):
    parts = rel_path[: -len(".rs")].split(os.sep)
    if parts[-1] == "mod":
        parts = parts[:-1]
    if parts == ["lib"]:
        return None
    return "::".join(parts[:depth])


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return "\n".join(line.split("//", 1)[0] for line in text.splitlines())


def root_reexports(src):
    """`pub use module::{A, B};` in lib.rs: name -> module path."""
    text = strip_comments(open(os.path.join(src, "lib.rs")).read())
    names = {}
    for m in re.finditer(r"^pub use ((?:\w+::)*\w+)::\{([^}]*)\};", text, flags=re.M | re.S):
        for name in m.group(2).split(","):
            name = name.strip()
            if name:
                names[name] = m.group(1)
    for m in re.finditer(r"^pub use ((?:\w+::)*\w+)::(\w+);", text, flags=re.M):
        names[m.group(2)] = m.group(1)
    return names


def expand_use_groups(text):
    """`crate::a::{b, c::{d}}` -> `crate::a::b`, `crate::a::c::d` (enough for our paths)."""
    out = []
    for m in re.finditer(r"\b(crate|super)((?:::\w+)*)::\{", text):
        start = m.end()
        level, i = 1, start
        while i < len(text) and level:
            level += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        inner = text[start : i - 1]
        prefix = m.group(1) + m.group(2)
        items, level, cur = [], 0, ""
        for ch in inner:
            if ch == "," and level == 0:
                items.append(cur)
                cur = ""
                continue
            level += {"{": 1, "}": -1}.get(ch, 0)
            cur += ch
        items.append(cur)
        for item in items:
            item = item.strip()
            if item and item != "self":
                out.extend(expand_use_groups(prefix + "::" + item) or [prefix + "::" + item])
            elif item == "self":
                out.append(prefix)
    return out


def main():
    args = sys.argv[1:]
    depth = 1
    show_edges = "--edges" in args
    if "--depth" in args:
        depth = int(args[args.index("--depth") + 1])
    rest = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--depth")]
    src = rest[0] if rest else os.path.join(os.path.dirname(__file__), "..", "..", "runtime", "src")
    src = os.path.normpath(src)
    reexports = root_reexports(src)
    modules = set()
    edges = {}
    for dirpath, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            me = module_of(rel, depth)
            if me is None:
                continue
            modules.add(me)
            # `super` of a file: its folder's module (of mod.rs: the parent folder's).
            parts = rel[: -len(".rs")].split(os.sep)
            parent = parts[:-2] if parts[-1] == "mod" else parts[:-1]
            text = strip_comments(open(os.path.join(dirpath, f)).read())
            # Test modules (`#[cfg(test)] mod tests { ... }`) are not part of the layering.
            text = re.split(r"#\[cfg\(test\)\]\s*mod \w+", text)[0]
            paths = expand_use_groups(text)
            paths += [m.group(0) for m in re.finditer(r"\b(?:crate|super)(?:::\w+)+", text)]
            for path in paths:
                segs = path.split("::")
                if segs[0] == "super":
                    base = list(parent)
                    while segs and segs[0] == "super":
                        segs = segs[1:]
                        if segs and segs[0] == "super":
                            base = base[:-1]
                    segs = base + segs
                else:
                    segs = segs[1:]
                if not segs:
                    continue
                is_module = os.path.exists(os.path.join(src, segs[0]) + ".rs") or os.path.isdir(
                    os.path.join(src, segs[0])
                )
                if not is_module and segs[0] in reexports:
                    segs = reexports[segs[0]].split("::") + segs[1:]
                target = "::".join(segs[:depth])
                if not os.path.exists(os.path.join(src, *segs[:depth]) + ".rs") and not os.path.isdir(
                    os.path.join(src, *segs[:depth])
                ):
                    # A name, not a module, at this depth: its module is the shorter prefix.
                    target = "::".join(segs[: depth - 1]) if depth > 1 else None
                if not target or target == me or target.split("::")[0] == "__private":
                    continue
                edges.setdefault(me, set()).add(target)
    if show_edges:
        for a in sorted(edges):
            print(f"{a} -> {', '.join(sorted(edges[a]))}")
    # Tarjan's strongly connected components.
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    sys.setrecursionlimit(10000)
    for v in sorted(modules | set(edges)):
        if v not in index:
            visit(v)
    cycles = [sorted(c) for c in comps if len(c) > 1]
    if cycles:
        for c in cycles:
            print("cycle: " + " <-> ".join(c))
        return 1
    # Layers: a module's layer is one above the highest of what it imports.
    layer = {}

    def depth_of(v, seen=()):
        if v not in layer:
            layer[v] = 1 + max((depth_of(w) for w in edges.get(v, ())), default=-1)
        return layer[v]

    for v in sorted(modules):
        depth_of(v)
    for n in sorted(set(layer.values())):
        print(f"layer {n}: {', '.join(sorted(v for v in layer if layer[v] == n))}")
    print(f"no cycle among {len(modules)} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
