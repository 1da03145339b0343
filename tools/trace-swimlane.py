#!/usr/bin/python3
"""Swimlane PNG of a lockvisor timeline (lockvisor run --trace FILE; docs/trace.md).

One lane per vCPU: in the guest, in a VMM exit, halted, parked/paused by the
VMM (injected preemption), descheduled by the host (sampled from the run-state
page); under it, thin bars for the vCPU's lock waits and holds (and runs of
short ones merged by --trace-merge-short), each hold coloured by how the lock
was taken (args.path: fast, spin, steal, pending, queue, reserved, borrow;
docs/trace.md); kicks as arrows from the kicker to the halt they ended.

  /usr/bin/python3 tools/trace-swimlane.py TRACE.json -o OUT.png
      [--window START:END]      a time window, e.g. 120:125 (ms), 120ms:125ms, 800us:900us
      [--around-worst-wait]     zoom onto the longest lock wait in the trace
      [--lock N]                with --around-worst-wait: the longest wait on lock slot N

Run with Debian's python3 (python3-matplotlib), like tools/lab-plot.py.
Exit codes: 0 written, 1 the trace has nothing to show, 2 bad arguments or an
unreadable trace.
"""
import argparse
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

HOST_TID_BASE = 1000  # vmm/trace/trace_writer.h
LOCK_TID_BASE = 2000

COLORS = {
    "guest": "#4caf50",
    "exit": "#ff9800",
    "halted": "#90a4ae",
    "parked": "#8e24aa",
    "preempted": "#e53935",
    "wait": "#fdd835",
    "hold": "#1e3a8a",
    "acquisitions": "#7986cb",
    "kick": "#212121",
}
LABELS = {
    "guest": "in guest (KVM_RUN)",
    "exit": "VMM exit",
    "halted": "halted (PV halt)",
    "parked": "parked / paused by the VMM",
    "preempted": "descheduled by the host",
    "wait": "lock wait",
    "hold": "lock hold",
    "acquisitions": "short waits + holds (merged)",
}
# Holds by acquisition path (args.path, guest/locks/lock_events.h): the
# bypassing paths warm, the queue-order ones blue, the fast path grey.
PATH_COLORS = {
    "fast": "#9e9e9e",
    "spin": "#8d6e63",
    "steal": "#c2185b",
    "pending": "#f9a825",
    "queue": "#1e88e5",
    "reserved": "#0d47a1",
    "borrow": "#00897b",
    "invalid": "#000000",
}
MAX_ARROWS = 400


def fail(message, code=2):
    print(f"trace-swimlane: {message}", file=sys.stderr)
    sys.exit(code)


def parse_time(text):
    """'12.5', '12.5ms', '800us', '1.2s' -> microseconds (a bare number is ms)."""
    text = text.strip()
    for suffix, scale in (("us", 1.0), ("µs", 1.0), ("ms", 1e3), ("s", 1e6)):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text) * 1e3


def category(name):
    if name.startswith("exit "):
        return "exit"
    if name.startswith("parked") or name == "paused":
        return "parked"
    return name


def load(path):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, ValueError) as e:
        fail(f"{path}: {e}")
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail(f"{path}: not a trace-event JSON object with traceEvents")
    return doc


def collect(doc):
    """vcpu -> category -> [(start_us, dur_us)], flows [(ts_s, tid_s, ts_f, tid_f)], waits."""
    lanes = defaultdict(lambda: defaultdict(list))
    starts, ends = {}, {}
    waits = []
    vcpus = set()
    for e in doc["traceEvents"]:
        ph = e.get("ph")
        tid = e.get("tid", 0)
        if not isinstance(tid, int):
            continue
        vcpu = tid % HOST_TID_BASE
        if ph == "X":
            try:
                ts, dur = float(e["ts"]), float(e["dur"])
            except (KeyError, TypeError, ValueError):
                continue
            cat = category(str(e.get("name", "")))
            if cat not in COLORS:
                continue
            vcpus.add(vcpu)
            path = (e.get("args") or {}).get("path")
            if cat == "hold" and path in PATH_COLORS:
                cat = "hold:" + path
            lanes[vcpu][cat].append((ts, dur))
            if cat == "wait":
                waits.append((dur, ts, vcpu, (e.get("args") or {}).get("lock", 0)))
        elif ph == "s":
            starts[e.get("id")] = (float(e["ts"]), vcpu)
        elif ph == "f":
            ends[e.get("id")] = (float(e["ts"]), vcpu)
        elif ph == "M" and e.get("name") == "thread_name":
            vcpus.add(vcpu)
    flows = [(starts[i][0], starts[i][1], ends[i][0], ends[i][1]) for i in starts if i in ends]
    return lanes, flows, waits, sorted(vcpus)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("-o", "--output", required=True)
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--window", help="START:END (ms unless suffixed us/ms/s)")
    group.add_argument("--around-worst-wait", action="store_true")
    parser.add_argument("--lock", type=int, help="with --around-worst-wait: only waits on this lock slot")
    args = parser.parse_args()

    doc = load(args.trace)
    meta = doc.get("metadata") or {}
    lanes, flows, waits, vcpus = collect(doc)
    if not vcpus:
        fail("the trace has no vCPU lanes", 1)

    every = [ts for v in lanes.values() for spans in v.values() for ts, _ in spans]
    ends = [ts + d for v in lanes.values() for spans in v.values() for ts, d in spans]
    if not every:
        fail("the trace has no slices", 1)
    lo, hi = min(every), max(ends)
    title_extra = ""
    if args.window:
        try:
            a, b = args.window.split(":")
            lo, hi = parse_time(a), parse_time(b)
        except ValueError:
            fail(f"--window {args.window}: expected START:END, e.g. 120:125 or 800us:900us")
        if hi <= lo:
            fail(f"--window {args.window}: END must be after START")
    elif args.around_worst_wait:
        candidates = [w for w in waits if args.lock is None or w[3] == args.lock]
        if not candidates:
            fail("no lock waits in this trace" + ("" if args.lock is None else f" on lock {args.lock}"), 1)
        dur, ts, vcpu, lock = max(candidates)
        pad = max(dur * 0.25, 50.0)
        lo, hi = ts - pad, ts + dur + pad
        title_extra = f"; worst wait {dur / 1e3:.3f} ms on vCPU {vcpu} (lock {lock}) at {ts / 1e3:.3f} ms"
        print(f"worst wait: {dur:.3f} us, vCPU {vcpu}, lock {lock}, from {ts:.3f} us")

    span = hi - lo
    unit, scale = ("µs", 1.0) if span < 2000 else ("ms", 1e-3)

    fig_h = 1.4 + 0.55 * len(vcpus)
    fig, ax = plt.subplots(figsize=(13, fig_h))
    row = {v: i for i, v in enumerate(vcpus)}
    paths_shown = set()
    for v in vcpus:
        y = row[v]
        for cat in ("guest", "exit", "halted", "parked", "preempted"):
            spans = [((s - lo) * scale, d * scale) for s, d in lanes[v].get(cat, []) if s + d >= lo and s <= hi]
            if not spans:
                continue
            # Host preemption is drawn over the vCPU band: the thread is in
            # KVM_RUN, but not on a CPU.
            ax.broken_barh(spans, (y - 0.32, 0.44), facecolors=COLORS[cat], alpha=0.85 if cat == "preempted" else 1.0,
                           linewidth=0)
        # Merged runs of short acquisitions (--trace-merge-short) span both rows.
        bars = [("acquisitions", (0.16, 0.19), COLORS["acquisitions"]), ("wait", (0.16, 0.09), COLORS["wait"]),
                ("hold", (0.26, 0.09), COLORS["hold"])]
        bars += [("hold:" + p, (0.26, 0.09), c) for p, c in PATH_COLORS.items()]
        for cat, (off, height), color in bars:
            spans = [((s - lo) * scale, d * scale) for s, d in lanes[v].get(cat, []) if s + d >= lo and s <= hi]
            if spans:
                # An edge as wide as a pixel keeps 100 ns holds visible in a wide window.
                ax.broken_barh(spans, (y + off, height), facecolors=color, edgecolors=color, linewidth=0.5)
                if cat.startswith("hold:"):
                    paths_shown.add(cat[5:])
    shown = [f for f in flows if lo <= f[0] <= hi or lo <= f[2] <= hi]
    for ts_s, v_s, ts_f, v_f in shown[:MAX_ARROWS]:
        if v_s not in row or v_f not in row:
            continue
        ax.annotate("", xy=((ts_f - lo) * scale, row[v_f] - 0.1), xytext=((ts_s - lo) * scale, row[v_s] - 0.1),
                    arrowprops=dict(arrowstyle="->", color=COLORS["kick"], lw=0.6, alpha=0.7))

    ax.set_ylim(len(vcpus) - 0.5, -0.6)
    ax.set_yticks(range(len(vcpus)))
    # "vCPU 5 · CPU 1" when each vCPU is pinned to one host CPU (metadata.vcpu_host_cpus).
    pinned = meta.get("vcpu_host_cpus") or []

    def lane_label(v):
        cpus = pinned[v] if v < len(pinned) else None
        return f"vCPU {v} · CPU {cpus[0]}" if isinstance(cpus, list) and len(cpus) == 1 else f"vCPU {v}"

    ax.set_yticklabels([lane_label(v) for v in vcpus])
    ax.set_xlim(0, span * scale)
    ax.set_xlabel(f"time since {lo / 1e3:.3f} ms into the run ({unit})")
    handles = [Patch(color=COLORS[c], label=LABELS[c]) for c in LABELS if c != "hold" or not paths_shown]
    handles += [Patch(color=c, label=f"hold: {p}") for p, c in PATH_COLORS.items() if p in paths_shown]
    handles.append(plt.Line2D([], [], color=COLORS["kick"], marker=">", lw=0.8, label="kick → wake"))
    fig.legend(handles=handles, loc="lower center", ncol=9, fontsize=7, frameon=False)
    legend_rows = (len(handles) + 8) // 9
    words = dict(w.split("=", 1) for w in str(meta.get("args", "")).split() if "=" in w)
    what = str(meta.get("program", "?")) + (f" {words['lock']}" if "lock" in words else "")
    ax.set_title(f"lockvisor timeline: {what}, {len(vcpus)} vCPUs{title_extra}", fontsize=10)
    notes = []
    host = meta.get("host_preemptions") or {}
    if host.get("switches_unseen"):
        notes.append(f"{host['switches_unseen']} host switches the run-state program did not see: "
                     "a vCPU may be drawn running while it was descheduled")
    if host.get("source") == "none":
        notes.append("host preemptions not sampled (no run-state page)")
    if str(meta.get("kicks", "")).startswith("not visible"):
        notes.append("kicks not visible (--backend kvm)")
    if meta.get("dropped_events"):
        notes.append(f"{meta['dropped_events']} events dropped (cap)")
    if len(shown) > MAX_ARROWS:
        notes.append(f"{MAX_ARROWS} of {len(shown)} kicks drawn")
    if notes:
        # Between the axes and the title, which is raised to make room for it.
        ax.set_title(ax.get_title(), fontsize=10, pad=16)
        ax.text(0.0, 1.01, "; ".join(notes), transform=ax.transAxes, fontsize=7, color="#b71c1c", va="bottom")
    fig.tight_layout(rect=(0, (0.2 + 0.15 * legend_rows) / fig_h, 1, 1))
    try:
        fig.savefig(args.output, dpi=110)
    except OSError as e:
        fail(f"{args.output}: {e}")
    print(f"wrote {args.output} ({len(vcpus)} vCPUs, window {lo / 1e3:.3f}..{hi / 1e3:.3f} ms)")


if __name__ == "__main__":
    main()
