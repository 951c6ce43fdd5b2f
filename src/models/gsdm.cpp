#include "structdiff/gsdm.h"

#include <cmath>
#include <map>
#include <numeric>
#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/device.h"
#include "structdiff/enum_names.h"
#include "structdiff/random.h"
#include "structdiff/runtime.h"
#include "structdiff/sinusoidal.h"

namespace structdiff::gsdm {

// ---- configuration -----------------------------------------------------------------------------

namespace {
const auto kEmbeddingNames = enum_names<EmbeddingKind>("embedding", {
    {EmbeddingKind::independent, "IE"},
    {EmbeddingKind::array, "AE"},
    {EmbeddingKind::exchangeable, "EE"},
});
const auto kNormNames = enum_names<NormKind>("norm", {
    {NormKind::token, "token"},
    {NormKind::group, "group"},
});
const auto kScalingNames = enum_names<Scaling>("attention scaling", {
    {Scaling::inverse_sqrt_dim, "inverse-sqrt-dim"},
    {Scaling::none, "none"},
});
const auto kProcessNames = enum_names<DiffusionProcess>("diffusion process", {
    {DiffusionProcess::gaussian, "gaussian"},
    {DiffusionProcess::masked, "masked"},
});
const auto kLossNames = enum_names<MaskedLoss>("masked loss", {
    {MaskedLoss::elbo, "elbo"},
    {MaskedLoss::unweighted, "unweighted"},
});
}  // namespace

EmbeddingKind parse_embedding(const std::string& name) { return kEmbeddingNames.parse(name); }

std::vector<std::string> embedding_names() { return kEmbeddingNames.choices(); }

NormKind parse_norm(const std::string& name) { return kNormNames.parse(name); }

std::vector<std::string> norm_names() { return kNormNames.choices(); }

Scaling parse_attention_scaling(const std::string& name) { return kScalingNames.parse(name); }

std::vector<std::string> attention_scaling_names() { return kScalingNames.choices(); }

std::string attention_scaling_name(Scaling scaling) { return kScalingNames.name(scaling); }

DiffusionProcess parse_process(const std::string& name) { return kProcessNames.parse(name); }

std::vector<std::string> process_names() { return kProcessNames.choices(); }

std::string process_name(DiffusionProcess process) { return kProcessNames.name(process); }

MaskedLoss parse_masked_loss(const std::string& name) { return kLossNames.parse(name); }

std::vector<std::string> masked_loss_names() { return kLossNames.choices(); }

std::string masked_loss_name(MaskedLoss loss) { return kLossNames.name(loss); }

void to_json(nlohmann::json& j, const GsdmConfig& c) {
  j = {{"dim", c.dim},
       {"blocks", c.blocks},
       {"heads", c.heads},
       {"embedding", kEmbeddingNames.name(c.embedding)},
       {"norm", kNormNames.name(c.norm)},
       {"attention_scaling", attention_scaling_name(c.attention_scaling)},
       {"output_norm", c.output_norm},
       {"time_swish", c.time_swish},
       {"observed_embedding_init", c.observed_embedding_init},
       {"attention", mechanism_name(c.attention)},
       {"mask", graph::mask_rule_name(c.mask.rule)},
       {"mask_seed", c.mask.seed},
       {"process", process_name(c.process)}};
  if (c.process == DiffusionProcess::masked) {
    j["mask_schedule"] = diffusion::mask_schedule_name(c.mask_schedule);
    j["masked_loss"] = masked_loss_name(c.masked_loss);
  }
}

void from_json(const nlohmann::json& j, GsdmConfig& c) {
  c.dim = j.at("dim").get<int64_t>();
  c.blocks = j.at("blocks").get<int64_t>();
  c.heads = j.at("heads").get<int64_t>();
  c.embedding = parse_embedding(j.at("embedding").get<std::string>());
  c.norm = parse_norm(j.at("norm").get<std::string>());
  // Model files written before these switches have the project's defaults.
  c.attention_scaling =
      parse_attention_scaling(j.value("attention_scaling", std::string("inverse-sqrt-dim")));
  c.output_norm = j.value("output_norm", true);
  c.time_swish = j.value("time_swish", false);
  c.observed_embedding_init = j.value("observed_embedding_init", 0.02);
  c.attention = parse_mechanism(j.at("attention").get<std::string>());
  // Model files written before the mask ablations have the standard mask.
  c.mask.rule = graph::parse_mask_rule(j.value("mask", std::string("standard")));
  c.mask.seed = j.value("mask_seed", uint64_t{1});
  // Model files written before the masked process are Gaussian.
  c.process = parse_process(j.value("process", std::string("gaussian")));
  c.mask_schedule = diffusion::parse_mask_schedule(j.value("mask_schedule", std::string("cosine")));
  c.masked_loss = parse_masked_loss(j.value("masked_loss", std::string("elbo")));
}

// ---- state layout ------------------------------------------------------------------------------

StateLayout::StateLayout(const graph::GraphicalModel& model) {
  std::vector<int64_t> owner;
  for (const graph::Array& a : model.arrays()) {
    for (int64_t i = 0; i < a.size(); ++i) {
      node_offset.push_back(width);
      node_width.push_back(a.width());
      for (int64_t k = 0; k < a.width(); ++k) owner.push_back(a.first_node + i);
      width += a.width();
    }
  }
  entry_to_node = torch::tensor(owner, torch::kLong);
}

torch::Tensor StateLayout::expand_node_mask(const torch::Tensor& node_mask) const {
  return node_mask.index_select(1, entry_to_node.device() == node_mask.device()
                                       ? entry_to_node
                                       : entry_to_node.to(node_mask.device()));
}

// ---- building blocks ---------------------------------------------------------------------------

// LayerNorm per token (no information crosses the graph), or the reference's GroupNorm whose
// statistics run over all tokens.
class TokenNormImpl : public torch::nn::Module {
 public:
  TokenNormImpl(NormKind kind, int64_t dim) : kind_(kind) {
    if (kind == NormKind::token) {
      layer_ = register_module("layer_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({dim})));
    } else {
      const int64_t groups = std::gcd(dim, int64_t{32});
      group_ = register_module("group_norm", torch::nn::GroupNorm(groups, dim));
    }
  }
  torch::Tensor forward(const torch::Tensor& h) {  // (batch, nodes, dim)
    if (kind_ == NormKind::token) return layer_(h);
    return group_(h.transpose(1, 2)).transpose(1, 2);
  }

 private:
  NormKind kind_;
  torch::nn::LayerNorm layer_{nullptr};
  torch::nn::GroupNorm group_{nullptr};
};

// norm -> swish -> linear, + time projection, + node-embedding projection,
// norm -> swish -> linear, residual.
class ResBlockImpl : public torch::nn::Module {
 public:
  ResBlockImpl(int64_t dim, NormKind norm)
      : norm1_(register_module("norm1", std::make_shared<TokenNormImpl>(norm, dim))),
        norm2_(register_module("norm2", std::make_shared<TokenNormImpl>(norm, dim))),
        linear1_(register_module("linear1", torch::nn::Linear(dim, dim))),
        linear2_(register_module("linear2", torch::nn::Linear(dim, dim))),
        time_proj_(register_module("time_proj", torch::nn::Linear(dim, dim))),
        node_proj_(register_module("node_proj", torch::nn::Linear(dim, dim))) {}

  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& time_embedding,
                        const torch::Tensor& node_embedding) {
    torch::Tensor a = linear1_(torch::silu(norm1_->forward(h))) +
                      time_proj_(time_embedding).unsqueeze(1) +
                      node_proj_(node_embedding).unsqueeze(0);
    return h + linear2_(torch::silu(norm2_->forward(a)));
  }

 private:
  std::shared_ptr<TokenNormImpl> norm1_, norm2_;
  torch::nn::Linear linear1_, linear2_, time_proj_, node_proj_;
};

// norm -> q, k, v -> (structured) attention -> output projection -> residual.
class AttentionBlockImpl : public torch::nn::Module {
 public:
  AttentionBlockImpl(int64_t dim, int64_t heads, NormKind norm, Mechanism mechanism,
                     Scaling scaling)
      : heads_(heads),
        norm_(register_module("norm", std::make_shared<TokenNormImpl>(norm, dim))),
        qkv_(register_module("qkv", torch::nn::Linear(dim, 3 * dim))),
        out_(register_module("out", torch::nn::Linear(dim, dim))) {
    AttentionConfig config;
    config.mechanism = mechanism;
    config.head_dim = dim / heads;
    config.scaling = scaling;
    attention_ = register_module("attention", Attention(config));
  }

  torch::Tensor forward(const torch::Tensor& h, const PatternBatch* pattern) {
    const int64_t batch = h.size(0), nodes = h.size(1), dim = h.size(2);
    // (batch, nodes, 3, heads, head_dim) viewed as three (batch, heads, nodes, head_dim) tensors
    // without copies: the kernels take strided rows. unbind, not three selects: its backward
    // stacks the three gradients once, where each select's backward zero-fills a whole qkv-sized
    // tensor and autograd adds the three (a fifth of the training step at Sudoku 9x9).
    const std::vector<torch::Tensor> qkv =
        qkv_(norm_->forward(h)).view({batch, nodes, 3, heads_, dim / heads_}).unbind(2);
    torch::Tensor attended = attention_->forward(qkv[0].transpose(1, 2), qkv[1].transpose(1, 2),
                                                 qkv[2].transpose(1, 2), pattern);
    return h + out_(attended.transpose(1, 2).reshape({batch, nodes, dim}));
  }

 private:
  int64_t heads_;
  std::shared_ptr<TokenNormImpl> norm_;
  torch::nn::Linear qkv_, out_;
  Attention attention_{nullptr};
};

// ---- the model ---------------------------------------------------------------------------------

GsdmStructure::GsdmStructure(const graph::GraphicalModel& model, const graph::MaskOptions& mask,
                             bool needs_pattern)
    : layout(model), num_nodes(model.num_nodes()), pattern(model.compile(mask)) {
  if (num_nodes == 0) throw std::invalid_argument("GSDM: the graphical model has no variables");
  if (needs_pattern) pattern_batch = std::make_unique<PatternBatch>(pattern);
}

void GsdmStructure::move_to(torch::Device target) {
  if (target == device) return;
  layout.entry_to_node = layout.entry_to_node.to(target);
  for (ArityGroup& group : groups) {
    group.nodes = group.nodes.to(target);
    group.entries = group.entries.to(target);
  }
  // The home structure's two tensors are the model's buffers too: moving them in place keeps
  // them so (.to() on a tensor already there returns it unchanged).
  embedding_index.set_data(embedding_index.to(target));
  sinusoidal_codes.set_data(sinusoidal_codes.to(target));
  device = target;
}

int64_t GsdmImpl::assign_embeddings(const graph::GraphicalModel& model,
                                    GsdmStructure& structure) const {
  const int64_t nodes = structure.num_nodes, dim = config_.dim;
  // Nodes sharing a width (and discreteness) share input and output projections.
  std::map<std::pair<int64_t, bool>, std::pair<std::vector<int64_t>, std::vector<int64_t>>> by_arity;
  for (int64_t node = 0; node < nodes; ++node) {
    const graph::Array& a = model.array_of(node);
    auto& [members, entries] = by_arity[{a.width(), a.type == graph::VariableType::discrete}];
    members.push_back(node);
    for (int64_t k = 0; k < a.width(); ++k)
      entries.push_back(structure.layout.node_offset[node] + k);
  }
  for (auto& [arity, lists] : by_arity) {
    const auto projection = projection_of_arity_.find(arity);
    if (projection == projection_of_arity_.end()) {
      throw std::invalid_argument("this graph has " +
                                  std::string(arity.second ? "discrete" : "continuous") +
                                  " variables of width " + std::to_string(arity.first) +
                                  ", for which the model has no projection");
    }
    structure.groups.push_back({arity.first, arity.second, projection->second,
                                torch::tensor(lists.first, torch::kLong),
                                torch::tensor(lists.second, torch::kLong)});
  }

  // Node embeddings (paper §3.2).
  std::vector<int64_t> table_row(nodes);
  structure.sinusoidal_codes = torch::zeros({nodes, dim});
  std::map<std::string, int64_t> array_id;
  for (const graph::Array& a : model.arrays()) array_id.emplace(a.name, array_id.size());
  for (int64_t node = 0; node < nodes; ++node) {
    const graph::Array& a = model.array_of(node);
    switch (config_.embedding) {
      case EmbeddingKind::independent: table_row[node] = node; break;
      case EmbeddingKind::array: table_row[node] = array_id[a.name]; break;
      case EmbeddingKind::exchangeable: {
        const int64_t group = model.embedding_group_of_node()[node];
        table_row[node] = group >= 0 ? group : model.num_embedding_groups() + array_id[a.name];
        break;
      }
    }
    if (config_.embedding == EmbeddingKind::array && !a.shape.empty()) {
      // Channels split across the index dimensions, one sinusoidal code each.
      const graph::Element element = model.element(node);
      const int64_t axes = static_cast<int64_t>(a.shape.size());
      const int64_t chunk = (dim / axes) / 2 * 2;
      for (int64_t axis = 0; axis < axes && chunk > 0; ++axis) {
        structure.sinusoidal_codes[node]
            .narrow(0, axis * chunk, chunk)
            .copy_(sinusoidal_embedding(torch::tensor({element.index[axis]}), chunk,
                                        FrequencySpacing::transformer)[0]);
      }
    }
  }
  structure.embedding_index = torch::tensor(table_row, torch::kLong);
  switch (config_.embedding) {
    case EmbeddingKind::independent:
      return nodes;
    case EmbeddingKind::array:
      return static_cast<int64_t>(array_id.size());
    case EmbeddingKind::exchangeable:
      return model.num_embedding_groups() + static_cast<int64_t>(array_id.size());
  }
  return 0;
}

double weight_bytes(const GsdmConfig& config, int64_t nodes) {
  const double dim = static_cast<double>(config.dim);
  return 4.0 * ((8.0 * static_cast<double>(config.blocks) + 2.0) * dim * dim +
                2.0 * static_cast<double>(nodes) * dim);
}

double block_activation_bytes(const GsdmConfig& config, double nodes, double attended_pairs,
                              double floats_per_node) {
  return 4.0 * (floats_per_node * nodes * static_cast<double>(config.dim) +
                3.0 * attended_pairs * static_cast<double>(config.heads));
}

GsdmImpl::GsdmImpl(const graph::GraphicalModel& model, GsdmConfig config)
    : config_(std::move(config)) {
  const int64_t dim = config_.dim;
  if (dim < 2 || config_.heads < 1 || dim % config_.heads != 0 || config_.blocks < 1) {
    throw std::invalid_argument("GSDM: dim (" + std::to_string(dim) +
                                ") must be a multiple of heads (" + std::to_string(config_.heads) +
                                ") and blocks >= 1");
  }
  require_memory(weight_bytes(config_, model.num_nodes()),
                 "a GSDM of dim " + std::to_string(dim) + " and " + std::to_string(config_.blocks) +
                     " blocks");
  if (config_.attention != Mechanism::dense && config_.attention != Mechanism::sparse &&
      config_.attention != Mechanism::gather && config_.attention != Mechanism::structured) {
    throw std::invalid_argument(
        "GSDM attention must be sparse, structured, gather or dense, got " +
        mechanism_name(config_.attention));
  }
  if (config_.attention == Mechanism::dense && config_.mask.rule != graph::MaskRule::standard) {
    throw std::invalid_argument("GSDM: dense attention uses no mask, so mask rule " +
                                graph::mask_rule_name(config_.mask.rule) + " has no effect");
  }
  home_ =
      std::make_shared<GsdmStructure>(model, config_.mask, config_.attention != Mechanism::dense);
  input_proj_ = register_module("input_proj", torch::nn::ModuleList());
  output_proj_ = register_module("output_proj", torch::nn::ModuleList());
  for (int64_t node = 0; node < home_->num_nodes; ++node) {
    const graph::Array& a = model.array_of(node);
    projection_of_arity_.emplace(std::make_pair(a.width(), a.type == graph::VariableType::discrete),
                                 0);
  }
  for (auto& [arity, index] : projection_of_arity_) {
    index = static_cast<int64_t>(input_proj_->size());
    input_proj_->push_back(torch::nn::Linear(arity.first, dim));
    output_proj_->push_back(torch::nn::Linear(dim, arity.first));
  }
  table_rows_ = assign_embeddings(model, *home_);
  structure_ = home_;
  // The home graph's rows and codes are part of the model file (files have always held them).
  register_buffer("embedding_index", home_->embedding_index);
  register_buffer("sinusoidal_codes", home_->sinusoidal_codes);
  node_table_ = register_module("node_table", torch::nn::Embedding(table_rows_, dim));
  if (!(config_.observed_embedding_init >= 0) || !std::isfinite(config_.observed_embedding_init)) {
    throw std::invalid_argument("GSDM: the observed embedding's initial std must be finite and >= 0");
  }
  observed_embedding_ = register_parameter("observed_embedding",
                                           torch::randn({dim}) * config_.observed_embedding_init);

  time_in_ = register_module("time_in", torch::nn::Linear(dim, dim));
  time_out_ = register_module("time_out", torch::nn::Linear(dim, dim));
  for (int64_t i = 0; i < config_.blocks; ++i) {
    res_blocks_.push_back(register_module("res" + std::to_string(i),
                                          std::make_shared<ResBlockImpl>(dim, config_.norm)));
    attention_blocks_.push_back(register_module(
        "attn" + std::to_string(i),
        std::make_shared<AttentionBlockImpl>(dim, config_.heads, config_.norm, config_.attention,
                                             config_.attention_scaling)));
  }
  if (config_.output_norm) {
    final_norm_ = register_module("final_norm", std::make_shared<TokenNormImpl>(config_.norm, dim));
  }
}

std::shared_ptr<GsdmStructure> GsdmImpl::structure_for(const graph::GraphicalModel& model) const {
  if (config_.embedding == EmbeddingKind::independent) {
    throw std::invalid_argument(
        "a model with IE embeddings (a learned row per variable) runs only on the graph it was "
        "built on; AE and EE embeddings carry over to other sizes");
  }
  auto structure =
      std::make_shared<GsdmStructure>(model, config_.mask, config_.attention != Mechanism::dense);
  const int64_t rows = assign_embeddings(model, *structure);
  if (rows != table_rows_) {
    throw std::invalid_argument(
        "this graph needs " + std::to_string(rows) + " embedding rows and the model has " +
        std::to_string(table_rows_) +
        " (EE groups whose number depends on the size, such as sorting's one per s_i, do not "
        "carry over; AE does)");
  }
  return structure;
}

void GsdmImpl::use_structure(std::shared_ptr<GsdmStructure> structure) {
  if (!structure) throw std::invalid_argument("GSDM: use_structure needs a structure");
  structure_ = std::move(structure);
}

torch::Tensor GsdmImpl::forward(const torch::Tensor& x_t, const torch::Tensor& t,
                                const torch::Tensor& observed, bool discrete_logits) {
  if (structure_->device != x_t.device()) structure_->move_to(x_t.device());
  const GsdmStructure& s = *structure_;
  if (x_t.dim() != 2 || x_t.size(1) != s.layout.width) {
    throw std::invalid_argument("GSDM: state must be (batch, " + std::to_string(s.layout.width) +
                                "), got " + std::to_string(x_t.dim()) + "-d tensor");
  }
  if (observed.sizes() != torch::IntArrayRef({x_t.size(0), s.num_nodes})) {
    throw std::invalid_argument("GSDM: observed mask must be (batch, " +
                                std::to_string(s.num_nodes) + ")");
  }
  const int64_t batch = x_t.size(0), dim = config_.dim;
  torch::Tensor h = torch::zeros({batch, s.num_nodes, dim}, x_t.options());
  for (const ArityGroup& group : s.groups) {
    torch::Tensor values =
        x_t.index_select(1, group.entries).view({batch, group.nodes.size(0), group.width});
    h = h.index_copy(1, group.nodes,
                     input_proj_[group.projection]->as<torch::nn::Linear>()->forward(values));
  }
  h = h + observed.unsqueeze(-1).to(h.scalar_type()) * observed_embedding_;
  torch::Tensor time_embedding = time_out_(
      torch::silu(time_in_(sinusoidal_embedding(t, dim, FrequencySpacing::transformer))));
  // The same input to every block's time projection, so the reference's swish is taken once.
  if (config_.time_swish) time_embedding = torch::silu(time_embedding);
  torch::Tensor node_embedding = node_table_->forward(s.embedding_index) + s.sinusoidal_codes;
  for (size_t i = 0; i < res_blocks_.size(); ++i) {
    h = res_blocks_[i]->forward(h, time_embedding, node_embedding);
    h = attention_blocks_[i]->forward(h, s.pattern_batch.get());
  }
  if (final_norm_) h = torch::silu(final_norm_->forward(h));
  torch::Tensor out = torch::zeros({batch, s.layout.width}, x_t.options());
  for (const ArityGroup& group : s.groups) {
    torch::Tensor prediction = output_proj_[group.projection]->as<torch::nn::Linear>()->forward(
        h.index_select(1, group.nodes));
    if (group.discrete && !discrete_logits) prediction = torch::softmax(prediction, -1);
    out = out.index_copy(1, group.entries, prediction.reshape({batch, -1}));
  }
  return out;
}

// ---- diffusion glue ----------------------------------------------------------------------------

diffusion::ModelFn conditioned_model(Gsdm model, torch::Tensor observed_nodes,
                                     torch::Tensor observed_values, bool discrete_logits) {
  torch::Tensor entries = model->layout().expand_node_mask(observed_nodes);
  return [model, observed_nodes, observed_values, entries, discrete_logits](
             const torch::Tensor& x_t, const torch::Tensor& t) mutable {
    torch::Tensor input = torch::where(entries, observed_values, x_t);
    return torch::where(entries, observed_values,
                        model->forward(input, t, observed_nodes, discrete_logits));
  };
}

diffusion::TrainingExample training_example(Gsdm model, const diffusion::NoiseSchedule& schedule,
                                            const torch::Tensor& x0, at::Generator generator) {
  return diffusion::make_training_example(schedule, x0.to(device_of(*model)), /*antithetic=*/true,
                                          std::move(generator));
}

torch::Tensor training_loss(Gsdm model, const diffusion::NoiseSchedule& schedule,
                            const torch::Tensor& x0, const torch::Tensor& observed_nodes,
                            at::Generator generator) {
  return training_loss(model, schedule, x0, observed_nodes,
                       training_example(model, schedule, x0, std::move(generator)), 0, x0.size(0));
}

torch::Tensor training_loss(Gsdm model, const diffusion::NoiseSchedule& schedule,
                            const torch::Tensor& x0_in, const torch::Tensor& observed_nodes_in,
                            const diffusion::TrainingExample& whole, int64_t begin, int64_t end) {
  const torch::Device device = device_of(*model);
  const diffusion::TrainingExample example = diffusion::example_rows(whole, begin, end);
  const auto rows = [&](const torch::Tensor& t) {
    return t.narrow(0, begin, end - begin).to(device);
  };
  const torch::Tensor x0 = rows(x0_in), observed_nodes = rows(observed_nodes_in);
  if (model->config().process == DiffusionProcess::masked) {
    return masked_training_loss(conditioned_model(model, observed_nodes, x0, /*discrete_logits=*/true),
                                *model->structure(), schedule, model->config().mask_schedule,
                                model->config().masked_loss, x0, observed_nodes, example);
  }
  torch::Tensor output = conditioned_model(model, observed_nodes, x0)(example.x_t, example.t);
  torch::Tensor latent = (~model->layout().expand_node_mask(observed_nodes)).to(x0.scalar_type());
  return diffusion::diffusion_loss(schedule, diffusion::Prediction::x0, output, example, x0, latent);
}

torch::Tensor decode_state(const StateLayout& layout, const graph::GraphicalModel& model,
                           const torch::Tensor& state) {
  const int64_t batch = state.size(0);
  std::vector<torch::Tensor> parts;
  for (const graph::Array& a : model.arrays()) {
    torch::Tensor block = state.narrow(1, layout.node_offset[a.first_node], a.size() * a.width());
    parts.push_back(a.type == graph::VariableType::discrete
                        ? block.view({batch, a.size(), a.width()}).argmax(-1).to(state.scalar_type())
                        : block);
  }
  return torch::cat(parts, 1);
}

torch::Tensor encode_state(const StateLayout& layout, const graph::GraphicalModel& model,
                           const torch::Tensor& values) {
  if (values.dim() != 2 || values.size(1) != model.num_nodes()) {
    throw std::invalid_argument("encode_state: values must be (batch, " +
                                std::to_string(model.num_nodes()) + ")");
  }
  const int64_t batch = values.size(0);
  std::vector<torch::Tensor> parts;
  for (const graph::Array& a : model.arrays()) {
    const torch::Tensor block = values.narrow(1, a.first_node, a.size()).to(torch::kFloat);
    if (a.type == graph::VariableType::continuous) {
      parts.push_back(block);
      continue;
    }
    const torch::Tensor index = block.round().to(torch::kLong);
    if (index.numel() > 0 && (index.min().item<int64_t>() < 0 ||
                              index.max().item<int64_t>() >= a.options ||
                              !block.eq(index.to(torch::kFloat)).all().item<bool>())) {
      throw std::invalid_argument("encode_state: array '" + a.name + "' takes option indices 0.." +
                                  std::to_string(a.options - 1));
    }
    parts.push_back(torch::one_hot(index, a.options).to(torch::kFloat).view({batch, -1}));
  }
  torch::Tensor state = torch::cat(parts, 1);
  if (state.size(1) != layout.width) throw std::logic_error("encode_state: layout of another model");
  return state;
}

namespace {
const auto kSamplerNames = enum_names<Sampler>("sampler", {
    {Sampler::ancestral, "ancestral"},
    {Sampler::ddim, "ddim"},
    {Sampler::adaptive, "adaptive"},
});
const auto kConfidenceNames = enum_names<Confidence>("confidence", {
    {Confidence::probability, "probability"},
    {Confidence::margin, "margin"},
});
}  // namespace

Sampler parse_sampler(const std::string& name) {
  return name.empty() ? Sampler::model_default : kSamplerNames.parse(name);
}

std::vector<std::string> sampler_names() { return kSamplerNames.choices(); }

std::string sampler_name(Sampler sampler) {
  return sampler == Sampler::model_default ? "the model's default" : kSamplerNames.name(sampler);
}

Sampler resolve_sampler(Sampler requested, DiffusionProcess process) {
  if (requested != Sampler::model_default) return requested;
  return process == DiffusionProcess::masked ? Sampler::adaptive : Sampler::ddim;
}

Confidence parse_confidence(const std::string& name) {
  return name.empty() ? Confidence::by_temperature : kConfidenceNames.parse(name);
}

std::vector<std::string> confidence_names() { return kConfidenceNames.choices(); }

torch::Tensor sample(Gsdm model, const diffusion::NoiseSchedule& schedule,
                     const torch::Tensor& observed_nodes_in,
                     const torch::Tensor& observed_values_in, const SampleOptions& options) {
  if (!options.generator.defined()) throw std::invalid_argument("gsdm::sample needs a generator");
  torch::NoGradGuard no_grad;
  const torch::Device device = device_of(*model);
  const torch::Tensor observed_nodes = observed_nodes_in.to(device);
  const torch::Tensor observed_values = observed_values_in.to(device);
  // The conditioned model writes the observed values into its input and over its output at
  // every step, so the sampler needs no clamp of its own; latent entries are zeroed so that no
  // value passed for them can reach the network.
  const torch::Tensor observed_entries = model->layout().expand_node_mask(observed_nodes);
  const torch::Tensor clean_values =
      observed_values * observed_entries.to(observed_values.scalar_type());
  const bool masked = model->config().process == DiffusionProcess::masked;
  const torch::Tensor noise =
      random::normal(observed_values.sizes(), options.generator, observed_values.options());
  SampleOptions resolved = options;
  resolved.sampler = resolve_sampler(options.sampler, model->config().process);
  if (masked) {
    return sample_masked(conditioned_model(model, observed_nodes, clean_values, /*discrete_logits=*/true),
                         *model->structure(), schedule, model->config().mask_schedule,
                         observed_nodes, clean_values, noise, resolved)
        .to(observed_values_in.device());
  }
  if (resolved.sampler == Sampler::adaptive) {
    throw std::invalid_argument(
        "the adaptive sampler unmasks variables: it needs a masked-process model (gsdm train "
        "--diffusion masked); this one is Gaussian (ddim or ancestral)");
  }
  const diffusion::ModelFn fn = conditioned_model(model, observed_nodes, clean_values);
  diffusion::SamplerOptions sampler;
  sampler.prediction = diffusion::Prediction::x0;
  sampler.ddim_eta = options.ddim_eta;
  sampler.progress = options.progress;
  sampler.generator = options.generator;
  const torch::Tensor samples =
      resolved.sampler == Sampler::ancestral
          ? diffusion::sample_ancestral(fn, schedule, noise, sampler)
          : diffusion::sample_ddim(fn, schedule, noise, options.ddim_steps, sampler);
  return samples.to(observed_values_in.device());
}

}  // namespace structdiff::gsdm
