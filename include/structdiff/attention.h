// The attention family. Inputs: Q (batch, heads, queries, head_dim), K and V
// (batch, heads, keys, head_dim); float32 or float64. Output: (batch, heads, queries, head_dim).
// Every mechanism is differentiable with respect to Q, K and V.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <ATen/core/Generator.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "structdiff/pattern.h"

namespace structdiff {

enum class Scaling { inverse_sqrt_dim, none };
double scale_factor(Scaling scaling, int64_t head_dim);

// A pattern applied to a batch: one pattern shared by every batch element, or one per element.
// Packs the CSR into tensors for the kernels and caches the dense mask, the padded gather index,
// the transposed CSR and the clique tiles on first use. Each form is built on the CPU and copied once to any other
// device asked for, so a pattern follows its inputs wherever they live. Copies share that cache,
// and each entry is built once even when several threads ask for it at the same time.
class PatternBatch {
 public:
  explicit PatternBatch(const AttentionPattern& shared);
  explicit PatternBatch(const std::vector<AttentionPattern>& per_element);

  int64_t size() const { return size_; }  // 1 (shared) or the batch size
  int64_t num_queries() const { return num_queries_; }
  int64_t num_keys() const { return num_keys_; }
  int64_t max_degree() const { return max_degree_; }
  int64_t num_entries() const { return col_indices_.numel(); }  // over all patterns
  // (size, num_queries + 1) int64: offsets into col_indices(), absolute across patterns.
  const torch::Tensor& row_offsets(torch::Device device = torch::kCPU) const;
  const torch::Tensor& col_indices(torch::Device device = torch::kCPU) const;
  // (size, num_queries, num_keys) bool.
  const torch::Tensor& dense_mask(torch::Device device = torch::kCPU) const;
  // (size, num_queries, max_degree) int64 key index, padding slots point at key 0, and the
  // matching bool validity mask.
  const torch::Tensor& padded_indices(torch::Device device = torch::kCPU) const;
  const torch::Tensor& padded_valid(torch::Device device = torch::kCPU) const;
  // The transpose: (size, num_keys + 1) int64 offsets, absolute across patterns, into
  // key_queries(), the query of each entry (ascending within a key).
  const torch::Tensor& key_offsets(torch::Device device = torch::kCPU) const;
  const torch::Tensor& key_queries(torch::Device device = torch::kCPU) const;
  // For the CPU sparse kernel: a cover of one shared square pattern by dense clique tiles, packed
  // as int64 (tile_index) and uint8 (tile_owned) tensors, empty when the pattern has no tiles
  // worth computing densely (then the kernel walks neighbour lists). tiled_entries() counts the
  // entries the tiles own.
  const torch::Tensor& tile_index() const;
  const torch::Tensor& tile_owned() const;
  int64_t tiled_entries() const;

  // Throws std::invalid_argument unless the pattern fits these inputs.
  void check_compatible(const torch::Tensor& q, const torch::Tensor& k) const;

 private:
  struct Cache;  // in pattern_batch.cpp, which alone needs its once-flags (<mutex>)
  enum class Form;
  const torch::Tensor& on_device(const torch::Tensor& cpu, Form form, torch::Device device) const;
  void build_dense_mask() const;
  void build_padded() const;
  void build_transposed() const;
  void build_tiles() const;
  int64_t size_ = 0, num_queries_ = 0, num_keys_ = 0, max_degree_ = 0;
  torch::Tensor row_offsets_, col_indices_;
  std::shared_ptr<Cache> cache_;
};

// Validates shapes, dtypes and devices of Q, K, V; throws std::invalid_argument naming the problem.
void check_qkv(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v);

// Dense softmax attention, optionally restricted by a pattern. Rows with no keys give zeros.
torch::Tensor dense_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, Scaling scaling,
                              const PatternBatch* pattern = nullptr);
// The packed approach of the GSDM paper (App. C): K and V gathered to
// (batch, heads, queries, max_degree, head_dim), padding slots masked with -inf.
torch::Tensor gather_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const PatternBatch& pattern,
                               Scaling scaling);
// Fused neighbour-list softmax attention (CPU kernels for forward and backward).
torch::Tensor sparse_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, const PatternBatch& pattern,
                               Scaling scaling);

// Linear attention (Katharopoulos et al.): phi = elu + 1,
// out_i = phi(q_i)^T sum_j phi(k_j) v_j^T / (phi(q_i) . sum_j phi(k_j) + eps).
constexpr double kLinearAttentionEps = 1e-6;
torch::Tensor linear_attention(const torch::Tensor& q, const torch::Tensor& k,
                               const torch::Tensor& v, double eps = kLinearAttentionEps);

enum class FavorKernel { softmax, relu };

// Random feature matrix for FAVOR+: (num_features, head_dim). Orthogonal d x d blocks with rows
// rescaled by chi-distributed norms when orthogonal, i.i.d. Gaussian rows otherwise.
torch::Tensor favor_projection(int64_t num_features, int64_t head_dim, bool orthogonal,
                               at::Generator generator, torch::ScalarType dtype = torch::kFloat);
// FAVOR+ with a given projection; non-causal, linear in the number of tokens.
// The 1/sqrt(d) softmax temperature is part of the softmax kernel (as in the Performer).
// eps is added to every feature, keeping the normaliser away from zero.
constexpr double kFavorEps = 1e-4;
torch::Tensor favor_attention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, const torch::Tensor& projection,
                              FavorKernel kernel, double eps = kFavorEps);
int64_t default_favor_features(int64_t head_dim);  // round(d ln d)

enum class DiffusivityNorm { per_node, global };

// DIFFormer simple diffusivity 1 + q~.k~ (computed in linear time), row-normalised.
// per_node L2-normalises each q_i, k_j (the paper); global divides Q and K by their Frobenius
// norms over all nodes (the released code).
torch::Tensor diffusivity_simple(const torch::Tensor& q, const torch::Tensor& k,
                                 const torch::Tensor& v, DiffusivityNorm norm);
// DIFFormer sigmoid diffusivity sigmoid(q.k), row-normalised, optionally restricted to a pattern.
torch::Tensor diffusivity_sigmoid(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const PatternBatch* pattern = nullptr);

// ---- one interface over all mechanisms ---------------------------------------------------------

enum class Mechanism {
  dense,
  sparse,
  gather,
  favor_softmax,
  favor_relu,
  linear,
  diffusivity_simple,
  diffusivity_sigmoid,
  // The pattern's entries by the sparse kernel or by dense attention with the pattern as a mask,
  // whichever structured_uses_sparse predicts faster for the pattern.
  structured
};
Mechanism parse_mechanism(const std::string& name);  // "dense", "favor-softmax", ...
// Mechanism::structured's cost model: whether the sparse kernel is predicted faster than dense
// attention masked by `pattern` on `device`. On the CPU, calibrated with `bench attention`
// (2 threads, head dimension 32): per entry, the sparse kernel costs up to 1.6x what dense
// attention costs per pair (full256: 90.7 against 57.5 ms; the Sudoku and random workloads
// 0.3-1.5x), so it pays below a density of 0.6. On a GPU, not calibrated: the sparse kernel.
bool structured_uses_sparse(const PatternBatch& pattern, torch::Device device);
std::string mechanism_name(Mechanism mechanism);
std::vector<std::string> mechanism_names();

struct MechanismArguments;  // structdiff/mechanism_registry.h

struct AttentionConfig {
  Mechanism mechanism = Mechanism::sparse;
  int64_t head_dim = 0;
  Scaling scaling = Scaling::inverse_sqrt_dim;  // dense, sparse, gather
  int64_t num_features = 0;                     // FAVOR+: 0 means default_favor_features
  bool orthogonal_features = true;              // FAVOR+
  int64_t redraw_interval = 0;                  // FAVOR+: redraw every N training calls; 0 never
  double eps = 0.0;                             // 0 means the mechanism's default
  DiffusivityNorm diffusivity_norm = DiffusivityNorm::per_node;
  uint64_t seed = 0;                            // FAVOR+ feature draws
};

class AttentionImpl : public torch::nn::Module {
 public:
  explicit AttentionImpl(AttentionConfig config);
  // `pattern` restricts dense, gather, sparse and sigmoid diffusivity (required for the
  // latter three's structured use: gather and sparse throw without one); the linear-time
  // mechanisms throw if given a pattern.
  torch::Tensor forward(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                        const PatternBatch* pattern = nullptr);
  const AttentionConfig& config() const { return config_; }
  // FAVOR+: draws a fresh projection now.
  void redraw_features();
  // What forward hands the mechanism besides Q, K and V (FAVOR+'s features in their stored
  // dtype), so that the mechanism's reference can be run on the same terms.
  MechanismArguments arguments(const PatternBatch* pattern) const;
  int64_t calls_since_redraw() const {
    return calls_since_redraw_.defined() ? calls_since_redraw_.item<int64_t>() : 0;
  }

 private:
  AttentionConfig config_;
  // FAVOR+ only, all buffers so that checkpoints carry them and a resumed run redraws exactly
  // as an uninterrupted one: the projection, the redraw generator's state, the call counter.
  torch::Tensor projection_, generator_state_, calls_since_redraw_;
};
TORCH_MODULE(Attention);

}  // namespace structdiff
