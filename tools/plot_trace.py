#!/usr/bin/env python3
"""Draw a Chrome trace JSON (braid's pipeline timeline) as a PNG: one row per rank/lane.

Usage: tools/plot_trace.py trace.json out.png
Needs matplotlib (pip install matplotlib); not used by the build or ctest.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

# Colour by the action's kind, read from the event name's leading letters (F3, B3, W3, send...).
COLOURS = {"F": "#4C72B0", "B": "#DD8452", "W": "#55A868", "s": "#8172B3", "r": "#937860",
           "o": "#C44E52"}


def main(path, out):
    with open(path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    if not events:
        sys.exit(f"{path}: no complete ('X') events")
    lanes = sorted({(e["pid"], e["tid"]) for e in events})
    row = {lane: i for i, lane in enumerate(lanes)}
    t0 = min(e["ts"] for e in events)
    fig, ax = plt.subplots(figsize=(12, 0.5 * len(lanes) + 1.2))
    for e in events:
        y = row[(e["pid"], e["tid"])]
        colour = COLOURS.get(e["name"][:1], "#999999")
        ax.broken_barh([(e["ts"] - t0, e["dur"])], (y - 0.4, 0.8), facecolors=colour,
                       edgecolors="white", linewidth=0.5)
        if e["dur"] > 0:
            ax.text(e["ts"] - t0 + e["dur"] / 2, y, e["name"], ha="center", va="center",
                    fontsize=6, color="white")
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"rank {p}" + (f" / {t}" if t else "") for p, t in lanes])
    ax.invert_yaxis()
    ax.set_xlabel("time (us)")
    ax.set_title(path)
    fig.tight_layout()
    fig.savefig(out, dpi=150)
    print(f"wrote {out}")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
