// Binary-continuous matrix factorisation as a GSDM problem (paper Fig. 1, §4): E = A R with A
// (m x k) continuous in [0, 1], R (k x n) binary, E observed; the products C_ijl = A_il R_lj are
// the intermediate variables (E_ij = sum_l C_ijl).
#include <cmath>
#include <random>

#include <torch/torch.h>

#include "problems/entries.h"

namespace structdiff::gsdm::entries {
namespace {

using graph::VariableType;

constexpr double kOneProbability = 0.3;  // R_lj ~ Bernoulli(0.3)

struct Dims {
  int64_t m, n, k;
};
Dims dims_of(const ProblemOptions& options) {
  return {options.size.at(0), options.size.at(1), options.size.at(2)};
}

graph::GraphicalModel bcmf_graph(const ProblemOptions& options) {
  const auto [m, n, k] = dims_of(options);
  return product_graph(m, n, k, VariableType::discrete, options.intermediates);
}

TrainingBatch bcmf_examples(const graph::GraphicalModel& model, const ProblemOptions& options,
                            int64_t count, std::mt19937_64& rng) {
  const auto [m, n, k] = dims_of(options);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  torch::Tensor A = torch::empty({count, m, k}), R = torch::empty({count, k, n});
  for (float* p = A.data_ptr<float>(); p != A.data_ptr<float>() + A.numel(); ++p) *p = uniform(rng);
  for (float* p = R.data_ptr<float>(); p != R.data_ptr<float>() + R.numel(); ++p) {
    *p = uniform(rng) < kOneProbability ? 1.0f : 0.0f;
  }
  // C[b, i, j, l] = A[b, i, l] R[b, l, j]
  const torch::Tensor C = A.unsqueeze(2) * R.transpose(1, 2).unsqueeze(1);
  std::vector<torch::Tensor> values = {A.view({count, -1}), R.view({count, -1})};
  if (options.intermediates) values.push_back(C.reshape({count, -1}));
  values.push_back(torch::bmm(A, R).view({count, -1}));
  torch::Tensor observed = torch::zeros({count, model.num_nodes()}, torch::kBool);
  const graph::Array& E = model.array("E");
  if (options.variant != "unconditional") observed.narrow(1, E.first_node, E.size()).fill_(true);
  return {encode_state(StateLayout(model), model, torch::cat(values, 1)), observed};
}

nlohmann::json bcmf_score(const graph::GraphicalModel& model, const ProblemOptions& options,
                          const TrainingBatch& examples, const torch::Tensor& samples) {
  const auto [m, n, k] = dims_of(options);
  const int64_t count = samples.size(0);
  const StateLayout layout(model);
  const torch::Tensor truth = decode_state(layout, model, examples.x0);
  const torch::Tensor sampled = decode_state(layout, model, samples);
  const auto part = [&](const torch::Tensor& values, const char* name) {
    const graph::Array& a = model.array(name);
    return values.narrow(1, a.first_node, a.size());
  };
  const torch::Tensor A = part(sampled, "A").view({count, m, k});
  const torch::Tensor R = part(sampled, "R").view({count, k, n});
  // The given E, or the sampled one where nothing was given (the unconditional variant).
  const torch::Tensor E =
      torch::where(part(examples.observed, "E"), part(truth, "E"), part(sampled, "E"))
          .view({count, m, n});
  const double rmse = (torch::bmm(A, R) - E).square().mean().sqrt().item<double>();
  // Two independent prior draws of E differ by sqrt(2 k Var(A R)_ij) in RMS: Var(A_il R_lj) =
  // E[A^2] p - (E[A] p)^2 = p / 3 - (p / 2)^2.
  const double p = kOneProbability;
  const double prior = std::sqrt(2.0 * static_cast<double>(k) * (p / 3.0 - p * p / 4.0));
  return {{"rmse", rmse}, {"baseline_prior_rmse", prior}};
}

}  // namespace

graph::GraphicalModel product_graph(int64_t m, int64_t n, int64_t k, graph::VariableType r_type,
                                    bool intermediates) {
  graph::GraphicalModel model;
  model.add_array("A", {m, k}, VariableType::continuous);
  model.add_array("R", {k, n}, r_type, r_type == VariableType::discrete ? 2 : 0);
  if (intermediates) model.add_array("C", {m, n, k}, VariableType::continuous);
  model.add_array("E", {m, n}, VariableType::continuous);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t l = 0; l < k; ++l) {
        if (intermediates) {
          model.add_edge({"A", {i, l}}, {"C", {i, j, l}});
          model.add_edge({"R", {l, j}}, {"C", {i, j, l}});
          model.add_edge({"C", {i, j, l}}, {"E", {i, j}});
        } else {
          model.add_edge({"A", {i, l}}, {"E", {i, j}});
          model.add_edge({"R", {l, j}}, {"E", {i, j}});
        }
      }
    }
  }
  // EE: one embedding per array (no groups needed): permuting i, j and l jointly wherever they
  // occur is the plate structure, and keeps the mask.
  return model;
}

Problem bcmf() {
  Problem p;
  p.name = "bcmf";
  p.summary = "factorise an observed E = A R into continuous A in [0, 1] and binary R";
  p.size_help = "m,n,k: E is m x n, the rank k";
  p.default_size = {8, 8, 4};
  p.min_size = {1, 1, 1};
  p.max_size = {256, 256, 32};
  p.has_intermediates = true;
  p.variants = {{"unconditional",
                 "nothing observed: A, R, C and E sampled jointly, scored by "
                 "RMSE(E, A R) of the sample (paper Fig. 13)"}};
  // Table 2: D 64, 12 blocks, 2 heads, EE, batch 8; lr 2e-4 as the spec note's CPU row.
  p.config.dim = 64;
  p.config.blocks = 12;
  p.config.heads = 2;
  p.config.embedding = EmbeddingKind::exchangeable;
  p.learning_rate = 2e-4;
  p.batch = 8;
  p.graph = bcmf_graph;
  p.make_examples = bcmf_examples;
  p.score = bcmf_score;
  return p;
}

}  // namespace structdiff::gsdm::entries
