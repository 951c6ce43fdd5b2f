#!/usr/bin/env python3
"""Converts the Planetoid pickles of a citation graph (Yang, Cohen & Salakhutdinov 2016; the files
Kipf & Welling's GCN and DIFFormer read) into structdiff's plain-text node-dataset directory.

    .venv/bin/pip install scipy   # the pickles hold scipy sparse matrices
    .venv/bin/python scripts/convert_planetoid.py SOURCE_DATA_DIR NAME TARGET_DIR

SOURCE_DATA_DIR holds ind.NAME.{x,y,tx,ty,allx,ally,graph,test.index} (github:kimiyoung/planetoid,
folder data/). TARGET_DIR receives, in the order of the nodes the way PyTorch Geometric's
Planetoid dataset and the GCN code number them (allx's nodes, then the test nodes sorted by
index):
  features.txt.gz   one line per node, its bag-of-words features (0/1 as written)
  labels.txt        one line per node, its class index
  edges.txt         one line per undirected edge "a b" with a < b, duplicates and self edges removed
Citeseer's test index skips 15 isolated nodes; they are kept with zero features and class 0, as
both of those codes do (3,327 nodes).
"""
import gzip
import pickle
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp


def load(source, name, part):
    with open(source / f"ind.{name}.{part}", "rb") as f:
        return pickle.load(f, encoding="latin1")


def main(source, name, target):
    source, target = Path(source), Path(target)
    x, y, tx, ty, allx, ally, graph = (load(source, name, p)
                                        for p in ("x", "y", "tx", "ty", "allx", "ally", "graph"))
    test_index = [int(line) for line in (source / f"ind.{name}.test.index").read_text().split()]
    test_sorted = np.sort(test_index)
    if name == "citeseer":
        full = range(test_sorted.min(), test_sorted.max() + 1)
        tx_ext = sp.lil_matrix((len(full), tx.shape[1]))
        tx_ext[test_sorted - test_sorted.min(), :] = tx
        tx = tx_ext
        ty_ext = np.zeros((len(full), ty.shape[1]))
        ty_ext[test_sorted - test_sorted.min(), :] = ty
        ty = ty_ext
    features = sp.vstack((allx, tx)).tolil()
    features[test_index, :] = features[test_sorted, :]
    onehot = np.vstack((ally, ty))
    onehot[test_index, :] = onehot[test_sorted, :]
    labels = onehot.argmax(1)
    n = features.shape[0]

    edges = set()
    for a, neighbours in graph.items():
        for b in neighbours:
            if a != b and a < n and b < n:
                edges.add((min(a, b), max(a, b)))

    target.mkdir(parents=True, exist_ok=True)
    dense = features.toarray()
    # mtime=0: the same bytes on every run.
    with open(target / "features.txt.gz", "wb") as raw:
        with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, compresslevel=9) as f:
            for row in dense:
                f.write((" ".join("%g" % v for v in row) + "\n").encode())
    (target / "labels.txt").write_text("".join(f"{c}\n" for c in labels))
    (target / "edges.txt").write_text("".join(f"{a} {b}\n" for a, b in sorted(edges)))
    print(f"{name}: {n} nodes, {dense.shape[1]} features, {labels.max() + 1} classes, "
          f"{len(edges)} undirected edges")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
