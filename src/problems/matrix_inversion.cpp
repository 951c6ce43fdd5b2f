// Matrix inversion as a GSDM problem (paper Appendix I): the factorisation graph with R
// continuous, A and R ~ N(0, 1) elementwise, E = A R; A and E observed. Trained on that
// distribution, tested with E = I, where the sampled R should be A^-1.
#include <cmath>
#include <random>

#include <torch/torch.h>

#include "problems/entries.h"

namespace structdiff::gsdm::entries {
namespace {

using graph::VariableType;

graph::GraphicalModel inversion_graph(const ProblemOptions& options) {
  const int64_t n = options.size.at(0);
  return product_graph(n, n, n, VariableType::continuous, options.intermediates);
}

// States from A, R and E = A R (count, n, n); C follows; A and E observed.
TrainingBatch examples_of(const graph::GraphicalModel& model, const ProblemOptions& options,
                          const torch::Tensor& A, const torch::Tensor& R, const torch::Tensor& E) {
  const int64_t count = A.size(0);
  std::vector<torch::Tensor> values = {A.reshape({count, -1}), R.reshape({count, -1})};
  if (options.intermediates) {
    values.push_back((A.unsqueeze(2) * R.transpose(1, 2).unsqueeze(1)).reshape({count, -1}));
  }
  values.push_back(E.reshape({count, -1}));
  torch::Tensor observed = torch::zeros({count, model.num_nodes()}, torch::kBool);
  for (const char* name : {"A", "E"}) {
    const graph::Array& a = model.array(name);
    observed.narrow(1, a.first_node, a.size()).fill_(true);
  }
  return {encode_state(StateLayout(model), model, torch::cat(values, 1)), observed};
}

torch::Tensor normal_matrices(int64_t count, int64_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  torch::Tensor m = torch::empty({count, n, n});
  for (float* p = m.data_ptr<float>(); p != m.data_ptr<float>() + m.numel(); ++p) *p = normal(rng);
  return m;
}

TrainingBatch training_examples(const graph::GraphicalModel& model, const ProblemOptions& options,
                                int64_t count, std::mt19937_64& rng) {
  const int64_t n = options.size.at(0);
  const torch::Tensor A = normal_matrices(count, n, rng);
  const torch::Tensor R = normal_matrices(count, n, rng);
  return examples_of(model, options, A, R, torch::bmm(A, R));
}

// E = I: R is A^-1 (computed in float64; a singular draw, which has probability 0, is redrawn).
TrainingBatch inversion_examples(const graph::GraphicalModel& model, const ProblemOptions& options,
                                 int64_t count, std::mt19937_64& rng) {
  const int64_t n = options.size.at(0);
  torch::Tensor A = normal_matrices(count, n, rng);
  torch::Tensor determinant = torch::linalg_det(A.to(torch::kDouble)).abs();
  while (determinant.lt(1e-9).any().item<bool>()) {
    const torch::Tensor redraw = determinant.lt(1e-9).nonzero().squeeze(1);
    A.index_copy_(0, redraw, normal_matrices(redraw.numel(), n, rng));
    determinant = torch::linalg_det(A.to(torch::kDouble)).abs();
  }
  const torch::Tensor inverse = torch::linalg_inv(A.to(torch::kDouble)).to(torch::kFloat);
  return examples_of(model, options, A, inverse, torch::eye(n).expand({count, n, n}));
}

// The lower middle value for an even count (torch.median); NaN for none.
double median_of(const torch::Tensor& values) {
  return values.numel() == 0 ? std::nan("") : values.median().item<double>();
}

// Per-example RMSEs (medians: A^-1 is heavy-tailed), over all examples and over those whose true
// R has RMS entry <= 2 (the spec note's well-conditioned subset when E = I).
nlohmann::json inversion_score(const graph::GraphicalModel& model, const ProblemOptions& options,
                               const TrainingBatch& examples, const torch::Tensor& samples) {
  const int64_t n = options.size.at(0), count = samples.size(0);
  const StateLayout layout(model);
  const torch::Tensor truth = decode_state(layout, model, examples.x0);
  const torch::Tensor sampled = decode_state(layout, model, samples);
  const auto part = [&](const torch::Tensor& values, const char* name) {
    const graph::Array& a = model.array(name);
    return values.narrow(1, a.first_node, a.size()).reshape({count, n, n});
  };
  const torch::Tensor A = part(truth, "A"), E = part(truth, "E"), R = part(truth, "R");
  const torch::Tensor R_hat = part(sampled, "R");
  const auto rms = [](const torch::Tensor& x) { return x.square().mean({1, 2}).sqrt(); };
  const torch::Tensor product_error = rms(torch::bmm(A, R_hat) - E);
  const torch::Tensor r_error = rms(R_hat - R);
  const torch::Tensor conditioned = rms(R).le(2.0).nonzero().squeeze(1);
  return {
      {"median_rmse_AR_E", median_of(product_error)},
      {"median_rmse_R", median_of(r_error)},
      {"well_conditioned_fraction",
       static_cast<double>(conditioned.numel()) / static_cast<double>(count)},
      {"well_conditioned_median_rmse_AR_E", median_of(product_error.index_select(0, conditioned))},
      {"well_conditioned_median_rmse_R", median_of(r_error.index_select(0, conditioned))},
      {"baseline_zero_median_rmse_AR_E", median_of(rms(E))}};
}

}  // namespace

Problem matrix_inversion() {
  Problem p;
  p.name = "matrix-inversion";
  p.summary = "given A and E = A R, sample R; tested with E = I, where R is A's inverse";
  p.size_help = "n: A, R and E are n x n";
  p.default_size = {5};
  p.min_size = {2};
  p.max_size = {16};
  p.has_intermediates = true;
  // The spec note's CPU row: D 128, 8 blocks, 8 heads, AE, batch 16, lr 2e-4.
  p.config.dim = 128;
  p.config.blocks = 8;
  p.config.heads = 8;
  p.config.embedding = EmbeddingKind::array;
  p.learning_rate = 2e-4;
  p.batch = 16;
  p.graph = inversion_graph;
  p.make_examples = training_examples;
  p.make_test_examples = inversion_examples;
  p.score = inversion_score;
  return p;
}

}  // namespace structdiff::gsdm::entries
