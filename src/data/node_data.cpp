// Graphs over instances, semi-supervised splits and the contextual stochastic block model.
#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/datasets.h"
#include "structdiff/runtime.h"

namespace structdiff::data {
namespace {

using Edges = std::vector<std::pair<int64_t, int64_t>>;

at::Generator seeded_generator(uint64_t seed) {
  return at::make_generator<at::CPUGeneratorImpl>(seed);
}

std::vector<int64_t> to_vector(const torch::Tensor& t) {
  const torch::Tensor contiguous = t.to(torch::kLong).contiguous();
  return std::vector<int64_t>(contiguous.data_ptr<int64_t>(),
                              contiguous.data_ptr<int64_t>() + contiguous.numel());
}

torch::Tensor to_tensor(const std::vector<int64_t>& values) {
  return torch::tensor(values, torch::kLong);
}

}  // namespace

// ---- graphs ------------------------------------------------------------------------------------

double edge_homophily(const AttentionPattern& graph, const torch::Tensor& labels) {
  if (labels.dim() != 1 || labels.size(0) != graph.num_queries()) {
    throw std::invalid_argument("edge_homophily: need one label per node");
  }
  if (graph.num_entries() == 0) return 0.0;
  const std::vector<int64_t> label = to_vector(labels);
  int64_t same = 0;
  for (int64_t row = 0; row < graph.num_queries(); ++row) {
    for (int64_t e = graph.row_offsets()[row]; e < graph.row_offsets()[row + 1]; ++e) {
      same += label[row] == label[graph.col_indices()[e]];
    }
  }
  return static_cast<double>(same) / static_cast<double>(graph.num_entries());
}

AttentionPattern induced_subgraph(const AttentionPattern& graph,
                                  const std::vector<int64_t>& nodes) {
  std::vector<int64_t> position(graph.num_queries(), -1);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int64_t node = nodes[i];
    if (node < 0 || node >= graph.num_queries()) {
      throw std::invalid_argument("induced_subgraph: node " + std::to_string(node) +
                                  " out of range [0, " + std::to_string(graph.num_queries()) + ")");
    }
    if (position[node] >= 0) {
      throw std::invalid_argument("induced_subgraph: node " + std::to_string(node) + " repeated");
    }
    position[node] = static_cast<int64_t>(i);
  }
  Edges edges;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int64_t row = nodes[i];
    for (int64_t e = graph.row_offsets()[row]; e < graph.row_offsets()[row + 1]; ++e) {
      const int64_t col = position[graph.col_indices()[e]];
      if (col >= 0) edges.emplace_back(static_cast<int64_t>(i), col);
    }
  }
  return patterns::from_edges(static_cast<int64_t>(nodes.size()), edges);
}

AttentionPattern knn_graph(const torch::Tensor& features, int64_t k) {
  if (features.dim() != 2) throw std::invalid_argument("knn_graph: features must be (N, F)");
  const int64_t n = features.size(0);
  if (k < 1 || k >= n) {
    throw std::invalid_argument("knn_graph: k must be in [1, " + std::to_string(n - 1) + "], got " +
                                std::to_string(k));
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor x = features.to(torch::kFloat);
  constexpr int64_t kRowsPerChunk = 1024;  // bounds the distance block to 1024 x N
  Edges edges;
  edges.reserve(n * k);
  for (int64_t start = 0; start < n; start += kRowsPerChunk) {
    const int64_t end = std::min(n, start + kRowsPerChunk);
    torch::Tensor distances = torch::cdist(x.slice(0, start, end), x);
    distances.scatter_(1, torch::arange(start, end, torch::kLong).unsqueeze(1),
                       std::numeric_limits<float>::infinity());  // not its own neighbour
    const torch::Tensor nearest =
        std::get<1>(distances.topk(k, /*dim=*/1, /*largest=*/false)).contiguous();
    const int64_t* neighbour = nearest.data_ptr<int64_t>();
    for (int64_t row = start; row < end; ++row) {
      for (int64_t j = 0; j < k; ++j) edges.emplace_back(row, *neighbour++);
    }
  }
  patterns::EdgeOptions symmetric;
  symmetric.symmetrize = true;
  return patterns::from_edges(n, edges, symmetric);
}

// ---- splits ------------------------------------------------------------------------------------

torch::Tensor row_normalized(const torch::Tensor& features) {
  return features / features.sum(-1, /*keepdim=*/true).clamp_min(1);
}

Split class_random_split(const torch::Tensor& labels, int64_t per_class, int64_t valid,
                         int64_t test, uint64_t seed) {
  if (labels.dim() != 1) throw std::invalid_argument("class_random_split: labels must be 1-D");
  if (per_class < 1 || valid < 1 || test < 1) {
    throw std::invalid_argument("class_random_split: labelled nodes per class, validation and test "
                                "counts must be >= 1");
  }
  at::Generator generator = seeded_generator(seed);
  const torch::Tensor nodes = torch::arange(labels.size(0));
  std::vector<int64_t> train, rest;
  for (const int64_t c : to_vector(std::get<0>(torch::_unique(labels, /*sorted=*/true)))) {
    const torch::Tensor of_class = nodes.index({labels == c});
    const std::vector<int64_t> drawn =
        to_vector(of_class.index({torch::randperm(of_class.size(0), generator)}));
    if (static_cast<int64_t>(drawn.size()) < per_class) {
      throw std::invalid_argument("class_random_split: class " + std::to_string(c) + " has " +
                                  std::to_string(drawn.size()) + " nodes, fewer than " +
                                  std::to_string(per_class));
    }
    train.insert(train.end(), drawn.begin(), drawn.begin() + per_class);
    rest.insert(rest.end(), drawn.begin() + per_class, drawn.end());
  }
  const int64_t unlabelled = static_cast<int64_t>(rest.size());
  if (unlabelled < valid + test) {
    throw std::invalid_argument("class_random_split: " + std::to_string(unlabelled) +
                                " unlabelled nodes are fewer than " + std::to_string(valid) +
                                " for validation and " + std::to_string(test) + " for testing");
  }
  const torch::Tensor shuffled = torch::tensor(rest).index({torch::randperm(unlabelled, generator)});
  return {torch::tensor(train), shuffled.narrow(0, 0, valid), shuffled.narrow(0, valid, test)};
}

Split semi_supervised_split(const torch::Tensor& labels, int64_t num_classes, int64_t per_class,
                            int64_t valid, uint64_t seed, int64_t test) {
  if (labels.dim() != 1) throw std::invalid_argument("semi_supervised_split: labels must be 1-D");
  // The best epoch is chosen on the validation nodes, so there must be some.
  if (per_class < 1 || valid < 1) {
    throw std::invalid_argument("need at least 1 labelled node per class and 1 validation node, got " +
                                std::to_string(per_class) + " and " + std::to_string(valid));
  }
  const std::vector<int64_t> label = to_vector(labels);
  const int64_t n = static_cast<int64_t>(label.size());
  const std::vector<int64_t> order = to_vector(torch::randperm(n, seeded_generator(seed)));
  std::vector<int64_t> taken(num_classes, 0), train, rest;
  for (int64_t node : order) {
    const int64_t c = label[node];
    if (c < 0 || c >= num_classes) {
      throw std::invalid_argument("semi_supervised_split: label " + std::to_string(c) +
                                  " out of range [0, " + std::to_string(num_classes) + ")");
    }
    if (taken[c] < per_class) {
      ++taken[c];
      train.push_back(node);
    } else {
      rest.push_back(node);
    }
  }
  for (int64_t c = 0; c < num_classes; ++c) {
    if (taken[c] < per_class) {
      throw std::invalid_argument("semi_supervised_split: class " + std::to_string(c) + " has " +
                                  std::to_string(taken[c]) + " nodes, fewer than " +
                                  std::to_string(per_class) + " per class");
    }
  }
  if (test < 0) throw std::invalid_argument("semi_supervised_split: test count " + std::to_string(test) + " is negative");
  if (test > 0 && static_cast<int64_t>(rest.size()) < valid + test) {
    throw std::invalid_argument("semi_supervised_split: " + std::to_string(rest.size()) +
                                " unlabelled nodes are fewer than " + std::to_string(valid) +
                                " for validation and " + std::to_string(test) + " for testing");
  }
  if (static_cast<int64_t>(rest.size()) <= valid) {
    throw std::invalid_argument("semi_supervised_split: " + std::to_string(rest.size()) +
                                " unlabelled nodes leave none for testing after " +
                                std::to_string(valid) + " for validation");
  }
  Split split;
  split.train = to_tensor(train);
  split.valid = to_tensor(std::vector<int64_t>(rest.begin(), rest.begin() + valid));
  split.test = to_tensor(
      std::vector<int64_t>(rest.begin() + valid, test > 0 ? rest.begin() + valid + test : rest.end()));
  return split;
}

// ---- contextual stochastic block model ---------------------------------------------------------

NodeDataset make_csbm(const CsbmOptions& o, uint64_t seed) {
  if (o.classes < 2 || o.nodes < o.classes || o.feature_dim < 1) {
    throw std::invalid_argument("make_csbm: need classes >= 2, nodes >= classes, feature_dim >= 1");
  }
  if (!(o.homophily >= 0.0 && o.homophily <= 1.0)) {
    throw std::invalid_argument("make_csbm: homophily must be in [0, 1]");
  }
  if (!(o.average_degree >= 0.0 && o.average_degree < static_cast<double>(o.nodes))) {
    throw std::invalid_argument("make_csbm: average_degree must be in [0, nodes)");
  }
  // float32 features, int64 labels, and about 4 int64 words per directed edge while the graph
  // is built.
  require_memory(static_cast<double>(o.nodes) *
                     (4.0 * static_cast<double>(o.feature_dim) + 8.0 + 32.0 * o.average_degree),
                 "a CSBM graph of " + std::to_string(o.nodes) + " nodes");
  at::Generator generator = seeded_generator(seed);
  const int64_t n = o.nodes, classes = o.classes;
  // Node i belongs to class i mod C, so the members of class c are c, c + C, c + 2C, ...
  const torch::Tensor labels = torch::arange(n, torch::kLong).remainder(classes);
  // ||mean|| is about `feature_signal`; noise is a unit Gaussian per feature.
  const torch::Tensor means = torch::randn({classes, o.feature_dim}, generator, torch::kFloat) *
                              (o.feature_signal / std::sqrt(static_cast<double>(o.feature_dim)));
  const torch::Tensor features =
      means.index_select(0, labels) + torch::randn({n, o.feature_dim}, generator, torch::kFloat);

  const auto edge_count = static_cast<int64_t>(std::llround(n * o.average_degree / 2.0));
  auto uniform_below = [&](const torch::Tensor& bound) {  // elementwise integer in [0, bound)
    return (torch::rand({edge_count}, generator, torch::kDouble) * bound).floor().to(torch::kLong);
  };
  const torch::Tensor sources = uniform_below(torch::full({edge_count}, static_cast<double>(n)));
  const torch::Tensor same_class =
      torch::rand({edge_count}, generator, torch::kDouble) < o.homophily;
  const torch::Tensor shift = 1 + uniform_below(torch::full({edge_count}, classes - 1.0));
  const torch::Tensor target_class =
      (sources.remainder(classes) + torch::where(same_class, torch::zeros_like(shift), shift))
          .remainder(classes);
  const torch::Tensor class_size = (n - target_class + classes - 1).div(classes, "floor");
  const torch::Tensor targets =
      target_class + uniform_below(class_size.to(torch::kDouble)) * classes;

  const std::vector<int64_t> from = to_vector(sources), to = to_vector(targets);
  Edges edges;
  edges.reserve(edge_count);
  for (int64_t e = 0; e < edge_count; ++e) {
    if (from[e] != to[e]) edges.emplace_back(from[e], to[e]);  // no self edges
  }
  patterns::EdgeOptions symmetric;
  symmetric.symmetrize = true;
  return NodeDataset{"csbm", features, labels, classes, patterns::from_edges(n, edges, symmetric)};
}

}  // namespace structdiff::data
