#!/usr/bin/env python3
"""Table 2 from the JSON files of scripts/difformer_citation.sh, the paper's numbers beside ours.

Usage: scripts/difformer_citation_summary.py OUT_DIR > table.md
OUT_DIR: the script's directory, or the same packed as a .tar.xz (the committed runs:
docs/results/difformer-citation/table2.tar.xz, made by scripts/pack_results.py).

A cell is DATASET-MODEL.json (DIFFormer, the authors' settings) or DATASET-MODEL-SETTING.json (a
baseline's grid). Of a baseline's settings the one with the highest mean validation accuracy is
reported; test accuracy never takes part in the choice. Accuracies: test accuracy at the
best-validation epoch, mean ± sample std over the 5 initialisations (%); s/epoch: training seconds
of a run over its epochs, mean over runs (one thread, the machine shared).
"""
import json
import statistics

from results_archive import summarise

PAPER = {  # Table 2, mean ± std over 5 initialisations
    "cora": {"mlp": "56.1 ± 1.6", "gcn": "81.5 ± 1.3", "gat": "83.0 ± 0.7",
             "difformer-s": "85.9 ± 0.4", "difformer-a": "84.1 ± 0.6"},
    "citeseer": {"mlp": "56.7 ± 1.7", "gcn": "71.9 ± 1.9", "gat": "72.5 ± 0.7",
                 "difformer-s": "73.5 ± 0.3", "difformer-a": "75.7 ± 0.3"},
}
MODELS = ["mlp", "gcn", "gat", "difformer-s", "difformer-a"]


def summary(path):
    result = json.loads(path.read_text())
    runs = result["runs"]
    return {
        "setting": path.stem,
        "valid": 100 * statistics.mean(run["valid_accuracy"] for run in runs),
        "test": [100 * run["test_accuracy"] for run in runs],
        "seconds_per_epoch": statistics.mean(run["seconds"] for run in runs)
        / result["config"]["epochs"],
    }


def main(directory):
    rows = ["| dataset | model | paper | ours | runs | chosen setting (mean validation) | s/epoch |",
            "|---|---|---:|---:|---|---|---:|"]
    for dataset, paper in PAPER.items():
        for model in MODELS:
            candidates = [summary(path) for path in sorted(directory.glob(f"{dataset}-{model}*.json"))
                          if path.stem == f"{dataset}-{model}" or
                          path.stem.startswith(f"{dataset}-{model}-")]
            if not candidates:
                rows.append(f"| {dataset} | {model} | {paper[model]} | not run | | | |")
                continue
            best = max(candidates, key=lambda cell: cell["valid"])
            test = best["test"]
            setting = best["setting"].removeprefix(f"{dataset}-{model}").lstrip("-") or "authors'"
            rows.append(
                f"| {dataset} | {model} | {paper[model]} | "
                f"{statistics.mean(test):.2f} ± {statistics.stdev(test):.2f} | "
                f"{', '.join(f'{x:.1f}' for x in test)} | {setting} ({best['valid']:.2f}; "
                f"of {len(candidates)}) | {best['seconds_per_epoch']:.3f} |")
    print("\n".join(rows))


if __name__ == "__main__":
    summarise(main, __doc__)
