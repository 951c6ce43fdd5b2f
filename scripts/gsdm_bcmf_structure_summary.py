#!/usr/bin/env python3
"""The GSDM paper's Fig. 5a starting point, from scripts/gsdm_bcmf_structure.sh: per arm the
steps it trained in its wall-clock and RMSE(E, A R) on the same fresh problems with its ratio to
the prior's.

Usage: scripts/gsdm_bcmf_structure_summary.py OUT_DIR
OUT_DIR: the script's directory (<arm>.jsonl, <arm>.eval.json), or the same packed as a .tar.xz
(docs/results/gsdm-bcmf/structure.tar.xz, made by scripts/pack_results.py)."""
import json

from results_archive import summarise

ARMS = [("structured", "structured attention, with C (GSDM)"),
        ("unstructured", "unstructured (dense) attention, with C"),
        ("without", "structured attention, without C")]


def main(out):
    print("| arm | variables | steps in its wall-clock | wall-clock (min) | s/step | "
          "RMSE(E, Â R̂) | prior | RMSE / prior | problems | "
          "sampling (s) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for arm, label in ARMS:
        log = out / f"{arm}.jsonl"
        evaluation = out / f"{arm}.eval.json"
        if not (log.exists() and evaluation.exists()):
            continue
        lines = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        steps = [line for line in lines if "loss" in line]
        last = steps[-1]
        result = json.loads(evaluation.read_text())
        metrics = result["metrics"]
        m, n, k = result["problem_options"]["size"]
        variables = m * k + k * n + m * n + (m * n * k if result["problem_options"]["intermediates"] else 0)
        print(f"| {label} | {variables:,} | {last['step']:,} | {last['seconds'] / 60:.1f} | "
              f"{last['seconds'] / last['step']:.3f} | "
              f"{metrics['rmse']:.3f} | {metrics['baseline_prior_rmse']:.3f} | "
              f"{metrics['rmse'] / metrics['baseline_prior_rmse']:.3f} | {metrics['examples']} | "
              f"{metrics['seconds']:.0f} |")


if __name__ == "__main__":
    summarise(main, __doc__)
