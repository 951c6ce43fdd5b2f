#!/usr/bin/env python3
"""The GSDM paper's Fig. 6 at CPU scale, from scripts/gsdm_embeddings.sh: a markdown table of each
run's validations and, with --png, the learning curves against training wall-clock in one figure,
a panel per problem (sorting's RMSE; Sudoku's violated fraction of constrained pairs with half
the cells given, which moves long before whole grids come out valid; lower is better in both).

Usage: scripts/gsdm_embeddings_summary.py OUT_DIR [--png FIG.png] > table.md
OUT_DIR: the script's directory (sorting<N>-<IE|AE|EE>.jsonl, sudoku-<IE|AE|EE>.jsonl), or the
same packed as a .tar.xz (docs/results/gsdm-embeddings.tar.xz, made by scripts/pack_results.py)."""
import json
import sys

from results_archive import summarise

EMBEDDINGS = ["EE", "AE", "IE"]


def metric(problem):
    """The validation metric plotted for a run name's problem part (sorting<N> or sudoku), its
    panel title, and whether lower is better."""
    if problem.startswith("sorting"):
        n = int(problem[len("sorting"):])
        return "rmse", f"sorting n = {n}: RMSE", True
    return "violated_fraction", "Sudoku 9x9, half the cells given: violated pairs", True


MINUTES = [2, 4, 6, 8]


def at_minute(points, key, minute):
    """The metric at the last validation within `minute` minutes of training ("—" before any)."""
    reached = [p[key] for p in points if p["seconds"] <= 60 * minute]
    return f"{reached[-1]:.3f}" if reached else "—"


def validations(path, key):
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [line for line in lines if key in line], max((line["step"] for line in lines), default=0)


def main(out, png):
    runs = {}
    for path in sorted(out.glob("*-?E.jsonl")):
        problem, embedding = path.stem.rsplit("-", 1)
        if embedding in EMBEDDINGS:
            runs[(problem, embedding)] = validations(path, metric(problem)[0])
    order = sorted({problem for problem, _ in runs}, key=lambda p: (p.startswith("sudoku"), p))
    print("| problem | embedding | steps trained | validations | "
          + " | ".join(f"at {m} min" for m in MINUTES) + " | last | best |")
    print("| --- | --- | ---: | ---: | " + "---: | " * len(MINUTES) + "---: | ---: |")
    for problem in order:
        key, _, lower = metric(problem)
        for embedding in EMBEDDINGS:
            if (problem, embedding) not in runs:
                continue
            points, steps = runs[(problem, embedding)]
            values = [p[key] for p in points]
            best = (min if lower else max)(values) if values else float("nan")
            last = values[-1] if values else float("nan")
            marks = " | ".join(at_minute(points, key, m) for m in MINUTES)
            print(f"| {problem} | {embedding} | {steps} | {len(points)} | {marks} | {last:.3f} | "
                  f"{best:.3f} |")
    if png:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        figure, axes = plt.subplots(1, len(order), figsize=(4.2 * len(order), 3.4), squeeze=False)
        for axis, problem in zip(axes[0], order):
            key, label, _ = metric(problem)
            for embedding, style in zip(EMBEDDINGS, ("-o", "-s", "-^")):
                if (problem, embedding) in runs:
                    points = runs[(problem, embedding)][0]
                    axis.plot([p["seconds"] / 60 for p in points], [p[key] for p in points], style,
                              markersize=3, label=embedding)
            axis.set_title(label, fontsize=9)
            axis.set_xlabel("minutes of training")
            axis.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(png, dpi=120)


if __name__ == "__main__":
    arguments = sys.argv[1:]
    png = None
    if "--png" in arguments:
        png = arguments[arguments.index("--png") + 1]
        del arguments[arguments.index("--png"):arguments.index("--png") + 2]
    summarise(lambda out_dir: main(out_dir, png), __doc__, arguments)
