"""structdiff's sparse attention operator against the PyTorch a user would write, in one process:
dense softmax with the pattern as a mask, and gather (each query's keys gathered to a padded
(tokens, degree) block, padding masked). Forward + backward (gradients of Q, K, V), float32, median
of repeated runs after a warm-up.

    .venv/bin/python python/bench.py [--threads 2] [--json out.json]
"""
import argparse
import json
import math
import os
import platform
import statistics
import sys
import time

import torch

# Python puts this file's folder first on the path, where the package's sources (without the
# built operator library) would shadow the built package on PYTHONPATH.
sys.path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.dirname(os.path.abspath(__file__))]
import structdiff  # noqa: E402


def dense_masked(q, k, v, mask):
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    return torch.softmax(scores.masked_fill(~mask, float("-inf")), -1) @ v


def gathered(q, k, v, index, valid):
    # index, valid: (queries, degree); K and V rows gathered per query, padding masked out.
    keys = k[:, :, index]  # (batch, heads, queries, degree, dim)
    values = v[:, :, index]
    scores = (q.unsqueeze(-2) * keys).sum(-1) / math.sqrt(q.shape[-1])
    weights = torch.softmax(scores.masked_fill(~valid, float("-inf")), -1)
    return (weights.unsqueeze(-1) * values).sum(-2)


def padded(pattern):
    offsets, cols = pattern.row_offsets[0], pattern.col_indices
    degree = int((offsets[1:] - offsets[:-1]).max())
    index = torch.zeros(pattern.num_queries, degree, dtype=torch.long)
    valid = torch.zeros(pattern.num_queries, degree, dtype=torch.bool)
    for row in range(pattern.num_queries):
        keys = cols[offsets[row]:offsets[row + 1]]
        index[row, :keys.numel()] = keys
        valid[row, :keys.numel()] = True
    return index, valid


def median_ms(step, min_runs=3, budget=2.0):
    step()  # warm-up
    times, started = [], time.perf_counter()
    while len(times) < min_runs or time.perf_counter() - started < budget:
        begin = time.perf_counter()
        step()
        times.append(1e3 * (time.perf_counter() - begin))
        if len(times) >= 50:
            break
    return statistics.median(times)


WORKLOADS = {
    "sudoku9": ("Sudoku 9x9", lambda: structdiff.Pattern.of_problem("sudoku", [9]), 16, 4, 32),
    "sudoku25": ("Sudoku 25x25", lambda: structdiff.Pattern.of_problem("sudoku", [25]), 16, 4, 32),
    "tracformer": ("Tracformer prefix encoder layer 5, T=1024, N_max=16",
                   lambda: structdiff.Pattern.tracformer_encoder(1024, 5, 16, "prefix"), 4, 9, 64),
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    parser.add_argument("--json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"python/bench.py: torch {torch.__version__}, {args.threads} threads, {platform.processor() or platform.machine()}, "
          "float32, forward + backward, median ms")
    rows = []
    for name in args.workloads:
        title, make_pattern, batch, heads, dim = WORKLOADS[name]
        pattern = make_pattern()
        n = pattern.num_queries
        q, k, v = (torch.randn(batch, heads, n, dim, requires_grad=True) for _ in range(3))
        cotangent = torch.randn(batch, heads, n, dim)
        mask = pattern.dense_mask()[0]
        index, valid = padded(pattern)
        mechanisms = {
            "structdiff.sparse_attention": lambda: structdiff.sparse_attention(q, k, v, pattern),
            "dense masked (PyTorch)": lambda: dense_masked(q, k, v, mask),
            "gather (PyTorch)": lambda: gathered(q, k, v, index, valid),
        }
        reference = dense_masked(q.double(), k.double(), v.double(), mask)
        timings = {}
        print(f"# {title}: batch {batch}, heads {heads}, head_dim {dim}, {n} tokens, "
              f"{pattern.num_entries} entries")
        for mechanism, forward in mechanisms.items():
            error = (forward().double() - reference).abs().max().item()

            def step():
                for t in (q, k, v):
                    t.grad = None
                (forward() * cotangent).sum().backward()

            timings[mechanism] = median_ms(step)
            print(f"{name:<11} {mechanism:<29} {timings[mechanism]:10.2f} ms   max|err| {error:.1e}")
            rows.append({"workload": name, "mechanism": mechanism, "ms": timings[mechanism],
                         "max_abs_error_vs_float64_dense": error, "tokens": n,
                         "entries": pattern.num_entries, "batch": batch, "heads": heads,
                         "head_dim": dim, "threads": args.threads, "torch": torch.__version__})
        ours = timings["structdiff.sparse_attention"]
        for mechanism, ms in timings.items():
            if mechanism != "structdiff.sparse_attention":
                print(f"{name:<11} structdiff is {ms / ours:.1f}x faster than {mechanism}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
