#!/usr/bin/env python3
"""Plots the newest result of each bench scenario: latency CDF and throughput over time.

Usage: perf/plot.py RESULTS_DIR OUT_DIR [--each]
Writes OUT_DIR/<scenario>-latency-cdf.png and OUT_DIR/<scenario>-throughput.png; with --each,
one pair per result file, named after the file (the WAN results: one file per latency and round).
scripts/bench.sh runs it with matplotlib from a venv under the cache directory.
"""

import glob
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"strait": "#1f77b4", "mm2": "#d62728", "mm2-defaults": "#ff7f0e"}
STYLES = {"none": "-", "lz4": "--", "zstd": ":", "gzip": "-.", "snappy": "-."}


def latest(results_dir):
    """The newest result file per scenario, by its date field, then file name."""
    best = {}
    for path in glob.glob(os.path.join(results_dir, "*.json")):
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"plot.py: skipping {path}: {e}", file=sys.stderr)
            continue
        key = (doc.get("date", ""), os.path.basename(path))
        name = doc.get("scenario")
        if name and (name not in best or key > best[name][0]):
            best[name] = (key, doc)
    return {name: doc for name, (_, doc) in best.items()}


def each(results_dir):
    """Every result file, by its file name without .json."""
    docs = {}
    for path in sorted(glob.glob(os.path.join(results_dir, "*.json"))):
        try:
            with open(path) as f:
                docs[os.path.basename(path)[:-5]] = json.load(f)
        except (OSError, ValueError) as e:
            print(f"plot.py: skipping {path}: {e}", file=sys.stderr)
    return docs


def label(entry):
    return f"{entry['tool']} [{entry.get('variant', '')}]"


def plot_cdf(name, doc, out):
    fig, ax = plt.subplots(figsize=(8, 5))
    drawn = False
    for e in doc["entries"]:
        pts = [(q, ms) for q, ms in e.get("latency_cdf", []) if q < 1.0]
        if not pts:
            continue
        # x = 1 / (1 - q) on a log axis spreads the tail: 2 = p50, 100 = p99, 1000 = p99.9.
        xs = [1.0 / (1.0 - q) for q, _ in pts]
        ys = [ms for _, ms in pts]
        ax.plot(xs, ys, STYLES.get(e.get("variant"), "-"), color=COLORS.get(e["tool"]),
                label=label(e))
        drawn = True
    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = [1, 2, 10, 100, 1000, 10000]
    ax.set_xticks(ticks)
    ax.set_xticklabels(["p0", "p50", "p90", "p99", "p99.9", "p99.99"])
    ax.set_xlabel("percentile")
    ax.set_ylabel("send → arrival latency (ms)")
    ax.set_title(f"{name}: end-to-end latency ({doc['date']})")
    ax.grid(True, which="both", alpha=0.3)
    if drawn:
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"{name}-latency-cdf.png"), dpi=100)
    plt.close(fig)


def plot_throughput(name, doc, out):
    fig, (ax, ax_cpu) = plt.subplots(2, 1, figsize=(8, 7), sharex=True)
    drawn = False
    for e in doc["entries"]:
        series = e.get("series", [])
        if not series:
            continue
        t = [p["t_s"] for p in series]
        style = STYLES.get(e.get("variant"), "-")
        color = COLORS.get(e["tool"])
        ax.plot(t, [p["mib"] for p in series], style, color=color, label=label(e))
        # CPU use per second: the difference of the cumulative CPU seconds.
        cpu = [p["cpu_s"] for p in series]
        rate = [max(0.0, b - a) for a, b in zip([0.0] + cpu[:-1], cpu)]
        ax_cpu.plot(t, rate, style, color=color, label=label(e))
        drawn = True
    ax.set_ylabel("replicated MiB/s (arrivals)")
    ax.set_title(f"{name}: throughput and replicator CPU over time ({doc['date']})")
    ax.grid(True, alpha=0.3)
    ax_cpu.set_ylabel("replicator CPU (cores)")
    ax_cpu.set_xlabel("seconds since the replicator started")
    ax_cpu.grid(True, alpha=0.3)
    if drawn:
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(out, f"{name}-throughput.png"), dpi=100)
    plt.close(fig)


def main():
    if len(sys.argv) not in (3, 4) or (len(sys.argv) == 4 and sys.argv[3] != "--each"):
        print(__doc__, file=sys.stderr)
        return 2
    results_dir, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    docs = each(results_dir) if len(sys.argv) == 4 else latest(results_dir)
    for name, doc in sorted(docs.items()):
        plot_cdf(name, doc, out)
        plot_throughput(name, doc, out)
        print(f"plot.py: {name}: {out}/{name}-latency-cdf.png, {out}/{name}-throughput.png",
              file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
