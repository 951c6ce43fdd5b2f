#!/usr/bin/env python3
"""A markdown table of the runs in an OUT_DIR of scripts/unn_experiments.sh (or any folder of
`unn train` runs laid out the same way: CELL-sSEED/{train.txt,eval.json[,generate.json]}).

Usage: scripts/unn_summary.py OUT_DIR > summary.md
OUT_DIR may also be such a folder packed as a .tar.xz (scripts/pack_results.py).

Per run: test accuracy from `unn eval`, the best development accuracy and its step, steps and
wall time (the training's last line), prototypes the classifier labels correctly (conv UNN
only), and the share of block updates that lowered or kept the float64 energy in each direction.
Where a cell has several seeds, a line per cell adds the mean and sample std of test accuracy.
"""
import json
import re
import statistics

from results_archive import summarise

RUN_NAME = re.compile(r"^(.+)-s(\d+)$")
LAST_LINE = re.compile(r"best development accuracy ([\d.]+)% at step (\d+); "
                       r"test accuracy ([\d.]+)%; (\d+) steps in (\S+)")


def training_line(path):
    matches = LAST_LINE.findall(path.read_text(errors="replace")) if path.exists() else []
    return matches[-1] if matches else None


def share(energy, direction):
    value = energy.get(direction, {}).get("non_increasing_share")
    return "—" if value is None else f"{100 * value:.0f} %"


def main(root):
    rows, by_cell = [], {}
    for run in sorted(p for p in root.iterdir() if (p / "eval.json").exists()):
        named = RUN_NAME.match(run.name)
        if named is None:
            continue
        cell, seed = named.groups()
        evaluation = json.loads((run / "eval.json").read_text())
        accuracy = 100 * evaluation["accuracy"]
        by_cell.setdefault(cell, []).append(accuracy)
        line = training_line(run / "train.txt")
        dev, steps, wall = (f"{line[0]} % @ {line[1]}", line[3], line[4]) if line else ("—", "—", "—")
        generate = run / "generate.json"
        prototypes = (f"{json.loads(generate.read_text())['correct']}/10" if generate.exists() else "—")
        energy = evaluation.get("energy", {})
        rows.append([cell, seed, f"{accuracy:.2f} %", dev, steps, wall, prototypes,
                     share(energy, "classify"), share(energy, "generate")])
    header = ["cell", "seed", "test acc", "best dev", "steps", "wall", "prototypes",
              "energy kept, classify", "energy kept, generate"]
    print("| " + " | ".join(header) + " |")
    print("|" + " --- |" * len(header))
    for row in rows:
        print("| " + " | ".join(row) + " |")
    several = {cell: values for cell, values in by_cell.items() if len(values) > 1}
    for cell, values in several.items():
        print(f"\n{cell}: {statistics.mean(values):.2f} ± {statistics.stdev(values):.2f} % "
              f"over {len(values)} seeds")


if __name__ == "__main__":
    summarise(main, __doc__)
