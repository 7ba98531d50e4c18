#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Draws the tables of one ak_bench scenario as grouped bar charts.

Usage: plot.py <scenario.csv> <out.svg|out.png> [title]

The CSV is the one ak_bench writes (columns: table,row,allocator,value,unit);
every table becomes one panel: a group of bars per row, one bar per
allocator. Tables whose unit is "x" (ratios) get a line at 1. Throughput
tables use a log scale. Conventions on the table id: "vsT_..." tables
(rows: thread counts such as "4 (oversubscribed)") are drawn as line charts,
x = the number at the start of the row label, one line per column (the seed
000 comparison graphs); "vsN_..." tables (rows: problem sizes such as TOP =
1000, 5000, ...) are line charts on log-log axes, x = the row label's number;
"pt_..." tables (per-thread detail), "tab_..." tables (printed only) and
tables without a unit are not drawn. Needs matplotlib (Debian: python3-matplotlib); when
it is missing the script says so and exits with status 3, and ak_bench
carries on without the plot.
"""
import csv
import math
import sys
from collections import OrderedDict


def leading_number(label):
    digits = ""
    for ch in label.strip():
        if not (ch.isdigit() or ch == "."):
            break
        digits += ch
    return float(digits) if digits else math.nan


def line_chart(ax, tid, t, title, colors, xlabel="threads (above the machine's core count: oversubscribed)",
               logx=False):
    """One line per column against the number that starts each row label."""
    rows = list(t["rows"].keys())
    xs = [leading_number(r) for r in rows]
    for i, a in enumerate(t["allocs"]):
        pts = [(x, t["rows"][r].get(a, math.nan)) for x, r in zip(xs, rows)]
        pts = [(x, y) for x, y in pts if not math.isnan(y)]  # a column measured at some rows only
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, linewidth=1.2, label=a,
                color=colors[i % len(colors)])
    ax.set_xlabel(xlabel)
    ax.set_ylabel(t["unit"])
    if logx:
        ax.set_xscale("log")
    elif all(not math.isnan(x) for x in xs):
        ax.set_xticks(xs)
    positive = [v for r in t["rows"].values() for v in r.values() if not math.isnan(v) and v > 0]
    if positive and max(positive) / min(positive) > 50:
        ax.set_yscale("log")
    ax.set_title(tid if not title else "%s: %s" % (title, tid), fontsize=9)
    ax.legend(fontsize=7, ncol=min(4, max(1, len(t["allocs"]))))
    ax.grid(linewidth=0.3)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    src, dst = argv[1], argv[2]
    title = argv[3] if len(argv) > 3 else ""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib is not installed (Debian: sudo apt-get install python3-matplotlib); "
              "no plot", file=sys.stderr)
        return 3

    tables = OrderedDict()  # id -> {"unit", "rows": OrderedDict(row -> {alloc: value}), "allocs": [...]}
    with open(src, newline="") as f:
        for rec in csv.DictReader(f):
            t = tables.setdefault(rec["table"], {"unit": rec["unit"], "rows": OrderedDict(), "allocs": []})
            if rec["allocator"] not in t["allocs"]:
                t["allocs"].append(rec["allocator"])
            v = float(rec["value"]) if rec["value"] else math.nan
            t["rows"].setdefault(rec["row"], {})[rec["allocator"]] = v
    tables = OrderedDict((k, t) for k, t in tables.items() if not k.startswith(("pt_", "tab_")) and t["unit"])
    if not tables:
        print("plot.py: %s has no data" % src, file=sys.stderr)
        return 1

    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: small, greppable SVG
    matplotlib.rcParams["svg.hashsalt"] = "ak_bench"
    n = len(tables)
    fig, axes = plt.subplots(n, 1, figsize=(10, 3.6 * n), squeeze=False)
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
              "#ccb974", "#64b5cd"]
    for ax, (tid, t) in zip(axes[:, 0], tables.items()):
        if tid.startswith("vsT_"):
            line_chart(ax, tid, t, title, colors)
            continue
        if tid.startswith("vsN_"):
            line_chart(ax, tid, t, title, colors, xlabel="problem size (log scale)", logx=True)
            continue
        rows = list(t["rows"].keys())
        allocs = t["allocs"]
        width = 0.8 / max(1, len(allocs))
        for i, a in enumerate(allocs):
            xs = [r + (i - (len(allocs) - 1) / 2) * width for r in range(len(rows))]
            ys = [t["rows"][row].get(a, math.nan) for row in rows]
            bars = ax.bar(xs, ys, width, label=a, color=colors[i % len(colors)])
            for b, y in zip(bars, ys):
                if not math.isnan(y):
                    ax.annotate(("%.0f" if y >= 100 else "%.3g") % y, (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom",
                                fontsize=6, xytext=(0, 1), textcoords="offset points")
        ax.set_xticks(range(len(rows)))
        ax.set_xticklabels(rows, fontsize=7, rotation=12, ha="right")
        unit = t["unit"]
        if unit == "x":
            ax.axhline(1.0, color="black", linewidth=0.6)
            ax.set_ylabel("speedup (x)")
        else:
            ax.set_ylabel(unit)
        positive = [v for r in t["rows"].values() for v in r.values() if not math.isnan(v) and v > 0]
        if positive and max(positive) / min(positive) > 50:
            ax.set_yscale("log")
        ax.set_title(tid if not title else "%s: %s" % (title, tid), fontsize=9)
        ax.legend(fontsize=7, ncol=min(5, max(1, len(allocs))))
        ax.grid(axis="y", linewidth=0.3)
    fig.tight_layout()
    fig.savefig(dst, metadata={"Date": None} if dst.endswith(".svg") else None)
    print("plot.py: wrote %s" % dst)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
