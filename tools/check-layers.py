#!/usr/bin/env python3
"""Checks that vmm/ includes follow the module map in docs/design.md.

Usage: check-layers.py [SOURCE_DIR]
Reads the "Module map" table of SOURCE_DIR/docs/design.md (folder | purpose |
may include), then every .h/.cpp file under SOURCE_DIR/vmm/FOLDER/ and each
`#include "vmm/OTHER/..."` in it. Exit 0 when every include is allowed; 1 with
one line per violation ("vmm/a/x.cpp:12: a may not include b") otherwise; 2
when the table is missing or a vmm/ folder has no row.
"""
import pathlib
import re
import sys


def module_map(design):
    text = design.read_text(encoding="utf-8")
    start = text.find("## Module map")
    if start < 0:
        return None
    rows = {}
    for line in text[start:].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("folder", "") or set(cells[0]) <= {"-"}:
            continue
        allowed = cells[2]
        rows[cells[0]] = None if allowed == "every folder" else {a.strip() for a in allowed.split(",") if a.strip()}
    return rows


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parent.parent)
    rows = module_map(root / "docs" / "design.md")
    if not rows:
        print(f"check-layers: no module map table in {root / 'docs' / 'design.md'}")
        return 2
    folders = sorted(p.name for p in (root / "vmm").iterdir() if p.is_dir())
    missing = [f for f in folders if f not in rows]
    if missing:
        print(f"check-layers: vmm/ folders without a row in the module map: {', '.join(missing)}")
        return 2
    include = re.compile(r'^\s*#\s*include\s+"vmm/([A-Za-z0-9_]+)/')
    violations = []
    for folder in folders:
        allowed = rows[folder]
        if allowed is None:
            continue
        for path in sorted((root / "vmm" / folder).rglob("*")):
            if path.suffix not in (".h", ".cpp"):
                continue
            for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
                m = include.match(line)
                if m and m.group(1) != folder and m.group(1) not in allowed:
                    violations.append(f"{path.relative_to(root)}:{number}: {folder} may not include {m.group(1)}")
    for v in violations:
        print(v)
    if violations:
        print(f"check-layers: {len(violations)} include(s) against the module map in docs/design.md")
        return 1
    print(f"check-layers: {len(folders)} folders follow the module map")
    return 0


if __name__ == "__main__":
    sys.exit(main())
