#!/usr/bin/python3
"""Plots of a lockvisor lab directory, from its summary.csv and lab.json
(lockvisor lab writes both; see docs/lab.md). Writes PNG and SVG beside them:

  tradeoff    throughput (y) against worst wait (x, log), one panel per placement, every lock a
              labelled point with 95% whiskers on both axes; the scenario's [goal] shaded
  throughput  median acquisitions/s per lock, one bar chart per placement, sorted
  latency     worst wait per lock (bars) with the p99 wait (marker), one chart per placement
  fairness    Jain's index over per-CPU operations per lock, one chart per placement
  cpu         host CPU seconds per million acquisitions per lock, one chart per placement
  locality    handoff_locality per lock, one chart per placement (only when some lock hands
              the lock across virtual NUMA nodes)

A placement is "N vCPUs on M CPUs" (a point's vcpus and pcpus), together with
the labels of any other axis that is neither the lock nor a placement axis
(e.g. cs_ns=100): no picture puts two placements on one axis. Every interval
is the 95% bootstrap interval of the median (summary.csv's _lo and _hi).
Run with Debian's python3 (python3-matplotlib): /usr/bin/python3 tools/lab-plot.py DIR
"""
import csv
import json
import math
import os
import sys
import textwrap

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

try:
    import tomllib  # Python 3.11
except ImportError:  # pragma: no cover - older Python: no goal shading
    tomllib = None

# A range wider than this (max / min) is drawn on a log scale.
LOG_RANGE = 30.0


def number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def cpu_count(text):
    """Number of CPUs in a list such as "0-1,3"; None when empty (all the host's)."""
    if not text:
        return None
    n = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        try:
            n += int(hi or lo) - int(lo) + 1
        except ValueError:
            return None
    return n


class Point:
    """One summary row: which panel it belongs to, its label, its estimates."""

    def __init__(self, row, compared, other_axes):
        self.row = row
        self.labels = {k[5:]: v for k, v in row.items() if k.startswith("axis_")}
        vcpus = row.get("vcpus") or "?"
        cpus = cpu_count(row.get("pcpus"))
        cpu_text = "all host CPUs" if cpus is None else f"{cpus} CPU{'' if cpus == 1 else 's'}"
        native = row.get("native") == "true"
        # A native twin runs the same placement with host threads for vCPUs:
        # same panel, its own point ("ticket (native)").
        placement = f"{vcpus} vCPUs on {cpu_text}"
        extra = [f"{a}={self.labels[a]}" for a in other_axes if a in self.labels and a != "mode"]
        self.panel = ", ".join([placement] + extra)
        self.sort_key = (int(vcpus) if vcpus.isdigit() else 0, cpus or 0, tuple(extra))
        self.name = self.labels.get(compared) or row.get("lock") or row.get("series") or "?"
        if native:
            self.name += " (native)"

    def estimate(self, metric, scale=1.0):
        med = number(self.row.get(metric + "_median"))
        if med is None:
            return None
        lo = number(self.row.get(metric + "_lo"))
        hi = number(self.row.get(metric + "_hi"))
        lo = med if lo is None else lo
        hi = med if hi is None else hi
        return med * scale, lo * scale, hi * scale


def read_manifest(directory):
    """lab.json, or {} when it is missing or unreadable."""
    try:
        with open(os.path.join(directory, "lab.json")) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def load_points(rows, compared=None):
    """The summary rows as points, and the axis they compare: lab.json's
    "compare" (the scenario's), else vm, lock or the last axis."""
    if not rows:
        return [], compared or "lock"
    axes = [k[5:] for k in rows[0] if k.startswith("axis_")]
    if compared not in axes:
        compared = "vm" if "vm" in axes else "lock" if "lock" in axes else (axes[-1] if axes else "lock")
    # An axis that is not a placement axis shows up in the series text ("cs_ns=100,lock=ticket").
    other = [a for a in axes if a != compared and any(f"{a}=" in r.get("series", "") for r in rows)]
    return [Point(r, compared, other) for r in rows], compared


def panels_of(points):
    """[(panel title, [points])] in placement order (fewest vCPUs, most CPUs first)."""
    groups = {}
    for p in points:
        groups.setdefault(p.panel, []).append(p)
    return sorted(groups.items(), key=lambda kv: (kv[1][0].sort_key[0], -kv[1][0].sort_key[1], kv[1][0].sort_key[2]))


def colours_of(points):
    names = sorted({p.name for p in points})
    palette = plt.get_cmap("tab10" if len(names) <= 10 else "tab20").colors
    return {n: palette[i % len(palette)] for i, n in enumerate(names)}


def grid(n, width, height):
    cols = min(n, 3)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    flat = [a for row in axes for a in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    return fig, flat[:n]


def use_log(values):
    positive = [v for v in values if v and v > 0]
    return len(positive) >= 2 and max(positive) / min(positive) > LOG_RANGE


def save(fig, path):
    for ext in ("png", "svg"):
        fig.savefig(f"{path}.{ext}", dpi=110)
    plt.close(fig)


def format_rate(v):
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(v) >= scale:
            return f"{v / scale:.3g}{unit}"
    return f"{v:.3g}"


def panel_title(text):
    """A panel's title on as many lines as it needs: a long one (placement
    plus other axes) would run into the next panel's."""
    return textwrap.fill(text, width=46, break_on_hyphens=False)


def format_ms(v):
    if v >= 1000:
        return f"{v / 1000:.3g} s"
    if v >= 100:
        return f"{v:.0f} ms"
    if v >= 1:
        return f"{v:.3g} ms"
    return f"{v * 1000:.3g} µs"


def bars(points, metric, xlabel, title, path, scale=1.0, fixed_range=None, better="high", marker=None, note=None,
         in_ms=False):
    """One horizontal bar chart per placement: the metric's median per lock with
    its 95% interval, best first. `marker` = (metric, label) adds a second
    estimate of each lock as a black tick (e.g. p99 beside the worst wait)."""
    panels = [(t, [(p, p.estimate(metric, scale)) for p in ps]) for t, ps in panels_of(points)]
    panels = [(t, [(p, e) for p, e in ps if e is not None]) for t, ps in panels]
    panels = [(t, ps) for t, ps in panels if ps]
    if not panels:
        return False
    colours = colours_of(points)
    most = max(len(ps) for _, ps in panels)
    title_lines = max(panel_title(t).count("\n") + 1 for t, _ in panels)
    fig, axes = grid(len(panels), 4.6, 0.9 + 0.25 * title_lines + 0.32 * max(most, 3))
    for ax, (panel, entries) in zip(axes, panels):
        entries.sort(key=lambda pe: pe[1][0], reverse=(better == "high"))
        names = [p.name for p, _ in entries]
        meds = [e[0] for _, e in entries]
        lows = [max(0.0, e[0] - e[1]) for _, e in entries]
        highs = [max(0.0, e[2] - e[0]) for _, e in entries]
        ys = list(range(len(entries)))
        values = meds + [e[1] for _, e in entries] + [e[2] for _, e in entries]
        extra = []
        if marker:
            extra = [p.estimate(marker[0], scale) for p, _ in entries]
            values += [m[0] for m in extra if m]
        log = fixed_range is None and use_log(values)
        if log:
            positive = [v for v in values if v > 0]
            left = 10 ** math.floor(math.log10(min(positive)))
            ax.set_xscale("log")
            ax.set_xlim(left, max(positive) * 6)
        else:
            left = 0
            if fixed_range:
                ax.set_xlim(*fixed_range)
                # Room right of 1 for the value text, but no tick past the index's maximum.
                ax.set_xticks([t / 5 for t in range(6)])
            else:
                ax.set_xlim(0, max(values) * 1.3 if max(values) > 0 else 1)
        widths = [max(m, left) - left for m in meds]
        ax.barh(ys, widths, left=left, xerr=[lows, highs], color=[colours[n] for n in names], alpha=0.85,
                error_kw={"elinewidth": 1, "capsize": 2, "ecolor": "#333333"}, height=0.7)
        if marker:
            mx = [m[0] if m else None for m in extra]
            ax.plot([x for x in mx if x is not None], [y for y, x in zip(ys, mx) if x is not None], "k|",
                    markersize=11, markeredgewidth=2, label=marker[1])
        ax.set_yticks(ys)
        ax.set_yticklabels(names, fontsize=8)
        ax.invert_yaxis()  # best on top
        ax.set_title(panel_title(panel), fontsize=10)
        ax.set_xlabel(xlabel + (" (log)" if log else ""), fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(True, axis="x", alpha=0.3, which="major")
        fmt_value = format_ms if in_ms else format_rate if fixed_range is None else (lambda v: f"{v:.2f}")
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: fmt_value(v) if v > 0 else "0"))
        if log:
            lo, hi = ax.get_xlim()
            label_minor_ticks(ax.xaxis, lo, hi, fmt_value)
        for y, (p, e) in zip(ys, entries):
            # The median as text right of its whisker: exact values without a legend.
            ax.annotate(fmt_value(e[0]), (max(e[2], e[0]), y), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=7, color="#333333")
    fig.suptitle(title, fontsize=11)
    handles = []
    if marker:
        handles = [plt.Line2D([], [], color="k", marker="|", linestyle="", markersize=11, markeredgewidth=2,
                              label=marker[1]),
                   plt.Rectangle((0, 0), 1, 1, color="#888888", label=xlabel.split(",")[0] + " (bar)")]
    bottom_text = "bars: median of the runs; whiskers: 95% bootstrap interval" + (f"; {note}" if note else "")
    if handles:
        fig.legend(handles=handles, loc="upper right", fontsize=8, frameon=False, ncol=2)
    fig.text(0.01, 0.005, bottom_text, fontsize=7, color="#555555", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    save(fig, path)
    return True


def read_goal(directory):
    """The scenario's [goal] table from lab.json's copy of the scenario, or None."""
    if tomllib is None:
        return None
    try:
        with open(os.path.join(directory, "lab.json")) as f:
            text = json.load(f).get("scenario_text", "")
        return tomllib.loads(text).get("goal")
    except (OSError, ValueError, AttributeError):
        return None


def goal_applies(goal, entries):
    where = goal.get("where") or {}
    for axis, wanted in where.items():
        wanted = [str(w) for w in (wanted if isinstance(wanted, list) else [wanted])]
        if not all(p.labels.get(axis) in wanted for p, _, _ in entries):
            return False
    return True


def place_labels(ax, fig, items):
    """Direct labels without overlap: each label goes to the candidate offset
    around its point that overlaps least with the labels placed so far, the
    points, the whiskers and the panel's edge (greedy, in order of the points'
    height). items: (x, y, text, colour, (x_lo, x_hi, y_lo, y_hi))."""
    renderer = fig.canvas.get_renderer()
    frame = ax.get_window_extent(renderer)
    dots = [ax.transData.transform((x, y)) for x, y, _, _, _ in items]
    dot_boxes = [Bbox.from_extents(dx - 5, dy - 5, dx + 5, dy + 5) for dx, dy in dots]
    whiskers = []
    for x, y, _, _, (xlo, xhi, ylo, yhi) in items:
        a = ax.transData.transform((xlo, y))
        b = ax.transData.transform((xhi, y))
        whiskers.append(Bbox.from_extents(a[0], a[1] - 2, b[0], b[1] + 2))
        a = ax.transData.transform((x, ylo))
        b = ax.transData.transform((x, yhi))
        whiskers.append(Bbox.from_extents(a[0] - 2, a[1], b[0] + 2, b[1]))
    placed = []
    radii = (9, 18, 30, 44)
    angles = (0, 180, 45, 135, -45, -135, 90, -90, 22, 158, -22, -158, 68, 112, -68, -112)
    order = sorted(range(len(items)), key=lambda i: -dots[i][1])
    for i in order:
        x, y, text, colour, _ = items[i]
        best = None
        for r in radii:
            for a in angles:
                dx, dy = r * math.cos(math.radians(a)), r * math.sin(math.radians(a))
                ha = "left" if dx > 1 else "right" if dx < -1 else "center"
                va = "bottom" if dy > 1 else "top" if dy < -1 else "center"
                t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=8,
                                color=colour)
                box = t.get_window_extent(renderer).expanded(1.05, 1.1)
                t.remove()
                cost = r * 0.05
                for other in placed:
                    cost += 100 * overlap(box, other)
                for j, d in enumerate(dot_boxes):
                    cost += (30 if j != i else 60) * overlap(box, d)
                for w in whiskers:
                    cost += 8 * overlap(box, w)
                outside = box.width * box.height - overlap(box, frame)
                cost += 200 * outside
                if best is None or cost < best[0]:
                    best = (cost, dx, dy, ha, va, box)
            if best and best[0] < 1:
                break
        _, dx, dy, ha, va, box = best
        far = math.hypot(dx, dy) > 20
        ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, fontsize=8,
                    color=colour, fontweight="bold",
                    arrowprops={"arrowstyle": "-", "color": colour, "lw": 0.6, "shrinkB": 3} if far else None)
        placed.append(box)


def overlap(a, b):
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return w * h if w > 0 and h > 0 else 0.0


def tradeoff(points, goal, path, what="lock", unit="acquisitions/s", wait_label="worst wait"):
    panels = []
    for panel, ps in panels_of(points):
        entries = []
        for p in ps:
            tput = p.estimate("ops_per_sec")
            wait = p.estimate("latency_max_ns", 1e-6)  # ms
            if tput and wait and tput[0] > 0 and wait[0] > 0:
                entries.append((p, tput, wait))
        if entries:
            panels.append((panel, entries))
    if not panels:
        return False
    colours = colours_of(points)
    fig, axes = grid(len(panels), 5.4, 4.8)
    shaded = False
    for ax, (panel, entries) in zip(axes, panels):
        ys = [v for _, t, _ in entries for v in t if v > 0]
        xs = [v for _, _, w in entries for v in w if v > 0]
        ylog = use_log(ys)
        ax.set_xscale("log")
        if ylog:
            ax.set_yscale("log")
        for p, t, w in entries:
            ax.errorbar([w[0]], [t[0]], xerr=[[max(0, w[0] - w[1])], [max(0, w[2] - w[0])]],
                        yerr=[[max(0, t[0] - t[1])], [max(0, t[2] - t[0])]], fmt="o", color=colours[p.name],
                        markersize=6, elinewidth=0.8, capsize=2, zorder=3, alpha=0.8)
        x0, x1 = min(xs) / 2.5, max(xs) * 2.5
        if ylog:
            y0, y1 = min(ys) / 2.5, max(ys) * 2.5
        else:
            span = max(ys) - min(ys) or max(ys) or 1
            y0, y1 = max(0.0, min(ys) - 0.25 * span), max(ys) + 0.25 * span
        goal_box = goal_region(goal, entries) if goal and goal_applies(goal, entries) else None
        if goal_box:
            gx, gy = goal_box
            x0 = min(x0, gx / 3) if gx else x0
            x1 = max(x1, gx * 2) if gx else x1
            if gy:
                y1 = max(y1, gy * (1.5 if ylog else 1.1))
            ax.fill_between([x0 * 0.1, gx if gx else x1 * 10], [gy or y0 * 0.1] * 2, [y1 * 10] * 2, color="#2ca02c",
                            alpha=0.12, zorder=0, linewidth=0)
            if gx:
                ax.axvline(gx, color="#2ca02c", lw=0.8, ls="--", zorder=1)
            if gy:
                ax.axhline(gy, color="#2ca02c", lw=0.8, ls="--", zorder=1)
            shaded = True
        ax.set_xlim(x0, x1)
        ax.set_ylim(y0, y1)
        label_minor_ticks(ax.xaxis, x0, x1, format_ms)
        if ylog:
            label_minor_ticks(ax.yaxis, y0, y1, format_rate)
        if goal_box:
            ax.text(0.02, 0.98, "goal", transform=ax.transAxes, ha="left", va="top", fontsize=8, color="#2ca02c",
                    fontweight="bold")
        ax.set_title(panel_title(panel), fontsize=10)
        ax.set_xlabel(wait_label + " (log)", fontsize=8)
        ax.set_ylabel(unit + (" (log)" if ylog else ""), fontsize=8)
        ax.tick_params(labelsize=7)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: format_rate(v)))
        ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: format_ms(v)))
        ax.grid(True, alpha=0.3, which="major")
        ax.text(0.98, 0.02, "fast and bounded: upper left", transform=ax.transAxes, ha="right", va="bottom",
                fontsize=7, color="#777777")
    fig.suptitle(f"Which {what} is both fast and bounded? Throughput against worst wait, per placement", fontsize=11)
    note = "points: medians of the runs; whiskers: 95% bootstrap intervals on both axes"
    if shaded:
        note += f"; green: this scenario's goal ({goal.get('text', 'see report.md')})"
    fig.text(0.01, 0.005, note, fontsize=7, color="#555555", ha="left", va="bottom", wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 0.95))
    # Labels last: their placement needs the final layout.
    fig.canvas.draw()
    for ax, (panel, entries) in zip(axes, panels):
        place_labels(ax, fig, [(w[0], t[0], p.name, colours[p.name], (w[1], w[2], t[1], t[2])) for p, t, w in entries])
    save(fig, path)
    return True


def label_minor_ticks(axis, lo, hi, text):
    """A log axis spanning under two decades has few or no major ticks:
    label its minor ticks too, in the same units (never 2x10^1)."""
    if lo > 0 and hi / lo < 100:
        axis.set_minor_locator(matplotlib.ticker.LogLocator(base=10, subs=(2.0, 3.0, 5.0)))
        axis.set_minor_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: text(v)))
        axis.set_tick_params(which="minor", labelsize=6)
    else:
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def goal_region(goal, entries):
    """(worst-wait bound in ms or None, throughput floor or None) of this panel."""
    gx = number(goal.get("max_worst_wait_ms"))
    gy = number(goal.get("min_ops_per_sec"))
    ratio = number(goal.get("min_throughput_ratio"))
    ref = goal.get("relative_to")
    if ratio is not None and ref:
        for p, t, _ in entries:
            if p.name == ref:
                gy = max(gy or 0, ratio * t[0])
    if gx is None and gy is None:
        return None
    return gx, gy


def main():
    if len(sys.argv) != 2:
        print("usage: lab-plot.py LAB_DIR", file=sys.stderr)
        return 2
    directory = sys.argv[1]
    csv_path = os.path.join(directory, "summary.csv")
    try:
        with open(csv_path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        print(f"lab-plot: {csv_path}: {e.strerror}", file=sys.stderr)
        return 2
    manifest = read_manifest(directory)
    points, compared = load_points(rows, manifest.get("compare"))
    # A Linux lab counts the workload's operations, not lock acquisitions.
    linux = manifest.get("throughput_unit") == "ops/s"
    unit, per = ("operations/s", "operations") if linux else ("acquisitions/s", "acquisitions")
    what = {"lock": "lock", "vm": "VM"}.get(compared, compared.replace("_", " "))
    out = lambda name: os.path.join(directory, name)  # noqa: E731
    # A Linux workload's latency is of one operation (a futex call, an
    # open/close), not of one lock acquisition.
    tradeoff(points, read_goal(directory), out("tradeoff"), what, unit,
             "worst operation latency" if linux else "worst wait")
    bars(points, "ops_per_sec", unit, f"Throughput per {what}, per placement", out("throughput"))
    bars(points, "latency_max_ns", "worst wait", f"Worst and p99 wait per {what}, per placement", out("latency"),
         scale=1e-6, better="low", marker=("latency_p99_ns", "p99 wait"), in_ms=True)
    bars(points, "jain", f"Jain index over per-{'thread' if linux else 'CPU'} operations",
         f"Fairness per {what}, per placement", out("fairness"), fixed_range=(0, 1.22))
    bars(points, "cpu_s_per_mop", f"host CPU s per 10^6 {per}", f"CPU cost per {what}, per placement", out("cpu"),
         better="low")
    # Without virtual NUMA nodes every vCPU is in node 0 and every handoff is
    # local (locality 1): a picture only when some lock hands over across nodes.
    if any((e := p.estimate("handoff_locality")) is not None and e[0] < 1 for p in points):
        bars(points, "handoff_locality", "handoffs within a virtual node / all handoffs between two vCPUs",
             f"Handoff locality per {what}, per placement", out("locality"), fixed_range=(0, 1.22))
    return 0


if __name__ == "__main__":
    sys.exit(main())
