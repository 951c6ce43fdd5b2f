#include "structdiff/attention_workloads.h"

#include "structdiff/enum_names.h"
#include "structdiff/sudoku_model.h"

namespace structdiff {
namespace {

// GSDM's binary-continuous matrix factorisation graph: R (k x n), A (k x m), intermediates
// K[t, i, j] = R[t, i] A[t, j] and E[i, j] = sum_t K[t, i, j]; edges K-R, K-A, E-K (symmetrised).
AttentionPattern bcmf_pattern(int64_t k, int64_t n, int64_t m) {
  const int64_t r0 = 0, a0 = r0 + k * n, k0 = a0 + k * m, e0 = k0 + k * n * m;
  const int64_t total = e0 + n * m;
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (int64_t t = 0; t < k; ++t) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < m; ++j) {
        const int64_t node = k0 + (t * n + i) * m + j;
        edges.emplace_back(node, r0 + t * n + i);
        edges.emplace_back(node, a0 + t * m + j);
        edges.emplace_back(e0 + i * m + j, node);
      }
    }
  }
  return patterns::from_edges(total, edges, {/*symmetrize=*/true, /*self_edges=*/true});
}

}  // namespace

std::vector<std::string> attention_workload_names() {
  return {"sudoku9", "gsdm-sudoku9", "sudoku16", "sudoku25", "bcmf", "tracformer", "random",
          "full256"};
}

AttentionWorkload make_attention_workload(const std::string& name, uint64_t seed) {
  AttentionWorkload w;
  w.name = name;
  if (name == "sudoku9" || name == "sudoku16" || name == "sudoku25") {
    const int64_t n = name == "sudoku9" ? 3 : name == "sudoku16" ? 4 : 5;
    w.description = "Sudoku " + std::to_string(n * n) + "x" + std::to_string(n * n) +
                    " (row/column/block cliques + self)";
    w.batch = 16;
    w.heads = 4;
    w.head_dim = 32;
    w.patterns.push_back(sudoku::graphical_model(n).compile());
  } else if (name == "gsdm-sudoku9") {
    w.description = "Sudoku 9x9 as the GSDM reference model attends (D 128 over 8 heads)";
    w.batch = 32;
    w.heads = 8;
    w.head_dim = 16;
    w.patterns.push_back(sudoku::graphical_model(3).compile());
  } else if (name == "bcmf") {
    w.description = "GSDM BCMF graph, k=8, n=m=16 (R, A, K, E)";
    w.batch = 8;
    w.heads = 2;
    w.head_dim = 32;
    w.patterns.push_back(bcmf_pattern(8, 16, 16));
  } else if (name == "tracformer") {
    w.description = "Tracformer prefix encoder stack, T=1024, N_max=16, 10 layers";
    w.batch = 4;
    w.heads = 9;
    w.head_dim = 64;
    for (int64_t layer = 1; layer <= 10; ++layer) {
      w.patterns.push_back(
          patterns::tracformer_encoder(1024, layer, 16, patterns::Direction::prefix));
    }
  } else if (name == "random") {
    w.description = "random graph, 4096 nodes, 32 keys per row";
    w.batch = 4;
    w.heads = 4;
    w.head_dim = 32;
    w.patterns.push_back(patterns::random_per_row(4096, 4096, 32, seed));
  } else if (name == "full256") {
    w.description = "every pair of 256 tokens: a pattern with nothing to skip";
    w.batch = 16;
    w.heads = 4;
    w.head_dim = 32;
    w.patterns.push_back(patterns::full(256, 256));
  } else {
    std::string known;
    for (const auto& n : attention_workload_names()) known += (known.empty() ? "" : ", ") + n;
    throw_unknown_name("attention workload", name, known);
  }
  return w;
}

}  // namespace structdiff
