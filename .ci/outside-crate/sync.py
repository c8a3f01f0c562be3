#!/usr/bin/env python3
"""The crate outside the workspace that CI builds and runs: a user's crate, copied from the pages.

It is written from the README and the guide's quick start, never by hand:

- Cargo.toml: a package of its own (an empty [workspace] table keeps it out of stoker's workspace)
  whose [dependencies] are the README's install block, line for line, but that `burn-stoker` is
  this clone's runtime by path;
- src/main.rs: the README's Rust block (the example), as it is;
- src/bin/quick_start.rs: the first Rust block of book/src/quick-start.md, as it is.

`python3 .ci/outside-crate/sync.py` writes them; `--check` writes nothing and fails, naming the
file, when one differs from what the pages say (CI runs it, and tests/tests/it/docs.rs compares the
Rust files with the pages too). A page's block must be copyable as it is: no line hidden from the
reader (rustdoc's `# `), which the copy would lack.
"""
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent


def blocks(text, language):
    """The fenced blocks of `text` whose info string starts with `language`, in order."""
    found = []
    for match in re.finditer(r"^```([^\n]*)\n(.*?)^```$", text, re.M | re.S):
        info = match.group(1).strip()
        if info.split(",")[0] == language:
            found.append(match.group(2))
    return found


def rust_block(page, index=0):
    text = (ROOT / page).read_text()
    found = blocks(text, "rust")
    if len(found) <= index:
        sys.exit(f"{page}: no Rust block number {index + 1}")
    code = found[index]
    for number, line in enumerate(code.splitlines(), 1):
        if line == "#" or line.startswith("# "):
            sys.exit(f"{page}: line {number} of its Rust block is hidden from the reader (`# `): "
                     "a copy of the page would lack it")
    return code


def install_lines():
    """The README's install block: the `[dependencies]` lines, `burn-stoker`'s included."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Install\n", 1)[1].split("\n## ", 1)[0]
    toml = blocks(section, "toml")
    if len(toml) != 1 or not toml[0].startswith("[dependencies]\n"):
        sys.exit("README.md: the Install section has no ```toml block starting with [dependencies]")
    lines = toml[0].splitlines()[1:]
    if not lines or not lines[0].startswith("burn-stoker = "):
        sys.exit("README.md: the install block's first dependency is not burn-stoker")
    return lines


def manifest():
    lines = install_lines()
    # This clone's runtime stands for the README's `burn-stoker` line (a path or git source).
    lines[0] = 'burn-stoker = { path = "../../runtime" }'
    return "\n".join([
        "# Written by sync.py from README.md: do not edit (python3 .ci/outside-crate/sync.py).",
        "# A user's crate outside stoker's workspace: its [dependencies] are the README's install",
        "# block, but that burn-stoker is this clone's runtime.",
        "[package]",
        'name = "stoker-outside"',
        'version = "0.0.0"',
        'edition = "2024"',
        "publish = false",
        "",
        "# Not a member of the workspace of the folder above.",
        "[workspace]",
        "",
        "[[bin]]",
        'name = "readme"',
        'path = "src/main.rs"',
        "",
        "[[bin]]",
        'name = "quick_start"',
        'path = "src/bin/quick_start.rs"',
        "",
        "[dependencies]",
        *lines,
        "",
    ])


def wanted():
    return {
        "Cargo.toml": manifest(),
        "src/main.rs": rust_block("README.md"),
        "src/bin/quick_start.rs": rust_block("book/src/quick-start.md"),
    }


def main():
    check = sys.argv[1:] == ["--check"]
    if sys.argv[1:] not in ([], ["--check"]):
        sys.exit("usage: sync.py [--check]")
    stale = []
    for name, text in wanted().items():
        path = HERE / name
        if path.exists() and path.read_text() == text:
            continue
        if check:
            stale.append(name)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote .ci/outside-crate/{name}")
    if stale:
        sys.exit("differ from the pages they are copied from: "
                 + ", ".join(f".ci/outside-crate/{n}" for n in stale)
                 + "; run python3 .ci/outside-crate/sync.py")


if __name__ == "__main__":
    main()
