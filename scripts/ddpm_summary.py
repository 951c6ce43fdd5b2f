#!/usr/bin/env python3
"""Markdown tables from scripts/ddpm_experiments.sh output and `bench ddpm --json`.

Usage: scripts/ddpm_summary.py quality OUT_DIR      (one row per dataset and attention)
       scripts/ddpm_summary.py bench BENCH.json      (steps/s and peak MB against batch)
OUT_DIR may also be the same packed as a .tar.xz (scripts/pack_results.py).
"""
import json
import pathlib
import sys
import tempfile

from results_archive import unpacked


def last_validation(log_path):
    """(steps, valid_loss) of the last validation record in a training JSONL log."""
    steps, loss = None, None
    for line in pathlib.Path(log_path).read_text().splitlines():
        record = json.loads(line)
        if "valid_loss" in record:
            steps, loss = record["step"], record["valid_loss"]
    return steps, loss


def quality(out_dir):
    with tempfile.TemporaryDirectory() as scratch:
        quality_of(unpacked(out_dir, scratch))


def quality_of(out_dir):
    print("| dataset | attention | training steps in the time | held-out loss | Fréchet distance "
          "(floor) | classes: total variation from uniform | sampling s / image |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for dataset_dir in sorted(pathlib.Path(out_dir).iterdir()):
        if not dataset_dir.is_dir():
            continue
        for result_path in sorted(dataset_dir.glob("*.json")):
            r = json.loads(result_path.read_text())
            _, loss = last_validation(result_path.with_suffix(".log"))
            print(f"| {r['dataset']} | {r['attention']} | {r['trained_steps']} | {loss:.4f} | "
                  f"{r['frechet_distance']:.2f} ({r['frechet_floor_train_vs_test']:.2f}) | "
                  f"{r['class_total_variation']:.3f} | {r['sampling_seconds'] / r['samples']:.3f} |")


def bench(json_path):
    rows = json.loads(pathlib.Path(json_path).read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows  # files before provenance: a bare list
    labels = list(dict.fromkeys(row["label"] for row in rows))
    batches = sorted({row["batch"] for row in rows})
    for metric, title in (("steps_per_second", "training steps/s"), ("peak_mb", "peak MB")):
        print(f"\n{title}:\n")
        print("| attention | " + " | ".join(f"batch {b}" for b in batches) + " |")
        print("| --- |" + " ---: |" * len(batches))
        for label in labels:
            cells = []
            for b in batches:
                row = next((r for r in rows if r["label"] == label and r["batch"] == b), None)
                if row is None:
                    cells.append("")
                elif "skipped" in row:
                    cells.append(f"skipped ({row['projected_gb']:.0f} GB)")
                else:
                    cells.append(f"{row[metric]:.3g}" if metric == "steps_per_second" else f"{row[metric]:.0f}")
            print(f"| {label} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("quality", "bench"):
        sys.exit(__doc__)
    (quality if sys.argv[1] == "quality" else bench)(sys.argv[2])
