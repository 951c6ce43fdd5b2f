#!/usr/bin/python3
"""Plot the energy traces of `structdiff unn eval --json` files: total energy (float64) after
every block update, one panel per direction, one line per file.

Usage: scripts/unn_energy_plot.py EVAL.json [EVAL2.json ...] --png OUT.png
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("evals", nargs="+", help="JSON files written by structdiff unn eval")
    parser.add_argument("--png", required=True, help="figure to write")
    args = parser.parse_args()
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    for path in args.evals:
        try:
            with open(path) as f:
                result = json.load(f)
            energy = result["energy"]
        except (OSError, ValueError, KeyError) as error:
            sys.exit(f"{path}: not a structdiff unn eval JSON ({error})")
        label = f"{path.rsplit('/', 1)[-1]} (k={result['iterations']})"
        for axis, direction in zip(axes, ["classify", "generate"]):
            trace = energy[direction]["energy"]
            # The starting state (all zero) lies outside the softmax domain: energy +inf, shown as
            # a gap.
            points = [(i, e) for i, e in enumerate(trace) if e is not None]
            axis.plot([i for i, _ in points], [e for _, e in points], marker=".", label=label)
            per_iteration = len(energy[direction]["updates"][0])
            for boundary in range(per_iteration, len(trace), per_iteration):
                axis.axvline(boundary + 0.5, color="0.85", linewidth=0.8)
    for axis, title in zip(axes, ["classification (X clamped)", "generation (y clamped)"]):
        axis.set_title(title)
        axis.set_xlabel("block update")
        axis.set_ylabel("total energy (float64)")
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(args.png, dpi=120)
    print(f"wrote {args.png}")


if __name__ == "__main__":
    main()
