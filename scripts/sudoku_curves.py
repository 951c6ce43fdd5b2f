#!/usr/bin/env python3
"""Validation curves of two Sudoku trainings, Gaussian and masked GSDM, as one PNG.

Usage: scripts/sudoku_curves.py GAUSSIAN.jsonl MASKED.jsonl OUT.png

Each log's validation lines (32 fixed puzzles with half the cells given, the EMA weights) give
the fraction solved against the training step. Both models have the same network and batch, so a
step costs the same in either process: equal steps are equal training compute. The Gaussian log
may name its metric valid_at_50pct (older files) or valid_fraction.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def curve(path):
    steps, solved = [], []
    for line in open(path):
        if not line.strip():
            continue
        record = json.loads(line)
        value = record.get("valid_fraction", record.get("valid_at_50pct"))
        if value is not None:
            steps.append(record["step"])
            solved.append(100 * value)
    return steps, solved


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    gaussian, masked, out = sys.argv[1:]
    fig, ax = plt.subplots(figsize=(6.4, 4))
    for path, label in ((gaussian, "Gaussian (paper's process, DDIM 20)"),
                        (masked, "masked (adaptive, 20 steps)")):
        steps, solved = curve(path)
        ax.plot(steps, solved, marker="o", markersize=3, label=label)
    ax.set_xlabel("training step (batch 32; same cost per step for both)")
    ax.set_ylabel("validation puzzles solved, % (32, half given)")
    ax.set_ylim(0, 100)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
