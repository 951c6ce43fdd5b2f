#include "structdiff/difformer.h"

#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/dropout.h"
#include "structdiff/enum_names.h"
#include "structdiff/model_file.h"
#include "structdiff/runtime.h"

namespace structdiff::difformer {

namespace {
const auto kDiffusivityNames = enum_names<Diffusivity>("diffusivity", {
    {Diffusivity::simple, "simple"},
    {Diffusivity::sigmoid, "sigmoid"},
    {Diffusivity::identity, "identity"},
    {Diffusivity::graph, "graph"},
    {Diffusivity::graph_attention, "graph-attention"},
    {Diffusivity::full_attention, "full-attention"},
});
}  // namespace

std::string diffusivity_name(Diffusivity diffusivity) { return kDiffusivityNames.name(diffusivity); }

Diffusivity parse_diffusivity(const std::string& name) { return kDiffusivityNames.parse(name); }

void to_json(nlohmann::json& j, const DIFFormerOptions& o) {
  j = {{"input_dim", o.input_dim},
       {"num_classes", o.num_classes},
       {"hidden", o.hidden},
       {"layers", o.layers},
       {"heads", o.heads},
       {"diffusivity", diffusivity_name(o.diffusivity)},
       {"simple_norm", o.simple_norm == DiffusivityNorm::per_node ? "per-node" : "global"},
       {"value_projection", o.value_projection},
       {"use_graph", o.use_graph},
       {"activation", o.activation},
       {"tau", o.tau},
       {"dropout", o.dropout}};
}

void from_json(const nlohmann::json& j, DIFFormerOptions& o) {
  o.input_dim = j.at("input_dim").get<int64_t>();
  o.num_classes = j.at("num_classes").get<int64_t>();
  o.hidden = j.at("hidden").get<int64_t>();
  o.layers = j.at("layers").get<int64_t>();
  o.heads = j.at("heads").get<int64_t>();
  o.diffusivity = parse_diffusivity(j.at("diffusivity").get<std::string>());
  const std::string norm = j.at("simple_norm").get<std::string>();
  if (norm != "per-node" && norm != "global") {
    throw std::invalid_argument("unknown simple_norm '" + norm + "' (per-node, global)");
  }
  o.simple_norm = norm == "per-node" ? DiffusivityNorm::per_node : DiffusivityNorm::global;
  o.value_projection = j.at("value_projection").get<bool>();
  o.use_graph = j.at("use_graph").get<bool>();
  o.activation = j.at("activation").get<bool>();
  o.tau = j.at("tau").get<double>();
  o.dropout = j.at("dropout").get<double>();
}

void save_model(const std::string& path, DIFFormer& model, const nlohmann::json& metadata) {
  nlohmann::json stored = metadata;
  stored["config"] = model->options();
  train::save_model_file(path, "difformer", *model, stored);
}

DIFFormer load_model(const std::string& path) {
  DIFFormer model{nullptr};
  train::load_model_file(path, "difformer", [&](const nlohmann::json& metadata) -> torch::nn::Module& {
    model = DIFFormer(metadata.at("config").get<DIFFormerOptions>());
    return *model;
  });
  return model;
}

namespace {

bool reads_graph(Diffusivity diffusivity) {
  return diffusivity == Diffusivity::graph || diffusivity == Diffusivity::graph_attention;
}

bool is_attention(Diffusivity diffusivity) {
  return diffusivity != Diffusivity::identity && diffusivity != Diffusivity::graph;
}

AttentionPattern add_self_loops(const AttentionPattern& adjacency) {
  if (adjacency.num_queries() != adjacency.num_keys() || !adjacency.is_symmetric()) {
    throw std::invalid_argument("GraphInput: the adjacency must be square and symmetric, got " +
                                std::to_string(adjacency.num_queries()) + "x" +
                                std::to_string(adjacency.num_keys()) +
                                (adjacency.is_symmetric() ? "" : ", not symmetric"));
  }
  patterns::EdgeOptions self_edges_only;
  self_edges_only.self_edges = true;
  return patterns::unite(
      {adjacency, patterns::from_edges(adjacency.num_queries(), {}, self_edges_only)});
}

// D^-1/2 (A+I) D^-1/2 from the packed CSR of A + I.
torch::Tensor symmetric_normalisation(const PatternBatch& with_self_loops) {
  const int64_t n = with_self_loops.num_queries();
  const torch::Tensor offsets = with_self_loops.row_offsets()[0];
  const torch::Tensor row_lengths = offsets.slice(0, 1) - offsets.slice(0, 0, n);
  const torch::Tensor degrees = row_lengths.to(torch::kFloat);
  const torch::Tensor rows = torch::repeat_interleave(torch::arange(n, torch::kLong), row_lengths);
  const torch::Tensor& cols = with_self_loops.col_indices();
  const torch::Tensor values =
      torch::rsqrt(degrees.index_select(0, rows) * degrees.index_select(0, cols));
  return torch::sparse_coo_tensor(torch::stack({rows, cols}), values, {n, n}).coalesce();
}

}  // namespace

GraphInput::GraphInput(const AttentionPattern& adjacency)
    : num_nodes_(adjacency.num_queries()),
      with_self_loops_(add_self_loops(adjacency)),
      normalized_adjacency_(symmetric_normalisation(with_self_loops_)) {}

torch::Tensor GraphInput::propagate(const torch::Tensor& x) const {
  if (x.dim() != 2 || x.size(0) != num_nodes_) {
    throw std::invalid_argument("GraphInput::propagate: expected (" + std::to_string(num_nodes_) +
                                ", d) features");
  }
  if (normalized_adjacency_.scalar_type() == x.scalar_type()) {
    return torch::mm(normalized_adjacency_, x);
  }
  return torch::mm(normalized_adjacency_.to(x.scalar_type()), x);
}

// ---- DIFFormerConv -----------------------------------------------------------------------------

DIFFormerConvImpl::DIFFormerConvImpl(ConvOptions options) : options_(options) {
  if (options_.dim <= 0 || options_.heads <= 0) {
    throw std::invalid_argument("DIFFormerConv: dim and heads must be positive");
  }
  if (!(options_.tau > 0.0 && options_.tau <= 1.0)) {
    throw std::invalid_argument("DIFFormerConv: tau must be in (0, 1], got " +
                                std::to_string(options_.tau));
  }
  const bool attention = is_attention(options_.diffusivity);
  if (options_.graph_branch && !attention) {
    throw std::invalid_argument(
        "DIFFormerConv: the graph branch is for attention diffusivities, not " +
        diffusivity_name(options_.diffusivity));
  }
  const int64_t d = options_.dim;
  if (attention) {
    query_ = register_module("query", torch::nn::Linear(d, d * options_.heads));
    key_ = register_module("key", torch::nn::Linear(d, d * options_.heads));
    if (options_.value_projection) {
      value_ = register_module("value", torch::nn::Linear(d, d * options_.heads));
    }
  } else {
    value_ = register_module("value", torch::nn::Linear(d, d));
  }
}

bool DIFFormerConvImpl::needs_graph() const {
  return reads_graph(options_.diffusivity) || options_.graph_branch;
}

torch::Tensor DIFFormerConvImpl::propagate(const torch::Tensor& z, const GraphInput* graph) {
  if (z.dim() != 2 || z.size(1) != options_.dim) {
    throw std::invalid_argument("DIFFormerConv: expected (nodes, " + std::to_string(options_.dim) +
                                ") states");
  }
  const int64_t n = z.size(0);
  if (needs_graph()) {
    if (graph == nullptr) {
      throw std::invalid_argument("DIFFormerConv: the " + diffusivity_name(options_.diffusivity) +
                                  (options_.graph_branch ? " diffusivity with the graph branch"
                                                         : " diffusivity") +
                                  " needs the observed graph");
    }
    if (graph->num_nodes() != n) {
      throw std::invalid_argument("DIFFormerConv: the graph has " +
                                  std::to_string(graph->num_nodes()) + " nodes, the states " +
                                  std::to_string(n));
    }
  }
  if (options_.diffusivity == Diffusivity::identity) return value_(z);
  if (options_.diffusivity == Diffusivity::graph) return graph->propagate(value_(z));

  const int64_t h = options_.heads, d = options_.dim;
  // (N, H * d) -> (1, H, N, d), the attention core's layout.
  auto split_heads = [&](const torch::Tensor& t) {
    return t.view({n, h, d}).permute({1, 0, 2}).unsqueeze(0);
  };
  const torch::Tensor q = split_heads(query_(z));
  const torch::Tensor k = split_heads(key_(z));
  const torch::Tensor v =
      value_ ? split_heads(value_(z)) : z.unsqueeze(0).unsqueeze(0).expand({1, h, n, d});
  torch::Tensor heads;
  switch (options_.diffusivity) {
    case Diffusivity::simple: heads = diffusivity_simple(q, k, v, options_.simple_norm); break;
    case Diffusivity::sigmoid: heads = diffusivity_sigmoid(q, k, v); break;
    case Diffusivity::graph_attention:
      heads = sparse_attention(q, k, v, graph->with_self_loops(), Scaling::inverse_sqrt_dim);
      break;
    case Diffusivity::full_attention:
      heads = dense_attention(q, k, v, Scaling::inverse_sqrt_dim);
      break;
    default: throw std::logic_error("DIFFormerConv: not an attention diffusivity");
  }
  torch::Tensor propagation = heads.squeeze(0).mean(0);  // heads averaged (Eq. 29)
  if (options_.graph_branch) {
    // The normalised adjacency is linear, so averaging A~ V_h over heads is A~ applied once to
    // the averaged V.
    propagation = propagation + graph->propagate(v.squeeze(0).mean(0));
  }
  return propagation;
}

torch::Tensor DIFFormerConvImpl::forward(const torch::Tensor& z, const GraphInput* graph) {
  return (1.0 - options_.tau) * z + options_.tau * propagate(z, graph);
}

// ---- DIFFormer encoder -------------------------------------------------------------------------

DIFFormerImpl::DIFFormerImpl(DIFFormerOptions options) : options_(options) {
  if (options_.input_dim <= 0 || options_.num_classes <= 0 || options_.hidden <= 0 ||
      options_.layers < 0) {
    throw std::invalid_argument(
        "DIFFormer: input_dim, num_classes and hidden must be positive, layers non-negative");
  }
  if (!(options_.dropout >= 0.0 && options_.dropout < 1.0)) {
    throw std::invalid_argument("DIFFormer: dropout must be in [0, 1)");
  }
  // Through the size gate before any weight: the input and output layers and, per layer, up to
  // three (hidden x heads hidden) projections, 4 bytes each.
  const double hidden = static_cast<double>(options_.hidden);
  require_memory(4.0 * hidden *
                     (static_cast<double>(options_.input_dim + options_.num_classes) +
                      3.0 * static_cast<double>(options_.layers * options_.heads) * hidden),
                 "a DIFFormer of hidden size " + std::to_string(options_.hidden) + ", " +
                     std::to_string(options_.layers) + " layers, heads " +
                     std::to_string(options_.heads));
  input_ = register_module("input", torch::nn::Linear(options_.input_dim, options_.hidden));
  input_norm_ = register_module(
      "input_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({options_.hidden})));
  ConvOptions conv;
  conv.dim = options_.hidden;
  conv.heads = options_.heads;
  conv.diffusivity = options_.diffusivity;
  conv.simple_norm = options_.simple_norm;
  conv.value_projection = options_.value_projection;
  conv.graph_branch = options_.use_graph;
  conv.tau = options_.tau;
  for (int64_t layer = 0; layer < options_.layers; ++layer) {
    convs_->push_back(DIFFormerConv(conv));
    norms_->push_back(torch::nn::LayerNorm(torch::nn::LayerNormOptions({options_.hidden})));
  }
  register_module("convs", convs_);
  register_module("norms", norms_);
  output_ = register_module("output", torch::nn::Linear(options_.hidden, options_.num_classes));
}

bool needs_graph(const DIFFormerOptions& options) {
  return options.layers > 0 && (reads_graph(options.diffusivity) || options.use_graph);
}

torch::Tensor DIFFormerImpl::forward(const torch::Tensor& x, const GraphInput* graph,
                                     at::Generator* dropout_generator) {
  const double p = options_.dropout;
  torch::Tensor z = dropout(torch::relu(input_norm_(input_(x))), p, dropout_generator);
  for (int64_t layer = 0; layer < options_.layers; ++layer) {
    z = convs_->ptr<DIFFormerConvImpl>(layer)->forward(z, graph);
    z = norms_->ptr<torch::nn::LayerNormImpl>(layer)->forward(z);
    if (options_.activation) z = torch::relu(z);
    z = dropout(z, p, dropout_generator);
  }
  return output_(z);
}

// ---- energy ------------------------------------------------------------------------------------

double simple_diffusivity_energy(const torch::Tensor& z, const torch::Tensor& z_previous,
                                 double lambda) {
  if (z.dim() != 2 || !z.sizes().equals(z_previous.sizes())) {
    throw std::invalid_argument("simple_diffusivity_energy: Z and Z_prev must be (N, d) alike");
  }
  torch::NoGradGuard no_grad;
  const torch::Tensor squared_distances = (z.unsqueeze(1) - z.unsqueeze(0)).pow(2).sum(-1);
  const torch::Tensor delta = 2.0 * squared_distances - squared_distances.pow(2) / 4.0;
  return ((z - z_previous).pow(2).sum() + lambda * delta.sum()).item<double>();
}

}  // namespace structdiff::difformer
