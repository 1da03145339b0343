#!/usr/bin/env python3
"""Adds a property to /chosen of a flattened device tree (DTB), the way
lockvisor's RISC-V VMM names its BootInfo (lockvisor/abi/riscv_boot.h):
tests/riscv/boot_guest.sh boots the RV64 guest with QEMU's own device tree
plus /chosen/lockvisor,boot-info, to check what the guest does with a
BootInfo it must not trust.

Usage: fdt_set_chosen.py IN.dtb OUT.dtb NAME HEXBYTES
  HEXBYTES is the property's value, big-endian as every FDT cell
  (0000000088000000: one u64).
Exit 0 on success, 2 on bad input (a message on stderr).
"""
import struct
import sys

FDT_MAGIC = 0xD00DFEED
BEGIN_NODE, END_NODE, PROP, NOP, END = 1, 2, 3, 4, 9


def align4(n):
    return (n + 3) & ~3


def add_property(blob, name, value):
    fields = struct.unpack_from(">10I", blob, 0)
    magic, old_total, off_struct, off_strings, off_rsvmap, version, last_comp, boot_cpu, size_strings, size_struct = fields
    if magic != FDT_MAGIC:
        raise ValueError("not a flattened device tree (bad magic)")
    if not off_rsvmap < off_struct < off_strings:
        raise ValueError("unexpected block order (reserve map, structure, strings)")
    structure = bytearray(blob[off_struct:off_struct + size_struct])
    strings = bytearray(blob[off_strings:off_strings + size_strings])
    # Find the end of /chosen's name (depth 2): the property goes right after it.
    at, depth, insert_at = 0, 0, None
    while at < len(structure):
        (token,) = struct.unpack_from(">I", structure, at)
        at += 4
        if token == BEGIN_NODE:
            end = structure.index(b"\0", at)
            depth += 1
            node = structure[at:end].decode()
            at = align4(end + 1)
            if depth == 2 and node == "chosen":
                insert_at = at
                break
        elif token == END_NODE:
            depth -= 1
        elif token == PROP:
            length, _ = struct.unpack_from(">II", structure, at)
            at += 8 + align4(length)
        elif token in (NOP, END):
            pass
        else:
            raise ValueError(f"unknown structure token {token}")
    if insert_at is None:
        raise ValueError("no /chosen node")
    name_offset = len(strings)
    strings += name.encode() + b"\0"
    prop = struct.pack(">III", PROP, len(value), name_offset) + value + b"\0" * (align4(len(value)) - len(value))
    structure[insert_at:insert_at] = prop
    rsvmap = blob[off_rsvmap:off_struct]
    new_struct = 40 + len(rsvmap) if off_rsvmap == 40 else None
    if new_struct is None:
        raise ValueError("the reserve map does not follow the header")
    new_strings = new_struct + len(structure)
    # Keep the free space after the blocks (QEMU leaves some, and the
    # firmware edits the tree in place before handing it on).
    used = new_strings + len(strings)
    total = max(used, old_total)
    header = struct.pack(">10I", FDT_MAGIC, total, new_struct, new_strings, 40, version, last_comp, boot_cpu,
                         len(strings), len(structure))
    return header + rsvmap + bytes(structure) + bytes(strings) + b"\0" * (total - used)


def main(argv):
    if len(argv) != 5:
        print("usage: fdt_set_chosen.py IN.dtb OUT.dtb NAME HEXBYTES", file=sys.stderr)
        return 2
    try:
        value = bytes.fromhex(argv[4])
        with open(argv[1], "rb") as f:
            out = add_property(f.read(), argv[3], value)
    except (OSError, ValueError) as e:
        print(f"fdt_set_chosen.py: {e}", file=sys.stderr)
        return 2
    with open(argv[2], "wb") as f:
        f.write(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
