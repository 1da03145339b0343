#!/usr/bin/python3
"""Plots of a lockvisor lab directory, from its summary.csv (lockvisor lab
writes it; see docs/lab.md). Writes PNG and SVG beside it:

  throughput  median acquisitions/s vs overcommit (vCPUs per host CPU), one line per series
  fairness    Jain's index over per-CPU operations vs overcommit
  cpu         CPU seconds per million acquisitions vs overcommit
  latency     p50 (dashed) and p99 (solid) acquisition latency vs overcommit

A series is a point's labels without the axes that set vCPUs or host CPUs
(e.g. lock=ticket). Error bars are the 95% bootstrap intervals of the medians.
Run with Debian's python3 (python3-matplotlib): /usr/bin/python3 tools/lab-plot.py DIR
"""
import csv
import os
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def series_points(rows, metric):
    """series -> sorted [(overcommit, median, lo, hi)] of the points that have the metric."""
    out = defaultdict(list)
    for row in rows:
        med = number(row.get(metric + "_median"))
        x = number(row.get("overcommit"))
        if med is None or x is None:
            continue
        lo = number(row.get(metric + "_lo")) or med
        hi = number(row.get(metric + "_hi")) or med
        out[row["series"]].append((x, med, lo, hi))
    for pts in out.values():
        pts.sort()
    return out


def plot(rows, metrics, ylabel, title, path, log=False):
    fig, ax = plt.subplots(figsize=(9, 5.5))
    drew = False
    # One colour per series without its "(N host CPUs)" suffix (e.g. per
    # lock); one marker per host-CPU count, so 4 vCPUs on 1 CPU and 8 on 2
    # (both 4:1) stay apart.
    palette = plt.get_cmap("tab20").colors
    bases = sorted({name.split(" (")[0] for name in (row["series"] for row in rows)})
    colour = {base: palette[(2 * i) % 20 if len(bases) <= 10 else i % 20] for i, base in enumerate(bases)}
    markers = {}
    for metric, style in metrics:
        for name, pts in sorted(series_points(rows, metric).items()):
            base, _, cpus = name.partition(" (")
            marker = markers.setdefault(cpus, "osD^v<>"[len(markers) % 7])
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            err = [[max(0.0, p[1] - p[2]) for p in pts], [max(0.0, p[3] - p[1]) for p in pts]]
            label = name if len(metrics) == 1 else f"{name} {metric}"
            ax.errorbar(xs, ys, yerr=err, marker=marker, linestyle=style, capsize=3, label=label, color=colour[base])
            drew = True
    if not drew:
        plt.close(fig)
        return False
    ax.set_xlabel("overcommit (vCPUs per host CPU)")
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if log:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    for ext in ("png", "svg"):
        fig.savefig(f"{path}.{ext}")
    plt.close(fig)
    return True


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
    out = lambda name: os.path.join(directory, name)  # noqa: E731
    plot(rows, [("ops_per_sec", "-")], "acquisitions per second (median)", "Throughput vs overcommit",
         out("throughput"), log=True)
    plot(rows, [("jain", "-")], "Jain index over per-CPU operations", "Fairness vs overcommit", out("fairness"))
    plot(rows, [("cpu_s_per_mop", "-")], "CPU seconds per 10^6 acquisitions", "CPU cost vs overcommit", out("cpu"),
         log=True)
    plot(rows, [("latency_p50_ns", "--"), ("latency_p99_ns", "-")], "acquisition latency, ns",
         "Acquisition latency (p50 dashed, p99 solid)", out("latency"), log=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
