#!/usr/bin/env python3
"""Check the links of the guide, after `mdbook build book` (run from the repository root or from book/).

1. Every relative `href` / `src` in book/book/**/*.html must name a file that exists, and a
   `#fragment` into a page of the book must name an `id` (or `name`) on that page. Links that
   leave the built book (to files of the repository) are checked by 2.
2. Every link of the markdown sources (book/src/**/*.md) to a file of the repository must name a
   file or folder that exists: a relative link out of book/src (`../../examples/src/lib.rs`), or
   the repository's own URL (book.toml's `git-repository-url` followed by `/blob/<branch>/PATH`
   or `/tree/<branch>/PATH`), which works in the HTML wherever it is served. A relative link to
   a `.md` file outside the book is checked too, with a warning: mdBook rewrites it to `.html`,
   which the built book does not have; the repository's URL avoids that.

Prints every broken link and exits with 1 if there is one; Python's standard library only.
"""

import html.parser
import os
import re
import sys
import urllib.parse

BOOK = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.join(BOOK, "src")
OUT = os.path.join(BOOK, "book")
REPO = os.path.dirname(BOOK)


class Page(html.parser.HTMLParser):
    """The ids of a page and the relative links it makes."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.ids = set()
        self.links = []  # (attribute, value, line)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in ("id", "name") and (name == "id" or tag == "a"):
                self.ids.add(value)
            if name in ("href", "src"):
                self.links.append((name, value, self.getpos()[0]))


def is_external(url):
    parsed = urllib.parse.urlsplit(url)
    return bool(parsed.scheme) or url.startswith("//")


def parse(path, cache={}):
    if path not in cache:
        page = Page()
        with open(path, encoding="utf-8") as f:
            page.feed(f.read())
        cache[path] = page
    return cache[path]


def check_html(broken):
    if not os.path.isdir(OUT):
        broken.append(f"{OUT}: missing; run `mdbook build book` first")
        return 0
    pages = []
    for root, _dirs, files in os.walk(OUT):
        pages += [os.path.join(root, f) for f in files if f.endswith(".html")]
    checked = 0
    for page_path in sorted(pages):
        page = parse(page_path)
        for attr, url, line in page.links:
            if is_external(url) or url.startswith(("mailto:", "javascript:", "data:")):
                continue
            parts = urllib.parse.urlsplit(url)
            target_path = urllib.parse.unquote(parts.path)
            fragment = urllib.parse.unquote(parts.fragment)
            if target_path == "":
                target = page_path
            elif target_path.startswith("/"):
                target = os.path.join(OUT, target_path.lstrip("/"))
            else:
                target = os.path.normpath(os.path.join(os.path.dirname(page_path), target_path))
            where = f"{os.path.relpath(page_path, REPO)}:{line}: {attr}=\"{url}\""
            if not os.path.realpath(target).startswith(os.path.realpath(OUT) + os.sep):
                continue  # a repository file: checked in the markdown sources
            checked += 1
            if os.path.isdir(target):
                target = os.path.join(target, "index.html")
            if not os.path.exists(target):
                broken.append(f"{where}: no file {os.path.relpath(target, REPO)}")
                continue
            if fragment and target.endswith(".html"):
                if fragment not in parse(target).ids:
                    broken.append(f"{where}: no id \"{fragment}\" in {os.path.relpath(target, REPO)}")
    return checked


# [text](target) and [text](target "title"), not images of remote files; reference definitions too.
INLINE = re.compile(r"\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$", re.M)
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
CODE_SPAN = re.compile(r"`[^`\n]*`")


def repository_url():
    """book.toml's `git-repository-url`, without a trailing slash, or None."""
    with open(os.path.join(BOOK, "book.toml"), encoding="utf-8") as f:
        match = re.search(r'^\s*git-repository-url\s*=\s*"([^"]+)"', f.read(), re.M)
    return match.group(1).rstrip("/") if match else None


def repository_path(url, repo_url):
    """The repository path a URL of this repository names (`blob/<branch>/PATH`), or None."""
    if not repo_url or not url.startswith(repo_url + "/"):
        return None
    parts = urllib.parse.urlsplit(url[len(repo_url) + 1 :]).path.split("/")
    if len(parts) >= 2 and parts[0] in ("blob", "tree"):
        return urllib.parse.unquote("/".join(parts[2:]))
    return None


def check_markdown(broken, warnings):
    checked = 0
    repo_url = repository_url()
    for root, _dirs, files in os.walk(SRC):
        for name in sorted(files):
            if not name.endswith(".md"):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            # Links inside code are not links.
            text = FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)
            text = CODE_SPAN.sub(lambda m: " " * len(m.group(0)), text)
            for match in list(INLINE.finditer(text)) + list(REFERENCE.finditer(text)):
                url = match.group(1)
                line = text.count("\n", 0, match.start()) + 1
                where = f"{os.path.relpath(path, REPO)}:{line}: ({url})"
                in_repo = repository_path(url, repo_url)
                if in_repo is not None:
                    checked += 1
                    if not os.path.exists(os.path.join(REPO, in_repo)):
                        broken.append(f"{where}: no file {in_repo} in the repository")
                    continue
                if is_external(url) or url.startswith(("#", "mailto:")):
                    continue
                target_path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
                target = os.path.normpath(os.path.join(root, target_path))
                if os.path.realpath(target).startswith(os.path.realpath(SRC) + os.sep):
                    # A chapter: mdBook's output is checked above; the source must exist too.
                    if not os.path.exists(target):
                        broken.append(f"{where}: no file {os.path.relpath(target, REPO)}")
                    checked += 1
                    continue
                checked += 1
                if not os.path.exists(target):
                    broken.append(f"{where}: no file {os.path.relpath(target, REPO)} in the repository")
                elif target.endswith(".md"):
                    warnings.append(
                        f"{where}: mdBook turns this link into .html, which the built book lacks; "
                        f"link {repo_url or 'the repository'}/blob/main/{os.path.relpath(target, REPO)} instead"
                    )
    return checked


def main():
    broken, warnings = [], []
    html_links = check_html(broken)
    md_links = check_markdown(broken, warnings)
    for line in warnings:
        print(f"warning: {line}")
    for line in broken:
        print(f"broken link: {line}")
    if broken:
        print(f"{len(broken)} broken link(s)", file=sys.stderr)
        return 1
    print(f"links: {html_links} in the built book and {md_links} in the markdown sources, none broken")
    return 0


if __name__ == "__main__":
    sys.exit(main())
