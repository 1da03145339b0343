#!/usr/bin/env python3
"""Checks that the documentation points at what exists.

Usage: check-docs.py [SOURCE_DIR]
Reads README.md, docs/*.md and the README.md files of tools/ and hypercalls/ under
SOURCE_DIR and checks
  - every relative markdown link, [text](path) or ![alt](path), outside code:
    the file or folder must exist, and a #anchor must name a heading of the
    target page (GitHub's rule: lower case, punctuation dropped, spaces to -);
  - every path into the tree named in code (`vmm/x/y.h`, `tools/z.sh`, a
    folder, or a glob such as `vmm/x/y.*` or `y.{h,cpp}`; `tools/NAME` is a
    placeholder and skipped) names something that exists, so a moved or
    renamed file cannot leave its old name behind;
  - README.md's test-folder list (the bullets between <!-- test-folders -->
    and <!-- /test-folders -->, one `tests/NAME/` each) names every folder
    under tests/ and nothing else, so the list cannot drift from the tree.
Exit 0 when all hold; 1 with one line per problem ("README.md:12: no file
docs/x.md", "docs/y.md:3: no vmm/z.h in the tree") otherwise; 2 when
README.md or its test-folder list is missing.
"""
import pathlib
import re
import sys

LINK = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")
TREE_PATH = re.compile(r"(?<![\w/.$-])((?:vmm|guest|hypercalls|tests|tools|docs)/[\w./*+{},-]*)")
PLACEHOLDER = re.compile(r"/[A-Z][A-Z_]*(?=/|$)")  # tools/NAME, vmm/FOLDER/: a pattern, not a path


def split_lines(path):
    """(number, prose, code) per line: prose with code spans blanked, and the code (spans, or the
    whole line inside a fenced block)."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced:
            yield number, "", line
        else:
            yield number, CODE_SPAN.sub("", line), " ".join(CODE_SPAN.findall(line))


def anchors(path):
    """The heading anchors GitHub gives a page, duplicates numbered -1, -2, ..."""
    seen = {}
    result = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        m = None if fenced else re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not m:
            continue
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", m.group(1))  # a link in a heading reads as its text
        slug = re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        result.add(slug if count == 0 else f"{slug}-{count}")
    return result


def check_page(root, page):
    """The links and the tree paths of one page that point at nothing."""
    problems = []
    name = page.relative_to(root)
    for number, prose, code in split_lines(page):
        for named in TREE_PATH.findall(code):
            if PLACEHOLDER.search(named):
                continue
            pattern = re.sub(r"\{[^}]*\}", "*", named.rstrip(".,:;)"))
            if not (any(root.glob(pattern)) if "*" in pattern else (root / pattern).exists()):
                problems.append(f"{name}:{number}: no {named.rstrip('.,:;)')} in the tree")
        for target in LINK.findall(prose):
            if SCHEME.match(target):
                continue
            path_part, _, anchor = target.partition("#")
            dest = (page.parent / path_part).resolve() if path_part else page
            if not dest.exists():
                problems.append(f"{name}:{number}: no file {path_part}")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{name}:{number}: no heading #{anchor} in {dest.relative_to(root.resolve())}")
    return problems


def check_test_folders(root):
    text = (root / "README.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- test-folders -->\n(.*?)<!-- /test-folders -->", text, re.S)
    if not block:
        return None
    listed = set(re.findall(r"^- `tests/([^/`]+)/`", block.group(1), re.M))
    present = {p.name for p in (root / "tests").iterdir() if p.is_dir()}
    return [f"README.md: test folder tests/{f}/ is not in the test-folder list" for f in sorted(present - listed)] + [
        f"README.md: the test-folder list names tests/{f}/, which does not exist" for f in sorted(listed - present)
    ]


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    readme = root / "README.md"
    if not readme.is_file():
        print(f"check-docs: no README.md in {root}")
        return 2
    folder_problems = check_test_folders(root)
    if folder_problems is None:
        print("check-docs: README.md has no <!-- test-folders --> ... <!-- /test-folders --> list")
        return 2
    pages = [readme, *sorted((root / "docs").glob("*.md"))]
    pages += [p for folder in ("tools", "hypercalls") for p in sorted((root / folder).rglob("README.md"))]
    problems = [p for page in pages for p in check_page(root, page)] + folder_problems
    for p in problems:
        print(p)
    if problems:
        print(f"check-docs: {len(problems)} problem(s)")
        return 1
    print(f"check-docs: {len(pages)} pages, every relative link and tree path resolves, the test-folder list matches tests/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
