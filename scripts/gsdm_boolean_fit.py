#!/usr/bin/env python3
"""Time to fit of scripts/gsdm_boolean_fit.sh: a markdown table and, with --png, the paper's
Fig. 3 as a plot.

Usage: scripts/gsdm_boolean_fit.py OUT_DIR [--png FIG.png] > summary.md

For every run (n<depth>-<with|without>-s<seed>.jsonl) the step of its first validation with
accuracy 1 (16/16), or "> cap" with the best accuracy seen when none reached it; seconds are the
run's training wall time to that step (one thread, shared machine).
"""
import json
import pathlib
import re
import sys


def fit_of(path):
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    validations = [line for line in lines if "accuracy" in line]
    last_step = max((line["step"] for line in lines), default=0)
    for line in validations:
        if line["accuracy"] >= 1.0:
            return {"step": line["step"], "seconds": line["seconds"], "fit": True,
                    "last": last_step}
    best = max((line["accuracy"] for line in validations), default=float("nan"))
    return {"step": last_step, "seconds": lines[-1]["seconds"] if lines else 0.0, "fit": False,
            "best": best, "last": last_step}


def main():
    args = sys.argv[1:]
    png = None
    if "--png" in args:
        png = args[args.index("--png") + 1]
        del args[args.index("--png"):args.index("--png") + 2]
    directory = pathlib.Path(args[0])
    runs = {}
    for path in sorted(directory.glob("n*-s*.jsonl")):
        match = re.fullmatch(r"n(\d+)-(with|without)-s(\d+)\.jsonl", path.name)
        if match:
            runs[(int(match[1]), match[2], int(match[3]))] = fit_of(path)
    print("| n | intermediates | seed | steps to 16/16 | wall time (s) |")
    print("|---|---|---|---|---|")
    for (depth, variant, seed), r in sorted(runs.items()):
        steps = str(r["step"]) if r["fit"] else f"> {r['step']} (best {r['best']:.4g})"
        print(f"| {depth} | {variant} | {seed} | {steps} | {r['seconds']:.0f} |")
    if png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        figure, axes = plt.subplots(figsize=(4.5, 3.2))
        for variant, style in (("with", "-o"), ("without", "--s")):
            points = sorted((d, r) for (d, v, _), r in runs.items() if v == variant)
            axes.plot([d for d, _ in points], [r["step"] for _, r in points], style,
                      label=f"{variant} intermediates")
            for d, r in points:
                if not r["fit"]:
                    axes.annotate("not fitted by here", (d, r["step"]), textcoords="offset points",
                                  xytext=(-105, -4), fontsize=8)
        axes.set_yscale("log")
        axes.set_xticks(sorted({d for d, _, _ in runs}))
        axes.set_xlabel("circuit depth n")
        axes.set_ylabel("training steps to 16/16")
        axes.legend(loc="upper left", fontsize=8)
        figure.tight_layout()
        figure.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
