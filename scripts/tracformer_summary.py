#!/usr/bin/env python3
"""Tables, paired confidence intervals and a figure from scripts/tracformer_experiments.sh output.

Usage: scripts/tracformer_summary.py OUT_DIR [--seeds 1,2] [--equal-time] [--png FIGURE.png]

OUT_DIR is the experiments' directory, or the same packed as a .tar.xz (the committed study:
docs/results/tracformer/study.tar.xz, made by scripts/pack_results.py).

Every model was scored on the same test crops with the same masks, so models are compared crop by
crop: a difference in bits per character comes with a 95 % paired bootstrap interval over crops
(2,000 resamples, seed 0). Seeds are averaged crop by crop before comparing. With --equal-time the
models are those saved at equal wall-clock (`tracformer_experiments.sh --equal-time`), and a run
that has none is left out.
"""
import argparse
import json
import random
import sys
import tempfile

from results_archive import unpacked

PAIRS = [("tf-car", "bart"), ("tf-ac", "bert"), ("tf-car", "ar"), ("tf-car", "tf-car-dense"),
         ("tf-car", "tf-car-mixed"), ("tf-car-mixed", "ar")]
RATIOS = ["0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"]
MEANS = ["16", "3", "1"]
RANGES = ["0.25:0.75", "0.5:1", "0:0.5", "0.1:0.4,0.6:0.9", "0:0.4,0.5:0.8", "0:0.25,0.75:1",
          "0:0.1,0.2:0.5,0.7:1"]
# One query of each family at half the characters hidden: how a model trained on one mask family
# (the model's name says which) answers the others.
QUERY_FAMILIES = [("spans of mean 16 (the training spans)", "spans-m16-p0.5"),
                  ("spans of mean 3", "spans-m3-p0.5"),
                  ("random single characters", "spans-m1-p0.5"),
                  ("prefix given (second half hidden)", "ranges-0.5:1"),
                  ("suffix given (first half hidden)", "ranges-0:0.5"),
                  ("middle hidden", "ranges-0.25:0.75"),
                  ("both ends hidden", "ranges-0:0.25,0.75:1")]
# Models whose equal-time budget is their N steps: tracformer_experiments.sh writes them no
# equal-time/ (within 2 % of TF-CAR's time, the reference).
BUDGET_IS_N_STEPS = ("tf-car", "tf-ac", "tf-car-mixed")


def evaluations(directory, model, equal_time):
    """The directory of a run's evaluations under the chosen protocol, or None if it has none."""
    if not equal_time:
        return directory / "eval"
    if (directory / "equal-time" / "eval").is_dir():
        return directory / "equal-time" / "eval"
    return directory / "eval" if model in BUDGET_IS_N_STEPS else None


def load(out_dir, seeds, equal_time=False):
    """{model: {eval name: (per-crop bits summed over seeds, per-crop chars, seeds)}}"""
    with tempfile.TemporaryDirectory() as scratch:
        return load_runs(unpacked(out_dir, scratch), seeds, equal_time)


def load_runs(root, seeds, equal_time):
    models = {}
    for directory in sorted(root.glob("*-s*")):
        model, seed = directory.name.rsplit("-s", 1)
        found = evaluations(directory, model, equal_time)
        if (seeds and seed not in seeds) or found is None:
            continue
        for path in sorted(found.glob("*.json")):
            record = json.loads(path.read_text())
            bits, chars = record["crop_bits"], record["crop_chars"]
            entry = models.setdefault(model, {}).get(path.stem)
            if entry is None:
                models[model][path.stem] = [list(bits), list(chars), 1]
            else:
                entry[0] = [a + b for a, b in zip(entry[0], bits)]
                entry[2] += 1
    return models


def bits_per_char(entry):
    bits, chars, seeds = entry
    return sum(bits) / seeds / sum(chars)


def paired_interval(a, b, resamples=2000):
    """Mean difference a - b in bits per character with a 95 % paired bootstrap interval."""
    (bits_a, chars, seeds_a), (bits_b, _, seeds_b) = a, b
    n = len(chars)
    rows = [(bits_a[i] / seeds_a - bits_b[i] / seeds_b, chars[i]) for i in range(n)]
    rng = random.Random(0)
    draws = []
    for _ in range(resamples):
        sample = [rows[rng.randrange(n)] for _ in range(n)]
        draws.append(sum(d for d, _ in sample) / max(1, sum(c for _, c in sample)))
    draws.sort()
    diff = sum(d for d, _ in rows) / sum(c for _, c in rows)
    return diff, draws[int(0.025 * resamples)], draws[int(0.975 * resamples) - 1]


def table(models, names, title, columns):
    present = [m for m in ["tf-car", "tf-ac", "bart", "bert", "ar", "tf-car-dense", "tf-car-mixed"]
               if m in models]
    print(f"\n{title}\n")
    print("| " + " | ".join([columns] + present) + " |")
    print("| " + " | ".join(["---"] * (len(present) + 1)) + " |")
    for label, name in names:
        cells = [f"{bits_per_char(models[m][name]):.3f}" if name in models[m] else "" for m in present]
        print("| " + " | ".join([label] + cells) + " |")


def comparisons(models, names, title):
    print(f"\n{title} (bits per character, first minus second; 95 % paired bootstrap interval)\n")
    print("| evaluation | " + " | ".join(f"{a} - {b}" for a, b in PAIRS) + " |")
    print("| " + " | ".join(["---"] * (len(PAIRS) + 1)) + " |")
    for label, name in names:
        cells = []
        for a, b in PAIRS:
            if a in models and b in models and name in models[a] and name in models[b]:
                d, lo, hi = paired_interval(models[a][name], models[b][name])
                cells.append(f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]")
            else:
                cells.append("")
        print(f"| {label} | " + " | ".join(cells) + " |")


def figure(models, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, len(MEANS), figsize=(5 * len(MEANS), 4), sharey=True)
    for axis, mean in zip(axes, MEANS):
        for model in models:
            points = [(float(r), bits_per_char(models[model][f"spans-m{mean}-p{r}"]))
                      for r in RATIOS if f"spans-m{mean}-p{r}" in models[model]]
            if points:
                axis.plot(*zip(*points), marker="o", label=model)
        axis.set_title(f"geometric spans, mean {mean}")
        axis.set_xlabel("mask ratio")
        axis.grid(alpha=0.3)
    axes[0].set_ylabel("bits per hidden character (test split)")
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"\nwrote {path}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--seeds", default="", help="comma-separated seeds to use (default: all)")
    parser.add_argument("--equal-time", action="store_true",
                        help="compare the models saved at equal wall-clock instead of equal steps")
    parser.add_argument("--png", help="write the bits-per-character curves here")
    args = parser.parse_args()
    seeds = [s for s in args.seeds.split(",") if s]
    models = load(args.out_dir, seeds, args.equal_time)
    if not models:
        sys.exit(f"no evaluations under {args.out_dir}" + (f" for seeds {args.seeds}" if seeds else ""))
    for mean in MEANS:
        names = [(f"p = {r}", f"spans-m{mean}-p{r}") for r in RATIOS]
        table(models, names, f"Bits per hidden character, geometric spans of mean {mean}", "ratio")
        comparisons(models, names, f"Paired differences, spans of mean {mean}")
    names = [(r, f"ranges-{r}") for r in RANGES]
    table(models, names, "Bits per hidden character, fixed mask ranges (hidden fractions)", "ranges")
    comparisons(models, names, "Paired differences, fixed mask ranges")
    table(models, QUERY_FAMILIES, "Query generalisation: bits per hidden character, half hidden",
          "query family")
    comparisons(models, QUERY_FAMILIES, "Paired differences, query families")
    if "tf-ac" in models:
        names = [(f"p = {r}", f"car-spans-m16-p{r}") for r in ("0.1", "0.5", "0.9")]
        table(models, names, "TF-AC read left to right (CAR input mode, exact chain rule)", "ratio")
    if args.png:
        figure(models, args.png)


if __name__ == "__main__":
    main()
