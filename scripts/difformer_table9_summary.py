#!/usr/bin/env python3
"""DIFFormer's Table 9 beside ours, from scripts/difformer_table9.sh: training seconds per epoch
and training memory per model on Cora (the paper's GPU numbers) and Citeseer (not in Table 9).
Ours: one CPU thread; memory is the CPU tensor memory training allocated beyond the data and the
model (peak_tensor_mb), where the paper's is a GPU process's whole footprint, so only the ratios
between models compare. Usage: scripts/difformer_table9_summary.py OUT_DIR
OUT_DIR: the script's directory, or the same packed as a .tar.xz
(docs/results/difformer-citation/table9.tar.xz, made by scripts/pack_results.py)."""
import json

from results_archive import summarise

MODELS = ["mlp", "gcn", "gat", "difformer-s", "difformer-a"]
# Table 9, Cora: (seconds per epoch, training memory MB); the MLP is not in the table.
PAPER_CORA = {"gcn": (0.0584, 1168), "gat": (0.0807, 1380), "difformer-s": (0.1438, 1350),
              "difformer-a": (0.3292, 3893)}


def main(out):
    print("| dataset | model | paper s/epoch (GPU) | ours s/epoch (1 thread) | paper memory (MB) "
          "| ours peak tensor memory (MB) | ours / DIFFormer-s: time, memory | paper: time, memory |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    for dataset in ("cora", "citeseer"):
        cells = {}
        for model in MODELS:
            path = out / f"{dataset}-{model}.json"
            if path.exists():
                result = json.loads(path.read_text())
                (run,) = result["runs"]
                cells[model] = (run["seconds"] / result["config"]["epochs"], run["peak_tensor_mb"])
        reference = cells.get("difformer-s")
        for model, (seconds, memory) in cells.items():
            paper = PAPER_CORA.get(model) if dataset == "cora" else None
            paper_ratio = "—"
            if paper and dataset == "cora":
                base = PAPER_CORA["difformer-s"]
                paper_ratio = f"{paper[0] / base[0]:.2f}, {paper[1] / base[1]:.2f}"
            ours_ratio = f"{seconds / reference[0]:.2f}, {memory / reference[1]:.2f}" if reference else "—"
            print(f"| {dataset} | {model} | {paper[0] if paper else '—'} | {seconds:.3f} | "
                  f"{paper[1] if paper else '—'} | {memory:.1f} | {ours_ratio} | {paper_ratio} |")


if __name__ == "__main__":
    summarise(main, __doc__)
