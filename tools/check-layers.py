#!/usr/bin/env python3
"""Checks that the includes of vmm/, guest/ and hypercalls/ follow the module map.

Usage: check-layers.py [SOURCE_DIR]   (default: the tree this script is in; -h: this text)

Reads the "Module map" table of SOURCE_DIR/docs/design.md, one row per folder:
| folder | purpose | may include |. A folder is a path from SOURCE_DIR
(vmm/machine, guest/locks, hypercalls); the row `vmm` holds the files at the
root of vmm/. A file belongs to the row of the longest folder that contains
it. "may include" lists folders, single headers (guest/linux/x.h: that file
only) or `every vmm folder`, comma-separated; a folder may always include
itself.

Every #include "..." or <...> in a .h, .cpp, .c or .S file is resolved the way
the build's include paths resolve it (SOURCE_DIR, guest/, hypercalls/include,
in that order; see INCLUDE_ROOTS); an include no root holds is a system or
library header and is not checked. tests/ and tools/ are not checked: tests
include whatever they test.

Exit status:
  0  every include is allowed and every permission is used;
  1  the tree and the map disagree: one line per include its row does not
     allow ("guest/locks/x.h:12: guest/locks may not include vmm/util") and
     per permission no file of the row uses ("vmm/trace may include vmm/kvm,
     but none of its files does"): a dependency that is gone leaves the map;
  2  the map cannot be used: no table, bad arguments, a folder of vmm/ or
     guest/ without its own row, a row for a folder that is not there, a
     permission naming no row or file, or a row that lets guest/ or
     hypercalls/ include the VMM (the guest is built without it).
"""
import pathlib
import re
import sys

# Where `#include "a/b.h"` is looked up, as the CMake targets set it: the
# source root (vmm/, guest/linux/), guest/ (lockvisor-guest and the
# lockvisor_locks/lockvisor_workloads libraries: "locks/x.h") and the ABI
# headers (lockvisor_abi: "lockvisor/abi/x.h").
INCLUDE_ROOTS = (".", "guest", "hypercalls/include")
# The checked tree. Each folder directly under a LAYERED one is a layer with a
# row of its own; hypercalls/ is one layer.
LAYERED = ("vmm", "guest")
CHECKED = LAYERED + ("hypercalls",)
SOURCES = (".h", ".cpp", ".c", ".S")
EVERY_VMM_FOLDER = "every vmm folder"
# What no row may grant: the guest and the ABI are built without the VMM.
NEVER = {"guest": ("vmm",), "hypercalls": ("vmm", "guest")}

INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]')


class MapError(Exception):
    pass


def module_map(design):
    """The table's rows: {folder: [permission, ...]}, in the table's order."""
    text = design.read_text(encoding="utf-8")
    start = text.find("\n## Module map")
    if start < 0:
        raise MapError(f"no module map table in {design}")
    section = text[start + 1:]
    end = section.find("\n## ")
    if end >= 0:
        section = section[:end]
    rows = {}
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] == "folder" or set(cells[0]) <= {"-"}:
            continue
        folder = cells[0].strip("`").rstrip("/")
        if folder in rows:
            raise MapError(f"two rows for {folder}")
        rows[folder] = [p.strip().strip("`") for p in cells[2].split(",") if p.strip()]
    if not rows:
        raise MapError(f"no module map table in {design}")
    return rows


def owner(rows, relative):
    """The row a path (relative to the source root, '/'-separated) belongs to."""
    parts = relative.split("/")
    for n in range(len(parts) - 1, 0, -1):
        folder = "/".join(parts[:n])
        if folder in rows:
            return folder
    return None


def resolve(root, name):
    for base in INCLUDE_ROOTS:
        path = (root / base / name).resolve()
        if path.is_file():
            try:
                return path.relative_to(root).as_posix()
            except ValueError:
                return None
    return None


def check_map(root, rows):
    """Map errors (exit 2): rows and permissions that do not fit the tree."""
    errors = []
    for top in LAYERED:
        if not (root / top).is_dir():
            errors.append(f"{top}/ is not there")
            continue
        for sub in sorted(p for p in (root / top).iterdir() if p.is_dir()):
            has_sources = any(f.suffix in SOURCES for f in sub.rglob("*"))
            if has_sources and f"{top}/{sub.name}" not in rows:
                errors.append(f"{top}/{sub.name}/ has no row in the module map")
    for folder, allowed in rows.items():
        if folder.split("/")[0] not in CHECKED or not (root / folder).is_dir():
            errors.append(f"the module map has a row for {folder}, which is not a folder of {', '.join(CHECKED)}")
        for permission in allowed:
            if permission == EVERY_VMM_FOLDER:
                target = "vmm"
            elif permission in rows:
                target = permission
            elif (root / permission).is_file() and owner(rows, permission):
                target = permission
            else:
                errors.append(f"{folder} may include {permission}: no row or file has that name")
                continue
            for forbidden in NEVER.get(folder.split("/")[0], ()):
                if target.split("/")[0] == forbidden:
                    errors.append(f"{folder} may include {permission}: {folder.split('/')[0]}/ is built without {forbidden}/")
    return errors


def allows(rows, folder, target_file, target_row):
    for permission in rows[folder]:
        if permission == EVERY_VMM_FOLDER and target_row.split("/")[0] == "vmm":
            return permission
        if permission in (target_row, target_file):
            return permission
    return None


def main(argv):
    if len(argv) == 2 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) > 2 or (len(argv) == 2 and argv[1].startswith("-")):
        print(__doc__.strip().splitlines()[2])
        return 2
    root = pathlib.Path(argv[1] if len(argv) == 2 else pathlib.Path(__file__).resolve().parent.parent).resolve()
    try:
        rows = module_map(root / "docs" / "design.md")
    except MapError as e:
        print(f"check-layers: {e}")
        return 2
    errors = check_map(root, rows)
    if errors:
        for e in errors:
            print(f"check-layers: {e}")
        return 2

    violations = []
    used = {folder: set() for folder in rows}
    for top in CHECKED:
        for path in sorted((root / top).rglob("*")):
            if path.suffix not in SOURCES or not path.is_file():
                continue
            relative = path.relative_to(root).as_posix()
            folder = owner(rows, relative)
            text = path.read_text(encoding="utf-8", errors="replace")
            for number, line in enumerate(text.splitlines(), 1):
                m = INCLUDE.match(line)
                target = resolve(root, m.group(1)) if m else None
                if target is None:
                    continue
                target_row = owner(rows, target) or "/".join(target.split("/")[:2])
                if target_row == folder:
                    continue
                permission = allows(rows, folder, target, target_row)
                if permission is None:
                    violations.append(f"{relative}:{number}: {folder} may not include {target_row}")
                else:
                    used[folder].add(permission)
    unused = [f"{folder} may include {p}, but none of its files does"
              for folder, allowed in rows.items() for p in allowed
              if p != EVERY_VMM_FOLDER and p not in used[folder]]
    for line in violations + unused:
        print(line)
    if violations or unused:
        print(f"check-layers: {len(violations)} include(s) against the module map in docs/design.md, "
              f"{len(unused)} permission(s) it grants that nothing uses")
        return 1
    print(f"check-layers: {len(rows)} folders follow the module map")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
