#!/usr/bin/env python3
"""Files and functions that outgrow a screen, in both published crates (runtime/src, macros/src).

Usage: python3 bench/tools/sizes.py [DIR ...] [--max-file 400] [--max-fn 80] [--list N]

The rule counts code, never documentation: a line counts when something other than a comment
is left on it once comments (`//`, `///`, `//!`, `/* */`) are taken out; blank lines, comment
lines and doc lines do not count, and neither do tests (a `#[cfg(test)]` module, inline or in its
own file, and every file under a `tests/` folder). So a file meets the rule by moving code into
another file of its concept, and shortening its documentation changes nothing.

A file's size is its code lines. A function's size is the code lines from its `fn` line to the
line of the brace that closes its body, found by counting braces outside strings, chars and
comments (a `macro_rules!` is not a function: the trait and proxies it writes out per event are
counted where they expand, not here). Prints every file and function over the limit, and exits
1 when there is one. `--list N` also prints the N largest files and functions.
"""

import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
DEFAULT_DIRS = [os.path.join(ROOT, "runtime", "src"), os.path.join(ROOT, "macros", "src")]


def code_only(line, in_block):
    """The line with comments, string and char literals blanked (for brace counting)."""
    out, i = [], 0
    while i < len(line):
        if in_block:
            end = line.find("*/", i)
            if end < 0:
                return "".join(out), True
            i, in_block = end + 2, False
            continue
        ch = line[i]
        if line.startswith("//", i):
            break
        if line.startswith("/*", i):
            in_block, i = True, i + 2
            continue
        m = re.match(r'r(#*)"', line[i:]) if ch == "r" and (i == 0 or not line[i - 1].isalnum()) else None
        if m:
            close = '"' + m.group(1)
            end = line.find(close, i + len(m.group(0)))
            i = len(line) if end < 0 else end + len(close)
            out.append('""')
            continue
        if ch == '"':
            j = i + 1
            while j < len(line) and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            out.append('""')
            continue
        if ch == "'" and re.match(r"'(\\.|[^\\'])'", line[i:]):
            i += len(re.match(r"'(\\.[^']*|[^\\'])'", line[i:]).group(0))
            out.append("' '")
            continue
        out.append(ch)
        i += 1
    return "".join(out), in_block


def scan(lines):
    """Each line's code (comments and literals blanked; None inside a multi-line string)."""
    codes, in_block, in_string = [], False, False
    for raw in lines:
        if in_string:
            m = re.search(r'(?<!\\)"', raw)
            if not m:
                codes.append('""')  # a line of a string literal is code
                continue
            in_string = False
            raw = raw[m.end():]
        code, in_block = code_only(raw, in_block)
        # A string literal left open at the end of the line runs on to the next.
        if code.count('"') % 2 == 1 and not in_block:
            in_string = True
        codes.append(code)
    return codes


def is_code(code):
    return bool(code.strip())


def test_spans(lines, codes):
    """Line ranges (first, last, 0-based) of inline `#[cfg(test)] mod x { ... }` modules, and the
    names of `#[cfg(test)] mod x;` modules in their own files."""
    spans, files = [], []
    for n, raw in enumerate(lines):
        if raw.strip() != "#[cfg(test)]":
            continue
        k = n + 1
        while k < len(lines) and lines[k].strip().startswith("#["):
            k += 1
        if k >= len(lines):
            continue
        m = re.match(r"\s*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*(;|\{)", lines[k])
        if not m:
            continue
        if m.group(4) == ";":
            files.append(m.group(3))
            continue
        depth = 0
        for j in range(k, len(lines)):
            depth += codes[j].count("{") - codes[j].count("}")
            if depth == 0 and "{" in "".join(codes[k : j + 1]):
                spans.append((n, j))
                break
    return spans, files


def in_macro(lines, n):
    """Whether line `n` lies inside a `macro_rules!` definition (by indentation)."""
    for k in range(n - 1, -1, -1):
        line = lines[k]
        if line.startswith("macro_rules!") or line.startswith("pub(crate) macro_rules!"):
            return True
        if line and not line[0].isspace() and not line.startswith("}") and not line.startswith("//") and not line.startswith("#"):
            return False
    return False


def functions(lines, codes, counted):
    """(name, first line, code lines) of every fn body; `counted[n]` says whether line n counts."""
    found, stack, depth, pending = [], [], 0, None
    for n, line in enumerate(codes, 1):
        m = re.search(r"\bfn\s+(\w+)", line)
        if m and pending is None and not in_macro(lines, n):
            pending = (m.group(1), n)
        for ch in line:
            if ch == "{":
                depth += 1
                if pending is not None:
                    stack.append((pending[0], pending[1], depth))
                    pending = None
            elif ch == "}":
                if stack and stack[-1][2] == depth:
                    name, start, _ = stack.pop()
                    found.append((name, start, sum(counted[start - 1 : n])))
                depth -= 1
            elif ch == ";" and pending is not None and (not stack or depth == stack[-1][2]):
                pending = None  # a declaration without a body (a trait method)
    return found


def module_file(path, name):
    """Where `mod name;` declared in `path` lives."""
    d = os.path.dirname(path)
    base = os.path.basename(path)
    if base not in ("mod.rs", "lib.rs", "main.rs"):
        d = os.path.join(d, base[:-3])
    for cand in (os.path.join(d, name + ".rs"), os.path.join(d, name, "mod.rs")):
        if os.path.exists(cand):
            return os.path.normpath(cand)
    return None


def measure(dirs):
    """(files: [(path, code lines)], fns: [(path, line, name, code lines)])."""
    sources, test_files = {}, set()
    for src in dirs:
        for dirpath, _, names in sorted(os.walk(src)):
            for f in sorted(names):
                if f.endswith(".rs"):
                    path = os.path.normpath(os.path.join(dirpath, f))
                    sources[path] = open(path).read().splitlines()
    parsed = {}
    for path, lines in sources.items():
        codes = scan(lines)
        spans, mods = test_spans(lines, codes)
        parsed[path] = (codes, spans)
        for name in mods:
            found = module_file(path, name)
            if found:
                test_files.add(found)
    files, fns = [], []
    for path, lines in sources.items():
        parts = path.split(os.sep)
        if path in test_files or "tests" in parts[:-1] or parts[-1] == "tests.rs":
            continue
        codes, spans = parsed[path]
        counted = [is_code(c) for c in codes]
        for a, b in spans:
            for j in range(a, b + 1):
                counted[j] = False
        files.append((path, sum(counted)))
        for name, start, count in functions(lines, codes, counted):
            if counted[start - 1]:
                fns.append((path, start, name, count))
    return files, fns


def main():
    args = sys.argv[1:]

    def opt(flag, default):
        return int(args[args.index(flag) + 1]) if flag in args else default

    max_file, max_fn, top = opt("--max-file", 400), opt("--max-fn", 80), opt("--list", 0)
    rest = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or not args[i - 1].startswith("--"))]
    dirs = rest or DEFAULT_DIRS
    files, fns = measure(dirs)
    rel = lambda p: os.path.relpath(p, ROOT)
    if top:
        print(f"the {top} largest files (code lines):")
        for path, count in sorted(files, key=lambda f: -f[1])[:top]:
            print(f"  {count:5}  {rel(path)}")
        print(f"the {top} largest functions (code lines):")
        for path, start, name, count in sorted(fns, key=lambda f: -f[3])[:top]:
            print(f"  {count:5}  {rel(path)}:{start}: fn {name}")
    bad = 0
    for path, count in files:
        if count > max_file:
            print(f"{rel(path)}: {count} code lines (more than {max_file})")
            bad += 1
    for path, start, name, count in fns:
        if count > max_fn:
            print(f"{rel(path)}:{start}: fn {name}: {count} code lines (more than {max_fn})")
            bad += 1
    if bad:
        return 1
    where = ", ".join(rel(d) for d in dirs)
    print(f"every file in {where} within {max_file} code lines, every function within {max_fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
