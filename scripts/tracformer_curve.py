#!/usr/bin/env python3
"""Learning curves of `tracformer train` runs as one PNG: training loss (bits per hidden character,
mean over each validation interval) and validation bits per hidden character against the step,
one colour per run. A log may be xz-compressed (LOG.jsonl.xz).

Usage: scripts/tracformer_curve.py OUT.png LABEL=LOG.jsonl [LABEL=LOG.jsonl ...]
"""
import json
import lzma
import math
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def curves(log):
    """(training points, validation points): (step, bits per hidden character)."""
    train, validation, window = [], [], []
    for line in (lzma.open(log, "rt") if log.endswith(".xz") else open(log)):
        if not line.strip():
            continue
        record = json.loads(line)
        if "loss" in record:
            window.append(record["loss"] / math.log(2))
        if "validation_bits_per_char" in record:
            validation.append((record["step"], record["validation_bits_per_char"]))
            if window:
                train.append((record["step"], sum(window) / len(window)))
                window = []
    return train, validation


def main():
    if len(sys.argv) < 3 or any("=" not in run for run in sys.argv[2:]):
        sys.exit(__doc__)
    out = sys.argv[1]
    figure, axes = plt.subplots(figsize=(7, 4))
    for index, run in enumerate(sys.argv[2:]):
        label, log = run.split("=", 1)
        train, validation = curves(log)
        colour = f"C{index}"
        axes.plot(*zip(*validation), "o-", color=colour, label=f"{label}: validation")
        if train:
            axes.plot(*zip(*train), "--", color=colour, alpha=0.6, label=f"{label}: training (interval mean)")
    axes.set_xlabel("step")
    axes.set_ylabel("bits per hidden character")
    axes.grid(alpha=0.3)
    axes.legend()
    figure.tight_layout()
    figure.savefig(out, dpi=120)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
