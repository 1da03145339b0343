#!/usr/bin/env python3
"""Writes lockvisor(1) from a roff template and the built binary's own help.

The template (lockvisor.1.in) holds the prose a help text has no room for;
its line @COMMANDS@ becomes one section per command and subcommand, read
from `lockvisor [CMD...] --help` (CLI11's layout), so the page lists every
command and option the binary has, with its help text, and cannot drift
from it. @VERSION@ becomes `lockvisor --version`.

Usage: make-man-page.py LOCKVISOR TEMPLATE OUT
"""
import re
import subprocess
import sys

# CLI11 puts an entry's help text in this column, or alone on the next line
# (indented to it) when the entry's names do not fit before it.
HELP_COLUMN = 30


def help_of(binary, path):
    return subprocess.run([binary, *path, "--help"], check=True, capture_output=True, text=True).stdout


def roff(text):
    """Text safe in a roff body line: backslashes escaped, no line that starts a request,
    the dashes of option names as minus signs (so they can be searched for and copied)."""
    text = text.replace("\\", "\\e")
    text = re.sub(r"(?<![\w-])--?[A-Za-z][\w-]*", lambda m: m.group(0).replace("-", "\\-"), text)
    return "\\&" + text if text[:1] in (".", "'") else text


def option_names(spec):
    """-h,--help TEXT:{a,b} -> \\fB\\-h\\fR, \\fB\\-\\-help\\fR TEXT:{a,b} (names bold, '-' as the minus sign)."""
    names, _, rest = spec.partition(" ")
    bold = ", ".join("\\fB" + roff(name) + "\\fR" for name in names.split(","))
    return bold + (" " + roff(rest) if rest else "")


def sections(text):
    """{"Options": [(spec, help)], "Subcommands": [...], "Positionals": [...]}, and the lines before them."""
    lines = text.rstrip("\n").split("\n")
    head, found, current = [], {}, None
    for i, line in enumerate(lines):
        if re.fullmatch(r"[A-Z][a-z]+:", line):
            current = found.setdefault(line[:-1], [])
        elif current is None:
            head.append(line)
        elif line.startswith(" " * HELP_COLUMN) and current:
            spec, help_text = current[-1]
            current[-1] = (spec, (help_text + " " + line.strip()).strip())
        elif line.startswith("  "):
            alone = i + 1 < len(lines) and lines[i + 1].startswith(" " * HELP_COLUMN)
            if alone:
                current.append((line.strip(), ""))
            else:
                current.append((line[:HELP_COLUMN].strip(), line[HELP_COLUMN:].strip()))
    return head, found


def command_section(binary, path, out):
    """The top level's options as OPTIONS, then every command as a subsection of COMMANDS."""
    head, found = sections(help_of(binary, path))
    if path:
        out.append(".SS " + " ".join(["lockvisor", *path]))
    else:
        head = []  # the template's NAME and SYNOPSIS say it
        out.append(".SH OPTIONS")
    for line in head:
        if line.startswith("Usage: "):
            out.append(".PP")
            out.append("\\fBUsage:\\fR " + roff(line[len("Usage: "):]))
        elif line.strip():
            out.append(".PP")
            out.append(roff(line.strip()))
    for title in ("Positionals", "Options"):
        entries = [e for e in found.get(title, []) if e[0] != "-h,--help"]
        if not entries:
            continue
        if path:
            out.append(".PP")
            out.append(title + ":")
        for spec, help_text in entries:
            out.append(".TP")
            out.append(option_names(spec) if title == "Options" else "\\fI" + roff(spec.split(" ")[0]) + "\\fR " + roff(spec.partition(" ")[2]))
            out.append(roff(help_text))
    if not path:
        out.append(".SH COMMANDS")
    for name, _ in found.get("Subcommands", []):
        command_section(binary, [*path, name], out)


def main():
    binary, template, out_path = sys.argv[1:4]
    version = subprocess.run([binary, "--version"], check=True, capture_output=True, text=True).stdout.strip()
    commands = []
    command_section(binary, [], commands)
    page = []
    for line in open(template, encoding="utf-8").read().split("\n"):
        page.extend(commands if line == "@COMMANDS@" else [line.replace("@VERSION@", version)])
    with open(out_path, "w", encoding="utf-8") as f:
        f.write("\n".join(page))


if __name__ == "__main__":
    main()
