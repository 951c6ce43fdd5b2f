// FAVOR+ (Performer): softmax or ReLU attention through positive random features, linear in the
// number of tokens. Follows the Performer authors' code; see attention.h for the interface.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "structdiff/attention.h"
#include "structdiff/runtime.h"

namespace structdiff {
namespace {

void check_positive(const char* what, int64_t value) {
  if (value < 1) {
    throw std::invalid_argument(std::string(what) + " must be >= 1, got " + std::to_string(value));
  }
}

// One d x d block with orthonormal rows, distributed uniformly over the orthogonal group.
torch::Tensor orthogonal_block(int64_t head_dim, at::Generator& generator,
                               const torch::TensorOptions& options) {
  auto [q_factor, r_factor] = at::linalg_qr(torch::randn({head_dim, head_dim}, generator, options));
  // LAPACK chooses the signs of diag(R) from the data, which biases the rows' directions (the
  // first row's first entry is always negative). Flipping column j by sign(R_jj) makes the block
  // uniformly distributed, as the unbiased estimator needs; the Performer code omits this.
  q_factor = q_factor * torch::sign(torch::diagonal(r_factor)).unsqueeze(0);
  return q_factor.transpose(0, 1);
}

// phi(x) for the softmax kernel exp(q.k / sqrt(d)). The subtracted maxima are constants of a
// query row or of all keys of one (batch, head); they cancel in the normalisation and only keep
// exp from overflowing, so no gradient flows through them.
torch::Tensor softmax_features(const torch::Tensor& x, const torch::Tensor& projection,
                               bool is_query, double eps) {
  const auto head_dim = static_cast<double>(x.size(-1));
  const auto num_features = static_cast<double>(projection.size(0));
  const double data_normalizer = std::pow(head_dim, -0.25);
  const torch::Tensor projected = (data_normalizer * x).matmul(projection.transpose(0, 1));
  const torch::Tensor half_squared_norm =
      x.square().sum(-1, /*keepdim=*/true) * (0.5 * data_normalizer * data_normalizer);
  const torch::Tensor stabiliser = is_query ? projected.amax({-1}, /*keepdim=*/true).detach()
                                            : projected.amax({-2, -1}, /*keepdim=*/true).detach();
  return (torch::exp(projected - half_squared_norm - stabiliser) + eps) / std::sqrt(num_features);
}

// phi(x) for the ReLU kernel. ReLU is positively homogeneous, so a d^-1/4 input scale or an
// m^-1/2 feature scale would cancel between numerator and denominator; none is applied.
torch::Tensor relu_features(const torch::Tensor& x, const torch::Tensor& projection, double eps) {
  return torch::relu(x.matmul(projection.transpose(0, 1))) + eps;
}

void check_projection(const torch::Tensor& q, const torch::Tensor& projection) {
  if (!projection.defined() || projection.dim() != 2) {
    throw std::invalid_argument(
        "favor_attention: projection must be a 2-D (num_features, head_dim) tensor, got " +
        (projection.defined() ? std::to_string(projection.dim()) + "-D" : std::string("none")));
  }
  if (projection.size(0) < 1 || projection.size(1) != q.size(-1)) {
    throw std::invalid_argument(
        "favor_attention: projection has shape (" + std::to_string(projection.size(0)) + ", " +
        std::to_string(projection.size(1)) +
        "), expected (num_features >= 1, head_dim = " + std::to_string(q.size(-1)) + ")");
  }
  if (projection.scalar_type() != q.scalar_type() || projection.device() != q.device()) {
    throw std::invalid_argument(
        std::string("favor_attention: projection must have the inputs' dtype and device, got ") +
        c10::toString(projection.scalar_type()) + " on " + projection.device().str() +
        " for inputs " + c10::toString(q.scalar_type()) + " on " + q.device().str());
  }
}

}  // namespace

torch::Tensor favor_projection(int64_t num_features, int64_t head_dim, bool orthogonal,
                               at::Generator generator, torch::ScalarType dtype) {
  check_positive("favor_projection: num_features", num_features);
  check_positive("favor_projection: head_dim", head_dim);
  if (dtype != torch::kFloat && dtype != torch::kDouble) {
    throw std::invalid_argument(
        std::string("favor_projection: dtype must be float32 or float64, got ") +
        c10::toString(dtype));
  }
  // The blocks, their concatenation and the result: about three copies.
  require_memory(3.0 * static_cast<double>(num_features) * static_cast<double>(head_dim) *
                     static_cast<double>(c10::elementSize(dtype)),
                 "favor_projection of " + std::to_string(num_features) + " x " +
                     std::to_string(head_dim));
  // An undefined generator means the global default one, which lives on the CPU.
  const auto options = torch::TensorOptions().dtype(dtype).device(
      generator.defined() ? generator.device() : torch::Device(torch::kCPU));
  if (!orthogonal) return torch::randn({num_features, head_dim}, generator, options);

  const int64_t num_blocks = (num_features + head_dim - 1) / head_dim;
  std::vector<torch::Tensor> blocks;
  blocks.reserve(num_blocks);
  for (int64_t block = 0; block < num_blocks; ++block) {
    blocks.push_back(orthogonal_block(head_dim, generator, options));
  }
  const torch::Tensor directions = torch::cat(blocks).narrow(0, 0, num_features);
  // Norms of fresh Gaussian vectors make each row marginally N(0, I), as the estimator needs.
  const torch::Tensor row_norms = at::linalg_vector_norm(
      torch::randn({num_features, head_dim}, generator, options), 2, {-1}, /*keepdim=*/true);
  return directions * row_norms;
}

torch::Tensor favor_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& projection,
                              FavorKernel kernel, double eps) {
  check_qkv(q, k, v);
  check_projection(q, projection);
  if (!(eps >= 0)) {
    throw std::invalid_argument("favor_attention: eps must be >= 0, got " + std::to_string(eps));
  }
  const bool softmax = kernel == FavorKernel::softmax;
  const torch::Tensor query_features =
      softmax ? softmax_features(q, projection, true, eps) : relu_features(q, projection, eps);
  const torch::Tensor key_features =
      softmax ? softmax_features(k, projection, false, eps) : relu_features(k, projection, eps);
  // (num_features x head_dim) summaries of the keys keep the cost linear in the tokens.
  const torch::Tensor key_value_summary = key_features.transpose(-2, -1).matmul(v);
  const torch::Tensor key_feature_sum = key_features.sum(-2).unsqueeze(-1);
  return query_features.matmul(key_value_summary) / query_features.matmul(key_feature_sum);
}

int64_t default_favor_features(int64_t head_dim) {
  check_positive("default_favor_features: head_dim", head_dim);
  const auto d = static_cast<double>(head_dim);
  return std::max<int64_t>(1, std::llround(d * std::log(d)));
}

}  // namespace structdiff
