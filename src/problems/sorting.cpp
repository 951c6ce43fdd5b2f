// Sorting as a GSDM problem (paper §4, Fig. 8a): given a list u, a permutation matrix P and the
// sorted list s, with the products C_ij = P_ij u_j as intermediate variables (s_i = sum_j C_ij).
#include <cmath>
#include <numeric>
#include <random>

#include <torch/torch.h>

#include "problems/entries.h"

namespace structdiff::gsdm::entries {
namespace {

using graph::Element;
using graph::VariableType;

graph::GraphicalModel sorting_graph(const ProblemOptions& options) {
  const int64_t n = options.size.at(0);
  graph::GraphicalModel model;
  // Node order u, P, C, s: the spec note's masks (and its non-symmetrised example) assume it.
  model.add_array("u", {n}, VariableType::continuous);
  model.add_array("P", {n, n}, VariableType::discrete, 2);
  if (options.intermediates) model.add_array("C", {n, n}, VariableType::continuous);
  model.add_array("s", {n}, VariableType::continuous);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      if (options.intermediates) {
        model.add_edge({"u", {j}}, {"C", {i, j}});
        model.add_edge({"P", {i, j}}, {"C", {i, j}});
        model.add_edge({"C", {i, j}}, {"s", {i}});
      } else {
        model.add_edge({"u", {j}}, {"s", {i}});
        model.add_edge({"P", {i, j}}, {"s", {i}});
      }
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    std::vector<Element> row, column;
    for (int64_t j = 0; j < n; ++j) {
      row.push_back({"P", {i, j}});
      column.push_back({"P", {j, i}});
    }
    model.add_factor(row);
    model.add_factor(column);
  }
  // s is sorted: neighbours constrain each other; the variants state it as one factor over all
  // of s, or not at all (a misspecified model).
  if (options.variant.empty()) {
    for (int64_t i = 0; i + 1 < n; ++i) model.add_factor({{"s", {i}}, {"s", {i + 1}}});
  } else if (options.variant == "s-fully-connected") {
    std::vector<Element> all;
    for (int64_t i = 0; i < n; ++i) all.push_back({"s", {i}});
    model.add_factor(all);
  }
  // EE: one embedding for all of u, of P and of C (permuting j jointly in u_j, P_.j, C_.j keeps
  // the mask); each s_i its own (s is ordered).
  std::vector<Element> u_group, p_group, c_group;
  for (int64_t i = 0; i < n; ++i) {
    u_group.push_back({"u", {i}});
    for (int64_t j = 0; j < n; ++j) {
      p_group.push_back({"P", {i, j}});
      c_group.push_back({"C", {i, j}});
    }
  }
  model.add_embedding_group(u_group);
  model.add_embedding_group(p_group);
  if (options.intermediates) model.add_embedding_group(c_group);
  for (int64_t i = 0; i < n; ++i) model.add_embedding_group({{"s", {i}}});
  return model;
}

// Node values (count, nodes): u ~ N(0, 1)^n, P[i, argsort(u)_i] = 1, s = sorted u, C = P u^T.
TrainingBatch sorting_examples(const graph::GraphicalModel& model, const ProblemOptions& options,
                               int64_t count, std::mt19937_64& rng) {
  const int64_t n = options.size.at(0);
  std::normal_distribution<float> normal;
  torch::Tensor u = torch::empty({count, n});
  float* data = u.data_ptr<float>();
  for (int64_t k = 0; k < count * n; ++k) data[k] = normal(rng);
  const torch::Tensor order = std::get<1>(u.sort(1));
  const torch::Tensor P = torch::zeros({count, n, n}).scatter_(2, order.unsqueeze(2), 1.0);
  std::vector<torch::Tensor> values = {u, P.view({count, -1})};
  if (options.intermediates) values.push_back((P * u.unsqueeze(1)).view({count, -1}));
  values.push_back(u.gather(1, order));
  const StateLayout layout(model);
  torch::Tensor observed = torch::zeros({count, model.num_nodes()}, torch::kBool);
  observed.narrow(1, 0, n).fill_(true);
  return {encode_state(layout, model, torch::cat(values, 1)), observed};
}

nlohmann::json sorting_score(const graph::GraphicalModel& model, const ProblemOptions& options,
                             const TrainingBatch& examples, const torch::Tensor& samples) {
  const int64_t n = options.size.at(0), count = samples.size(0);
  const StateLayout layout(model);
  const torch::Tensor truth = decode_state(layout, model, examples.x0);
  const torch::Tensor sampled = decode_state(layout, model, samples);
  const int64_t p_first = model.array("P").first_node, s_first = model.array("s").first_node;
  const torch::Tensor u = truth.narrow(1, 0, n);
  const torch::Tensor sorted = truth.narrow(1, s_first, n);
  const torch::Tensor P = sampled.narrow(1, p_first, n * n).view({count, n, n});
  // pi(i) = the first j with P_ij = 1; 0 for a row without any (as the authors' code).
  const torch::Tensor weights = torch::arange(n, 0, -1, torch::kFloat);
  const torch::Tensor pi = (P * weights).argmax(2);
  const torch::Tensor picked = u.gather(1, pi);
  const torch::Tensor correct = picked.eq(sorted);
  const torch::Tensor permutation = P.sum(2).eq(1).all(1).logical_and(P.sum(1).eq(1).all(1));
  const double rmse = (picked - sorted).square().mean().sqrt().item<double>();
  const double s_rmse =
      (sampled.narrow(1, s_first, n) - sorted).square().mean().sqrt().item<double>();
  return {{"rmse", rmse},
          {"baseline_random_permutation_rmse",
           std::sqrt(2.0 * static_cast<double>(n - 1) / static_cast<double>(n))},
          {"rows_correct", correct.to(torch::kDouble).mean().item<double>()},
          {"lists_sorted", correct.all(1).to(torch::kDouble).mean().item<double>()},
          {"permutation_matrices", permutation.to(torch::kDouble).mean().item<double>()},
          {"s_rmse", s_rmse}};
}

}  // namespace

Problem sorting() {
  Problem p;
  p.name = "sorting";
  p.summary = "sort a list of N(0, 1) numbers: permutation matrix and sorted list given the list";
  p.size_help = "list length";
  p.default_size = {5};
  p.min_size = {2};
  p.max_size = {64};
  p.has_intermediates = true;
  p.variants = {{"s-fully-connected", "one factor over all of s instead of neighbouring pairs"},
                {"unconstrained-s", "no factor on s (a misspecified model)"}};
  // Table 2: D 64, 6 blocks, 8 heads, EE, lr 2e-4, batch 16.
  p.config.dim = 64;
  p.config.blocks = 6;
  p.config.heads = 8;
  p.config.embedding = EmbeddingKind::exchangeable;
  p.learning_rate = 2e-4;
  p.batch = 16;
  p.graph = sorting_graph;
  p.make_examples = sorting_examples;
  p.score = sorting_score;
  return p;
}

}  // namespace structdiff::gsdm::entries
