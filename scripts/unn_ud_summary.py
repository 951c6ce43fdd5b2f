#!/usr/bin/env python3
"""Table 4 of the UNN paper beside ours: reads OUT_DIR/<treebank>-k<k>.json written by
scripts/unn_ud_table4.sh and prints one markdown table per metric (test split, %), each treebank's
row from this project above the paper's (multilingual BERT; Table 4 as the spec note copies it).
The paper's modifier-list numbers come from the authors' code, which counts on packed matrices
(spec 4.5: `modlist_packed` here), so ours are shown as the paper defines the metric (set) and as
its code computes it (packed). Usage: scripts/unn_ud_summary.py OUT_DIR
OUT_DIR: the script's directory, or the same packed as a .tar.xz (the committed parsers' JSON:
docs/results/unn/ud.tar.xz, made by scripts/pack_results.py)."""
import json

from results_archive import summarise

PAPER = {  # treebank: (UAS, modifier lists, exact match), k = 1..5
    "af_afribooms": ([89.09, 88.98, 88.40, 87.77, 88.46], [74.10, 72.60, 72.90, 71.78, 72.01],
                     [37.70, 33.88, 34.43, 33.88, 32.79]),
    "en_partut": ([91.96, 91.86, 91.09, 91.99, 91.51], [79.08, 77.73, 75.20, 78.90, 79.44],
                  [48.59, 44.37, 40.14, 43.66, 44.37]),
    "hu_szeged": ([85.11, 85.77, 84.47, 85.13, 84.09], [64.13, 66.07, 64.37, 62.91, 64.13],
                  [21.13, 23.40, 24.15, 23.40, 21.51]),
    "te_mtg": ([89.72, 89.72, 90.00, 88.45, 87.75], [72.87, 72.87, 73.68, 66.80, 65.99],
               [75.69, 77.08, 79.17, 71.53, 70.14]),
}
METRICS = [("UAS", "uas", 0), ("Modifier lists (set / the authors' packed count, as Table 4)", None, 1),
           ("Exact match", "exact_match", 2)]


def cell(result, key):
    if result is None:
        return "—"
    if key is None:
        return f"{100 * result['modlist_set']:.2f} / {100 * result['modlist_packed']:.2f}"
    return f"{100 * result[key]:.2f}"


def main(out):
    results = {}
    for path in sorted(out.glob("*-k*.json")):
        treebank, k = path.stem.rsplit("-k", 1)
        results[(treebank, int(k))] = json.loads(path.read_text())
    for title, key, column in METRICS:
        print(f"\n{title}, test split (%):\n")
        print("| treebank | encoder | k=1 | k=2 | k=3 | k=4 | k=5 |")
        print("| --- | --- | --- | --- | --- | --- | --- |")
        for treebank, paper in PAPER.items():
            ours = [cell(results.get((treebank, k)), key) for k in range(1, 6)]
            print(f"| {treebank} | BiLSTM, word + char (here) | " + " | ".join(ours) + " |")
            print(f"| {treebank} | mBERT (paper) | " +
                  " | ".join(f"{v:.2f}" for v in paper[column]) + " |")
    seconds = [r["trained"]["train_seconds"] for r in results.values()]
    if seconds:
        print(f"\n{len(seconds)} parsers, {sum(seconds) / 60:.1f} min of training in all "
              f"(longest {max(seconds) / 60:.1f} min).")


if __name__ == "__main__":
    summarise(main, __doc__)
