#!/usr/bin/env python3
"""The learning curve of one `ddpm train` run as a PNG: training loss (mean over each
validation interval) and the held-out loss (the EMA model's epsilon-MSE on the validation
images) against the step. The log may be xz-compressed (LOG.jsonl.xz).

Usage: scripts/ddpm_curve.py LOG.jsonl OUT.png
"""
import json
import lzma
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    log, out = sys.argv[1:]
    train, held_out, window = [], [], []
    for line in (lzma.open(log, "rt") if log.endswith(".xz") else open(log)):
        if not line.strip():
            continue
        record = json.loads(line)
        if "loss" in record:
            window.append(record["loss"])
        if "valid_loss" in record:
            held_out.append((record["step"], record["valid_loss"]))
            if window:
                train.append((record["step"], sum(window) / len(window)))
            window = []
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot(*zip(*train), label="training loss (mean since the last validation)")
    ax.plot(*zip(*held_out), marker="o", markersize=3, label="held-out loss (EMA weights)")
    ax.set_xlabel("training step (batch 32)")
    ax.set_ylabel("epsilon MSE")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    main()
