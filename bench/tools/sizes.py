#!/usr/bin/env python3
"""Files and functions that outgrow a screen, in runtime/src.

Usage: python3 bench/tools/sizes.py [runtime/src] [--max-file 500] [--max-fn 80]

A file's size is its line count, tests and comments included. A function's size is the lines
from its `fn` line to the line of the brace that closes its body, found by counting braces
outside strings, chars and comments (a `macro_rules!` is not a function: the trait and
proxies it writes out per event are counted where they expand, not here). Prints every
file and function over the limit, and exits 1 when there is one.
"""

import os
import re
import sys


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
            continue
        if ch == '"':
            j = i + 1
            while j < len(line) and line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            i = j + 1
            continue
        if ch == "'" and re.match(r"'(\\.|[^\\'])'", line[i:]):
            i += len(re.match(r"'(\\.[^']*|[^\\'])'", line[i:]).group(0))
            continue
        out.append(ch)
        i += 1
    return "".join(out), in_block


def in_macro(lines, n):
    """Whether line `n` lies inside a `macro_rules!` definition (by indentation)."""
    for k in range(n - 1, -1, -1):
        line = lines[k]
        if line.startswith("macro_rules!") or line.startswith("pub(crate) macro_rules!"):
            return True
        if line and not line[0].isspace() and not line.startswith("}") and not line.startswith("//") and not line.startswith("#"):
            return False
    return False


def functions(lines):
    """(name, first line, line count) of every fn body."""
    found, stack, in_block, in_string = [], [], False, False
    depth = 0
    pending = None
    for n, raw in enumerate(lines, 1):
        # A string literal spanning lines: skip until its closing quote.
        if in_string:
            if re.search(r'(?<!\\)"', raw):
                in_string = False
                raw = raw[re.search(r'(?<!\\)"', raw).end():]
            else:
                continue
        line, in_block = code_only(raw, in_block)
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
                    found.append((name, start, n - start + 1))
                depth -= 1
            elif ch == ";" and pending is not None and not stack or (ch == ";" and pending is not None and stack and depth == stack[-1][2]):
                pending = None  # a declaration without a body (a trait method)
    return found


def main():
    args = sys.argv[1:]
    max_file = int(args[args.index("--max-file") + 1]) if "--max-file" in args else 500
    max_fn = int(args[args.index("--max-fn") + 1]) if "--max-fn" in args else 80
    rest = [a for i, a in enumerate(args) if not a.startswith("--") and (i == 0 or not args[i - 1].startswith("--"))]
    src = rest[0] if rest else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "runtime", "src")
    bad = 0
    for dirpath, _, files in sorted(os.walk(src)):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, src)
            lines = open(path).read().splitlines()
            if len(lines) > max_file:
                print(f"{rel}: {len(lines)} lines (more than {max_file})")
                bad += 1
            for name, start, count in functions(lines):
                if count > max_fn:
                    print(f"{rel}:{start}: fn {name}: {count} lines (more than {max_fn})")
                    bad += 1
    if bad:
        return 1
    print(f"every file in {os.path.relpath(src)} within {max_file} lines, every function within {max_fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
