#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Draws the tables of one ak_bench scenario, or the README's summary chart.

Usage: plot.py <scenario.csv> <out.svg|out.png> [scenario name]
       plot.py --summary <malloc-workloads.csv> <out.svg|out.png>

Scenario plots: the CSV is the one ak_bench writes (columns:
table,row,allocator,value,unit); every table becomes one panel titled with
the table's title in words, taken from the scenario's report beside the CSV
(<scenario>.md, its "### " headings in table order; without it, the table's
id). A group of bars per row, one bar per allocator (one colour per allocator
in every panel and plot, ALLOC_COLORS, and one per ak_pool sync mode,
MODE_COLORS), each bar labelled with its value; a
missing value is marked "n/a" on the axis. Tables whose unit is "x" (ratios) get a line at 1. A panel whose
positive values span more than a factor of 30 gets a log scale, said in
its axis label. "vsT_..." tables (rows: thread counts such as
"4 (oversubscribed)") are line charts against the number of threads;
"vsN_..." tables (rows: problem sizes) are line charts on log-log axes;
"pt_..." (per-thread detail) and "tab_..." (printed only) tables and tables
without a unit are not drawn. Legends sit to the right of the axes, outside
the data.

Summary chart (--summary): from the malloc workload set, each allocator's
time and peak resident memory relative to glibc's (geometric mean over the
workloads; glibc = 1), arenakit against jemalloc, tcmalloc and mimalloc.

Needs matplotlib (Debian: python3-matplotlib); when it is missing the script
says so and exits with status 3, and ak_bench carries on without the plot.
"""
import csv
import re
import math
import os
import sys
import textwrap
from collections import OrderedDict

COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860", "#da8bc3", "#8c8c8c",
          "#ccb974", "#64b5cd"]

# One colour per allocator, the same in every panel and every plot (a table
# that lacks a column keeps the others' colours; columns that are not
# allocators take OTHER_COLORS). A column
# is found by its label, else by its label without "malloc "/"new/delete "
# in front ("malloc glibc" is glibc) or " malloc" behind ("arenakit
# malloc" is arenakit, the drop-in malloc). arenakit's arena and pool are
# allocators of their own (ak_arena, ak_pool), apart from its malloc.
ALLOC_COLORS = {
    "arenakit": COLORS[0],
    "glibc": COLORS[1],
    "simple": COLORS[2],
    "jemalloc": COLORS[3],
    "tcmalloc": COLORS[4],
    "mimalloc": COLORS[5],
    "arenakit+prof": "#8fb3e0",  # the drop-in with the heap profiler on
    "arenakit-base": "#2b4a73",  # the drop-in of a baseline build (AK_BENCH_BASELINE)
    "ak_arena": "#3a2d8c",
    "ak_arena + buffer": "#a99be0",
    "ak_pool": "#1f2f6b",
    "pmr monotonic": COLORS[8],
    "pmr monotonic + buffer": "#7d6f1e",
    "mi_heap": "#4a3426",
    "boost::object_pool": COLORS[6],
    "boost::pool<>": "#9c2f7e",
    "pmr unsynchronized_pool": COLORS[9],
    "pmr synchronized_pool": "#1f6f80",
}
ALLOC_ALIASES = {"arenakit (ak_pool)": "ak_pool"}


def alloc_key(label):
    """The ALLOC_COLORS key of a column label; None if it is not an allocator."""
    label = ALLOC_ALIASES.get(label, label)
    bare = re.sub(r"^(malloc|new/delete) ", "", label)
    for cand in (label, bare, re.sub(r" malloc$", "", bare)):
        if cand in ALLOC_COLORS:
            return cand
    return None


# ak_pool's sync modes, and the std::mutex list they are compared with:
# one colour each in every plot (a column whose label names the mode, as
# "AK_SYNC_THREADS" or "ak_pool AK_SYNC_THREADS"), none an allocator's.
MODE_COLORS = {
    "AK_SYNC_THREADS": "#e377c2",
    "AK_SYNC_NONE": "#8ca252",
    "AK_SYNC_SPINLOCK": "#17becf",
    "AK_SYNC_LOCKFREE": "#bcbd22",
    "std::mutex free list": "#8c8c8c",
}


def mode_key(label):
    """The MODE_COLORS key a column label names; None if it names none."""
    for k in MODE_COLORS:
        if re.search(r"(^|\s)" + re.escape(k) + r"$", label):
            return k
    return None


# Colours for the other columns that are not allocators (arenakit's
# configurations), in column order: never an allocator's colour, nor that
# of a sync mode in the same table.
OTHER_COLORS = ["#8c8c8c", "#17becf", "#bcbd22", "#e377c2", "#393b79", "#ad494a", "#8ca252", "#bd9e39"]


def column_colors(allocs):
    """The colour of each column of a table, in order: an allocator's own
    colour (ALLOC_COLORS) or a sync mode's (MODE_COLORS) wherever it
    appears, and OTHER_COLORS in column order for the other columns."""
    taken = set(ALLOC_COLORS.values()) | {MODE_COLORS[m] for m in map(mode_key, allocs) if m}
    spare = [c for c in OTHER_COLORS if c not in taken]
    out, i = [], 0
    for a in allocs:
        k, m = alloc_key(a), mode_key(a)
        if k:
            out.append(ALLOC_COLORS[k])
        elif m:
            out.append(MODE_COLORS[m])
        else:
            out.append(spare[i % len(spare)])
            i += 1
    return out

# Axis labels in words for the units ak_bench writes.
UNIT_WORDS = {
    "s": "time (seconds)",
    "ns": "time (ns)",
    "us": "time (\u00b5s)",
    "ns/op": "time per operation (ns)",
    "MiB": "memory (MiB)",
    "x": "ratio (x)",
    "M op/s": "throughput (million operations/s)",
    "ops/us": "throughput (operations/\u00b5s)",
    "k": "count (thousands)",
}

THREADS_LABEL = "threads (more than the machine's cores: oversubscribed)"


def leading_number(label):
    digits = ""
    for ch in label.strip():
        if not (ch.isdigit() or ch == "."):
            break
        digits += ch
    return float(digits) if digits else math.nan


def wrap(text, width):
    return "\n".join(textwrap.wrap(text, width, break_long_words=False)) if text else text


def thread_rows(rows):
    """Rows named by a thread count ("4 (oversubscribed)"): their numbers as tick labels, else None."""
    if not rows or any(math.isnan(leading_number(r)) for r in rows):
        return None
    if not any("oversubscribed" in r for r in rows):
        return None
    return ["%g" % leading_number(r) for r in rows]


def read_tables(src):
    """id -> {"unit", "rows": OrderedDict(row -> {alloc: value}), "allocs": [...]}, in file order."""
    tables = OrderedDict()
    with open(src, newline="") as f:
        for rec in csv.DictReader(f):
            # A table may list counts (minor faults) and ratios ("x ...")
            # beside its values; they have units of their own and are not
            # drawn on the table's axis (the tables in the .md show them).
            if re.search(r"\bfaults?\b", rec["row"]) or rec["allocator"].startswith(("x ", "minor faults")):
                continue
            t = tables.setdefault(rec["table"], {"unit": rec["unit"], "rows": OrderedDict(), "allocs": []})
            if rec["allocator"] not in t["allocs"]:
                t["allocs"].append(rec["allocator"])
            v = float(rec["value"]) if rec["value"] else math.nan
            t["rows"].setdefault(rec["row"], {})[rec["allocator"]] = v
    return tables


def read_titles(md_path, ids):
    """The tables' titles in words from the scenario's report: the "### "
    headings of its Results section, in the CSV's table order."""
    try:
        with open(md_path) as f:
            lines = f.read().splitlines()
    except OSError:
        return {}, ""
    description = lines[2].rstrip(".") if len(lines) > 2 and not lines[2].startswith(("#", "|")) else ""
    heads, in_results = [], False
    for line in lines:
        if line.startswith("## "):
            in_results = line.strip() == "## Results"
        elif in_results and line.startswith("### "):
            heads.append(line[4:].strip())
    if len(heads) < len(ids):
        return {}, description
    return dict(zip(ids, heads)), description


def positive_values(t):
    return [v for r in t["rows"].values() for v in r.values() if not math.isnan(v) and v > 0]


def set_value_scale(ax, t, label):
    """Log scale when the values span more than a factor of 30; the label says so."""
    pos = positive_values(t)
    log = bool(pos) and max(pos) / min(pos) > 30
    if log:
        ax.set_yscale("log")
        label += ", log scale"
    ax.set_ylabel(label)
    return log, pos


def legend_outside(ax):
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, frameon=False)


def line_chart(ax, t, xlabel, logx=False):
    """One line per column against the number that starts each row label."""
    rows = list(t["rows"].keys())
    xs = [leading_number(r) for r in rows]
    for a, color in zip(t["allocs"], column_colors(t["allocs"])):
        pts = sorted((x, t["rows"][r].get(a, math.nan)) for x, r in zip(xs, rows))
        pts = [(x, y) for x, y in pts if not math.isnan(y) and not math.isnan(x)]
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", markersize=3, linewidth=1.2, label=a,
                color=color)
    ax.set_xlabel(xlabel)
    if logx:
        ax.set_xscale("log")
    elif all(not math.isnan(x) for x in xs):
        ax.set_xticks(sorted(set(xs)))
    set_value_scale(ax, t, UNIT_WORDS.get(t["unit"], t["unit"]))
    ax.grid(linewidth=0.3)


def bar_chart(ax, t):
    """A group of bars per row, one bar per column, each labelled with its value (vertical text, so
    neighbouring labels never overlap), with headroom above the tallest bar for its label."""
    rows = list(t["rows"].keys())
    allocs = t["allocs"]
    width = 0.8 / max(1, len(allocs))
    nbars = len(rows) * len(allocs)
    fontsize = 6 if nbars > 24 else 7
    for i, (a, color) in enumerate(zip(allocs, column_colors(allocs))):
        xs = [r + (i - (len(allocs) - 1) / 2) * width for r in range(len(rows))]
        ys = [t["rows"][row].get(a, math.nan) for row in rows]
        bars = ax.bar(xs, ys, width * 0.95, label=a, color=color)
        for b, y in zip(bars, ys):
            if math.isnan(y):  # missing: "n/a" standing on the axis where the bar would be
                ax.annotate("n/a", (b.get_x() + b.get_width() / 2, 0.0), xycoords=("data", "axes fraction"),
                            ha="center", va="bottom", rotation=90, fontsize=fontsize, color="#808080",
                            xytext=(0, 2), textcoords="offset points")
                continue
            text = ("%.0f" if abs(y) >= 100 else "%.3g") % y
            ax.annotate(text, (b.get_x() + b.get_width() / 2, y), ha="center", va="bottom", rotation=90,
                        fontsize=fontsize, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(rows)))
    numbers = thread_rows(rows)
    if numbers:
        ax.set_xticklabels(numbers, fontsize=8)
        ax.set_xlabel(THREADS_LABEL)
    else:
        per_group = max(8, int(110 / max(1, len(rows))))  # characters per line that fit under a group
        longest_word = max((len(w) for r in rows for w in r.split()), default=0)
        if longest_word <= per_group:
            ax.set_xticklabels([wrap(r, per_group) for r in rows], fontsize=7)
        else:  # a word wider than its group: slanted labels, so neighbours never overlap
            ax.set_xticklabels([wrap(r, 28) for r in rows], fontsize=7, rotation=25, ha="right",
                               rotation_mode="anchor")
    ax.set_xlim(-0.5, len(rows) - 0.5)
    unit = t["unit"]
    if unit == "x":
        ax.axhline(1.0, color="black", linewidth=0.6)
    log, pos = set_value_scale(ax, t, UNIT_WORDS.get(unit, unit))
    if log:  # a zero has no bar on a log axis: its label stands on the axis, as n/a does
        for i, a in enumerate(allocs):
            for r, row in enumerate(rows):
                if t["rows"][row].get(a, math.nan) == 0:
                    x = r + (i - (len(allocs) - 1) / 2) * width
                    ax.annotate("0", (x, 0.0), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                                rotation=90, fontsize=fontsize, xytext=(0, 2), textcoords="offset points")
    if pos:
        top = max(pos)
        if log:
            ax.set_ylim(min(pos) / 1.5, top * 6)  # room for a vertical label above the tallest bar
        else:
            ax.set_ylim(0, top * 1.3)
    ax.grid(axis="y", linewidth=0.3)


def scenario_plot(plt, src, dst, name):
    tables = read_tables(src)
    ids = list(tables.keys())
    titles, description = read_titles(os.path.splitext(src)[0] + ".md", ids)
    tables = OrderedDict((k, t) for k, t in tables.items() if not k.startswith(("pt_", "tab_")) and t["unit"])
    if not tables:
        print("plot.py: %s has no data" % src, file=sys.stderr)
        return 1
    n = len(tables)
    fig, axes = plt.subplots(n, 1, figsize=(11, 4.2 * n + 0.6), squeeze=False, layout="constrained")
    head = name or os.path.splitext(os.path.basename(src))[0]
    # One line: the scenario's name (its description is the report's
    # caption, in the .md beside the plot), marked when the run was --quick.
    if os.environ.get("AKB_QUICK") == "1":
        head += " (quick run: too small to judge)"
    fig.suptitle(head, fontsize=10)
    for ax, (tid, t) in zip(axes[:, 0], tables.items()):
        if tid.startswith("vsT_"):
            line_chart(ax, t, THREADS_LABEL)
        elif tid.startswith("vsN_"):
            line_chart(ax, t, "problem size (TOP, the largest starting number; log scale)", logx=True)
        else:
            bar_chart(ax, t)
        ax.set_title(wrap(titles.get(tid, tid.replace("_", " ")), 110), fontsize=9)
        legend_outside(ax)
    save(fig, dst)
    return 0


def geomean(values):
    values = [v for v in values if v > 0 and not math.isnan(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summary_plot(plt, src, dst):
    """Time and peak RSS of each allocator relative to glibc's, geometric mean over the workloads."""
    tables = read_tables(src)
    if "time" not in tables or "peak_rss" not in tables:
        print("plot.py: %s has no time and peak_rss tables (malloc-workloads.csv?)" % src, file=sys.stderr)
        return 1
    order = ["arenakit", "mimalloc", "tcmalloc", "jemalloc", "glibc"]

    def relative(t):
        out = {}
        rows = {r: v for r, v in t["rows"].items() if r != "geometric mean"}
        for a in order:
            ratios = [v.get(a, math.nan) / v["glibc"] for v in rows.values() if v.get("glibc", 0) > 0]
            out[a] = geomean(ratios)
        return out, len(rows)

    time_rel, nw = relative(tables["time"])
    rss_rel, nr = relative(tables["peak_rss"])
    allocs = [a for a in order if not math.isnan(time_rel.get(a, math.nan))]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.4), layout="constrained")
    panels = [
        (axes[0], time_rel, "Time relative to glibc\n(geometric mean over %d workloads; lower is faster)" % nw),
        (axes[1], rss_rel, "Peak resident memory relative to glibc\n(geometric mean over %d workloads; "
                           "lower is leaner)" % nr),
    ]
    for ax, rel, title in panels:
        ys = list(range(len(allocs)))[::-1]
        vals = [rel[a] for a in allocs]
        colors = column_colors(allocs)  # each allocator's colour, as in every other plot
        bars = ax.barh(ys, vals, color=colors, height=0.6)
        for b, v in zip(bars, vals):
            ax.annotate("%.2fx" % v, (v, b.get_y() + b.get_height() / 2), xytext=(3, 0),
                        textcoords="offset points", va="center", fontsize=8)
        ax.set_yticks(ys)
        ax.set_yticklabels(allocs)
        ax.axvline(1.0, color="black", linewidth=0.6)
        ax.set_xlim(0, max(vals) * 1.25)
        ax.set_xlabel("relative to glibc malloc (glibc = 1.00x)")
        ax.set_title(title, fontsize=9)
        ax.grid(axis="x", linewidth=0.3)
    fig.suptitle("arenakit's malloc against glibc, jemalloc, tcmalloc and mimalloc (LD_PRELOAD, default options)",
                 fontsize=10)
    save(fig, dst)
    return 0


def save(fig, dst):
    fig.savefig(dst, metadata={"Date": None} if dst.endswith(".svg") else None, dpi=110)
    print("plot.py: wrote %s" % dst)


def main(argv):
    summary = len(argv) > 1 and argv[1] == "--summary"
    args = argv[2:] if summary else argv[1:]
    if len(args) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot.py: matplotlib is not installed (Debian: sudo apt-get install python3-matplotlib); "
              "no plot", file=sys.stderr)
        return 3
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: small, greppable SVG
    matplotlib.rcParams["svg.hashsalt"] = "ak_bench"
    if summary:
        return summary_plot(plt, args[0], args[1])
    return scenario_plot(plt, args[0], args[1], args[2] if len(args) > 2 else "")


if __name__ == "__main__":
    sys.exit(main(sys.argv))
