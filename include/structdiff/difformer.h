// DIFFormer (Wu et al., ICLR 2023): instance representations evolve by an energy-constrained
// diffusion over all instances. Table 1 of the paper reads MLP, GCN and GAT as the same explicit
// Euler step z' = (1 - tau) z + tau S z with another diffusivity S; here they are exactly that,
// one encoder with a choice of S, so a comparison isolates the diffusivity.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <ATen/core/Generator.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "structdiff/attention.h"
#include "structdiff/pattern.h"

namespace structdiff::difformer {

enum class Diffusivity {
  simple,           // DIFFormer-s: 1 + q~.k~ over all pairs, linear time (diffusivity_simple)
  sigmoid,          // DIFFormer-a: sigmoid(q.k) over all pairs, quadratic (diffusivity_sigmoid)
  identity,         // MLP: S = I; the layer's linear map is its only transformation
  graph,            // GCN: S = D^-1/2 (A+I) D^-1/2, applied to a linear map of the state
  graph_attention,  // GAT-like: softmax(q.k / sqrt(d)) over the edges of A+I (sparse_attention);
                    // dot-product scores, not GAT's additive ones
  full_attention,   // Transformer: softmax(q.k / sqrt(d)) over all pairs (dense_attention)
};
std::string diffusivity_name(Diffusivity diffusivity);
Diffusivity parse_diffusivity(const std::string& name);  // the names above

// The observed graph as the layers consume it, built once per (sub)graph: A + I as an attention
// pattern and its symmetric normalisation as a sparse matrix.
class GraphInput {
 public:
  // `adjacency`: square and symmetric; self edges are added here.
  explicit GraphInput(const AttentionPattern& adjacency);
  int64_t num_nodes() const { return num_nodes_; }
  const PatternBatch& with_self_loops() const { return with_self_loops_; }
  // D^-1/2 (A+I) D^-1/2, sparse COO (N, N) float32, D the degrees of A + I.
  const torch::Tensor& normalized_adjacency() const { return normalized_adjacency_; }
  // normalized_adjacency() times x (N, d), in x's dtype; differentiable in x.
  torch::Tensor propagate(const torch::Tensor& x) const;

 private:
  int64_t num_nodes_;
  PatternBatch with_self_loops_;
  torch::Tensor normalized_adjacency_;
};

struct ConvOptions {
  int64_t dim = 64;
  int64_t heads = 1;  // attention diffusivities; heads are averaged (Eq. 29)
  Diffusivity diffusivity = Diffusivity::simple;
  DiffusivityNorm simple_norm = DiffusivityNorm::per_node;
  // Attention diffusivities: V = W_V z instead of V = z (the released code's use_weight).
  // identity and graph always apply their linear map.
  bool value_projection = false;
  // Attention diffusivities: add D^-1/2 (A+I) D^-1/2 V to the propagation (Eq. 28).
  bool graph_branch = false;
  double tau = 0.5;  // step size
};

// One diffusion step (Eq. 7 state update): z' = (1 - tau) z + tau P, P the head-averaged
// propagation S V (plus the graph branch).
class DIFFormerConvImpl : public torch::nn::Module {
 public:
  explicit DIFFormerConvImpl(ConvOptions options);
  // z: (N, dim). `graph` is required when the diffusivity or the graph branch reads it.
  torch::Tensor forward(const torch::Tensor& z, const GraphInput* graph = nullptr);
  // P alone: (N, dim).
  torch::Tensor propagate(const torch::Tensor& z, const GraphInput* graph = nullptr);
  bool needs_graph() const;
  const ConvOptions& options() const { return options_; }

 private:
  ConvOptions options_;
  torch::nn::Linear query_{nullptr}, key_{nullptr}, value_{nullptr};
};
TORCH_MODULE(DIFFormerConv);

struct DIFFormerOptions {
  int64_t input_dim = 0;
  int64_t num_classes = 0;
  int64_t hidden = 64;
  int64_t layers = 2;
  int64_t heads = 1;
  Diffusivity diffusivity = Diffusivity::simple;
  DiffusivityNorm simple_norm = DiffusivityNorm::per_node;
  bool value_projection = false;
  bool use_graph = false;    // graph branch in every layer (attention diffusivities)
  bool activation = false;   // ReLU after each layer's LayerNorm (sigma' of Eq. 30)
  double tau = 0.5;
  double dropout = 0.0;
};

// As every configuration: `nlohmann::json(options)` and `j.get<DIFFormerOptions>()`.
void to_json(nlohmann::json& j, const DIFFormerOptions& options);
void from_json(const nlohmann::json& j, DIFFormerOptions& options);

// True when the model reads the observed graph: GCN, GAT, or the graph branch.
bool needs_graph(const DIFFormerOptions& options);

// The released model (Alg. 1): Linear -> LayerNorm -> ReLU -> dropout; per layer a diffusion step
// (which includes x = tau P + (1 - tau) x_prev), LayerNorm, optional ReLU, dropout; Linear to
// class logits. Without the LayerNorm the model does not train.
class DIFFormerImpl : public torch::nn::Module {
 public:
  explicit DIFFormerImpl(DIFFormerOptions options);
  // x: (N, input_dim) -> logits (N, num_classes). Dropout draws from `dropout`: training passes
  // its own generator, evaluation none.
  torch::Tensor forward(const torch::Tensor& x, const GraphInput* graph = nullptr,
                        at::Generator* dropout = nullptr);
  bool needs_graph() const { return difformer::needs_graph(options_); }
  const DIFFormerOptions& options() const { return options_; }

 private:
  DIFFormerOptions options_;
  torch::nn::Linear input_{nullptr}, output_{nullptr};
  torch::nn::LayerNorm input_norm_{nullptr};
  torch::nn::ModuleList convs_, norms_;
};
TORCH_MODULE(DIFFormer);

// Model files (train::save_checkpoint's format, kind "difformer"): the weights, the options and
// `metadata` (e.g. the dataset and accuracies). load_model rebuilds the model in eval mode and
// leaves libtorch's default generator as it was; it throws std::runtime_error naming the path
// when the file is missing, damaged or of another kind.
void save_model(const std::string& path, DIFFormer& model, const nlohmann::json& metadata);
DIFFormer load_model(const std::string& path);

// Eq. 4 for DIFFormer-s: ||Z - Z_prev||_F^2 + lambda sum_ij delta(||z_i - z_j||^2) with
// delta(s) = 2s - s^2/4. Its derivative 2 - s/2 equals 1 + z_i.z_j on unit vectors, the simple
// diffusivity, so Theorem 1 applies to a step from unit-norm states. O(N^2 d), for checks.
double simple_diffusivity_energy(const torch::Tensor& z, const torch::Tensor& z_previous,
                                 double lambda);

}  // namespace structdiff::difformer
