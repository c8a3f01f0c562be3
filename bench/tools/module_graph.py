#!/usr/bin/env python3
"""Check the runtime's module graph against ARCHITECTURE.md's layers; print the layers.

Usage: python3 bench/tools/module_graph.py [runtime/src] [--depth 2] [--edges]

A module is a top-level module of `runtime/src` (`callback`, `monitor`, `state`, ...). Every
module must have a row in ARCHITECTURE.md's layer table (`| N | `a`, `b` | ... |`), and every
import must go strictly down that table: an import of a module in a higher layer (up) or in the
same layer (beside) is an error, as is a cycle or a module the table does not name.
With `--depth 2`, the files and folders one level below (`monitor::csv`, `callback::order`)
are the nodes and only the imports between the files of one module are edges: inside each module
the files must not import each other in a circle. An edge A -> B
is any path to B in A's code: a `use`, or a path written inline (`crate::...`, `super::...`, or a
child module's name in a `mod.rs`), with re-exports (`pub use` in `lib.rs` and in each `mod.rs`)
followed to the module that defines the item. Comments (doc links included), `#[cfg(doc)]`
imports (they only serve doc links) and `#[cfg(test)]` modules (inline, or a `tests.rs` file) are not
imports. Exit status 1
on any error, each printed.
"""

import os
import re
import sys


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = "\n".join(line.split("//", 1)[0] for line in text.splitlines())
    # An import made only for the documentation's links is not a dependency of the code.
    text = re.sub(r"#\[cfg\(doc\)\]\s*use\s+[^;]+;", "", text)
    # Test modules are not part of the layering: `#[cfg(test)] mod tests;` (a file of its own,
    # skipped by the crawler) and `#[cfg(test)] mod tests { ... }` (cut to its closing brace).
    out, pos = [], 0
    for m in re.finditer(r"#\[cfg\(test\)\]\s*mod \w+\s*([;{])", text):
        if m.start() < pos:
            continue
        out.append(text[pos : m.start()])
        pos = m.end()
        if m.group(1) == "{":
            depth = 1
            while pos < len(text) and depth:
                depth += {"{": 1, "}": -1}.get(text[pos], 0)
                pos += 1
    out.append(text[pos:])
    return "".join(out)


def expand_groups(path):
    """`a::{b, c::{d, e}}` -> [`a::b`, `a::c::d`, `a::c::e`]; `a::b as c` -> `a::b`."""
    path = re.sub(r"\s+", "", path)
    m = re.match(r"^(.*?)::\{(.*)\}$", path)
    if not m:
        return [re.sub(r"as\w+$", "", path)] if path else []
    prefix, inner = m.group(1), m.group(2)
    items, level, cur = [], 0, ""
    for ch in inner:
        if ch == "," and level == 0:
            items.append(cur)
            cur = ""
            continue
        level += {"{": 1, "}": -1}.get(ch, 0)
        cur += ch
    items.append(cur)
    out = []
    for item in items:
        if item == "self":
            out.append(prefix)
        elif item:
            out.extend(expand_groups(prefix + "::" + item))
    return out


class Crate:
    def __init__(self, src):
        self.src = src
        self.files = {}  # module path (tuple) -> code
        for dirpath, _, files in os.walk(src):
            for f in files:
                if f.endswith(".rs") and f != "tests.rs":
                    rel = os.path.relpath(os.path.join(dirpath, f), src)[: -len(".rs")].split(os.sep)
                    if rel[-1] == "mod":
                        rel = rel[:-1]
                    if rel == ["lib"]:
                        rel = []
                    self.files[tuple(rel)] = strip_comments(open(os.path.join(dirpath, f)).read())
        self.reexports = {m: self._reexports(m) for m in self.files}

    def is_module(self, path):
        return tuple(path) in self.files

    def absolute(self, module, segs):
        """A path written in `module`, made absolute (a list of segments from the crate root)."""
        if segs[0] == "crate":
            return segs[1:]
        if segs[0] == "self":
            return list(module) + segs[1:]
        if segs[0] == "super":
            base = list(module)
            while segs and segs[0] == "super":
                base, segs = base[:-1], segs[1:]
            return base + segs
        if self.is_module(list(module) + segs[:1]):
            return list(module) + segs
        return None  # an external crate, std, or a local name

    def _reexports(self, module):
        names = {}
        for m in re.finditer(r"\bpub(?:\([^)]*\))?\s+use\s+([^;]+);", self.files[module]):
            for path in expand_groups(m.group(1)):
                alias = re.search(r"\bas\s+(\w+)$", m.group(1))
                segs = path.split("::")
                target = self.absolute(module, segs)
                if target:
                    names[segs[-1]] = target
        return names

    def resolve(self, path, depth=0):
        """Follow re-exports until the path names an item in the module that defines it."""
        for i in range(len(path), 0, -1):
            if self.is_module(path[:i]):
                module, rest = tuple(path[:i]), path[i:]
                if rest and depth < 16 and rest[0] in self.reexports.get(module, {}):
                    target = self.reexports[module][rest[0]]
                    if target != path[: len(target)] or len(rest) > 1:
                        return self.resolve(target + rest[1:], depth + 1)
                return list(module)
        if path and depth < 16 and path[0] in self.reexports.get((), {}):
            return self.resolve(self.reexports[()][path[0]] + path[1:], depth + 1)
        return []

    def edges(self, depth):
        edges = {}
        for module, code in self.files.items():
            if not module:
                continue
            me = "::".join(module[:depth])
            paths = []
            for m in re.finditer(r"\buse\s+([^;]+);", code):
                paths.extend(expand_groups(m.group(1)))
            paths += [m.group(0) for m in re.finditer(r"\b(?:crate|super|self)(?:::\w+)+", code)]
            for path in paths:
                target = self.absolute(module, path.split("::"))
                if not target:
                    continue
                target = self.resolve(target)
                if not target or target[0] in ("__private",):
                    continue
                name = "::".join(target[:depth])
                if name != me and not me.startswith(name + "::"):
                    edges.setdefault(me, set()).add(name)
        return edges


def table_layers(path):
    """ARCHITECTURE.md's layer table: module name -> layer number."""
    layers = {}
    for line in open(path):
        m = re.match(r"^\|\s*(\d+)\s*\|([^|]*)\|", line)
        if m:
            for name in re.findall(r"`(\w+)`", m.group(2)):
                layers[name] = int(m.group(1))
    return layers


def layer_errors(modules, edges, layers):
    errors = [f"module `{m}` has no row in ARCHITECTURE.md's layer table" for m in sorted(modules) if m not in layers]
    errors += [f"ARCHITECTURE.md's layer table names `{m}`, which is not a module" for m in sorted(layers) if m not in modules]
    for a in sorted(edges):
        for b in sorted(edges[a]):
            if a in layers and b in layers and layers[b] >= layers[a]:
                way = "beside" if layers[b] == layers[a] else "up"
                errors.append(f"`{a}` (layer {layers[a]}) imports `{b}` (layer {layers[b]}): an import {way}")
    return errors


def main():
    args = sys.argv[1:]
    depth = int(args[args.index("--depth") + 1]) if "--depth" in args else 1
    rest = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or args[i - 1] != "--depth")]
    src = rest[0] if rest else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime", "src")
    crate = Crate(os.path.normpath(src))
    modules = {"::".join(m[:depth]) for m in crate.files if m}
    edges = crate.edges(depth)
    if depth > 1:
        # Between the files of one module only: the layers order the modules, not their files.
        edges = {a: {b for b in bs if b.split("::")[0] == a.split("::")[0] and "::" in b} for a, bs in edges.items() if "::" in a}
    if "--edges" in args:
        for a in sorted(edges):
            print(f"{a} -> {', '.join(sorted(edges[a]))}")
    # Tarjan's strongly connected components.
    index, low, stack, on, comps = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
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
    errors = ["cycle: " + " <-> ".join(sorted(c)) for c in comps if len(c) > 1]
    if depth == 1:
        arch = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "ARCHITECTURE.md")
        errors += layer_errors(modules, edges, table_layers(arch))
    if errors:
        for e in errors:
            print(e)
        return 1
    layer = {}

    def layer_of(v):
        if v not in layer:
            layer[v] = 1 + max((layer_of(w) for w in edges.get(v, ())), default=-1)
        return layer[v]

    for v in sorted(modules):
        layer_of(v)
    for n in sorted(set(layer.values())):
        print(f"layer {n}: {', '.join(sorted(v for v in layer if layer[v] == n))}")
    if depth == 1:
        print(f"{len(modules)} modules, every import going down ARCHITECTURE.md's layers")
    else:
        print(f"no circle between the files of any of the {len({m.split('::')[0] for m in modules})} modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
