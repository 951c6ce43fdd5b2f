#!/usr/bin/env python3
"""Markdown tables from the JSON files of scripts/difformer_experiments.sh.

Usage: scripts/difformer_summary.py OUT_DIR > summary.md

OUT_DIR: the script's directory (fashion/, csbm/, scaling.json), or one part's folder of JSON files
as committed (docs/results/difformer-fashion, -fashion-5000, -csbm), either of them also packed as
a .tar.xz (docs/results/difformer-csbm.tar.xz, made by scripts/pack_results.py).

Accuracies are test accuracy at the best validation epoch, mean ± sample std over runs (%).
On Fashion-MNIST also DIFFormer minus each baseline paired by run (same split and seed): mean ±
sample std of the differences in points, and on how many runs DIFFormer was better.
Models are listed in the script's order (MODEL_ORDER), others after them in the order their
cells were written (by name where the times are equal, as in an archive).
"""
import json
import statistics

from results_archive import summarise


MODEL_ORDER = ["mlp", "gcn", "gat", "transformer", "difformer-s", "difformer-a",
               "difformer-s+graph", "difformer-a+graph"]


def markdown_table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def load_results(directory):
    paths = sorted(directory.glob("*.json"), key=lambda path: (path.stat().st_mtime, path.name))
    return [json.loads(path.read_text()) for path in paths]


def accuracy_table(results, column_of, column_name):
    """One row per model, one column per value of column_of(result)."""
    written = list(dict.fromkeys(result["model"] for result in results))
    models = ([model for model in MODEL_ORDER if model in written] +
              [model for model in written if model not in MODEL_ORDER])
    columns = sorted({column_of(result) for result in results})
    cells = {(result["model"], column_of(result)):
             f"{100 * result['test_accuracy_mean']:.1f} ± {100 * result['test_accuracy_std']:.1f}"
             for result in results}
    rows = [[model] + [cells.get((model, column), "") for column in columns] for model in models]
    return markdown_table(["model"] + [column_name(column) for column in columns], rows)


def paired_differences_table(results):
    """DIFFormer-s/-a minus MLP, GCN and GAT per label rate, paired by run seed."""
    by_cell = {(result["model"], result["config"]["labels_per_class"]):
               {run["seed"]: run["test_accuracy"] for run in result["runs"]} for result in results}
    labels = sorted({result["config"]["labels_per_class"] for result in results})
    names = {"mlp": "MLP", "gcn": "GCN (kNN)", "gat": "GAT (kNN)",
             "difformer-s": "DIFFormer-s", "difformer-a": "DIFFormer-a"}
    rows = []
    for model in ["difformer-s", "difformer-a"]:
        for baseline in ["mlp", "gcn", "gat"]:
            cells = []
            for label in labels:
                ours, theirs = by_cell.get((model, label)), by_cell.get((baseline, label))
                seeds = sorted(set(ours or {}) & set(theirs or {}))
                if len(seeds) < 2:
                    cells.append("")
                    continue
                diffs = [100 * (ours[seed] - theirs[seed]) for seed in seeds]
                better = sum(diff > 0 for diff in diffs)
                cells.append(f"{statistics.mean(diffs):+.1f} ± {statistics.stdev(diffs):.1f} "
                             f"({better}/{len(diffs)})")
            if any(cells):
                rows.append([f"{names[model]} − {names[baseline]}"] + cells)
    return markdown_table(["difference (points)"] + [f"{label} labels/class" for label in labels],
                          rows)


def run_counts(results):
    return ", ".join(str(count) for count in sorted({len(result["runs"]) for result in results}))


def fashion_section(results):
    config = results[0]["config"]
    return "\n".join([
        "## Fashion-MNIST, low label rates (Table 4 shape)", "",
        f"Pool {results[0]['data']['pool']} images, validation {config['validation']}, "
        f"{config['layers']} layers, hidden {config['hidden']}, {config['epochs']} epochs, "
        f"lr {config['lr']:g}, weight decay {config['weight_decay']:g}, "
        f"dropout {config['dropout']:g}, value projection "
        f"{'on' if config['value_projection'] else 'off'}, "
        f"runs per cell: {run_counts(results)}.", "",
        accuracy_table(results, lambda result: result["config"]["labels_per_class"],
                       lambda labels: f"{labels} labels/class"),
        "", "DIFFormer minus each baseline, paired by run:", "",
        paired_differences_table(results),
    ])


def csbm_section(results):
    data = results[0]["data"]
    return "\n".join([
        "## CSBM, accuracy against homophily", "",
        f"{data['nodes']} nodes, {data['classes']} classes, degree {data['degree']}, "
        f"runs per cell: {run_counts(results)}.", "",
        accuracy_table(results, lambda result: result["data"]["homophily"],
                       lambda homophily: f"h={homophily:g}"),
    ])


def scaling_section(rows):
    table_rows = []
    for row in rows:
        slope = row.get("slope_from_previous")
        table_rows.append([row["kernel"], str(row["nodes"]), f"{row['ms']:.2f}",
                           f"{row['peak_mb']:.1f}", "" if slope is None else f"{slope:.2f}"])
    return "\n".join([
        "## Scaling of one DIFFormerConv layer (forward + backward)", "",
        f"dim {rows[0]['dim']}, {rows[0]['threads']} threads; slope: log-log, from the previous size.",
        "",
        markdown_table(["kernel", "nodes", "ms", "peak MB", "slope"], table_rows),
    ])


def main(out):
    sections = []
    fashion, csbm = load_results(out / "fashion"), load_results(out / "csbm")
    if not (fashion or csbm or (out / "scaling.json").exists()):  # one part's folder of JSON files
        results = load_results(out)
        fashion = [result for result in results if result.get("dataset") != "csbm"]
        csbm = [result for result in results if result.get("dataset") == "csbm"]
    if fashion:
        sections.append(fashion_section(fashion))
    if csbm:
        sections.append(csbm_section(csbm))
    scaling_path = out / "scaling.json"
    if scaling_path.exists():
        scaling = json.loads(scaling_path.read_text())
        # Files before provenance are a bare list of rows.
        sections.append(scaling_section(scaling["rows"] if isinstance(scaling, dict) else scaling))
    print("# DIFFormer experiments\n\n" + "\n\n".join(sections))


if __name__ == "__main__":
    summarise(main, __doc__)
