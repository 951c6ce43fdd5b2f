#include "structdiff/unet.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <torch/torch.h>

#include "structdiff/dropout.h"
#include "structdiff/sinusoidal.h"

namespace structdiff::unet {
namespace {

// The mechanisms a U-Net attention block can use: all but those that need a pattern.
const std::vector<Mechanism> kUNetMechanisms = {Mechanism::dense, Mechanism::favor_softmax,
                                                Mechanism::favor_relu, Mechanism::linear};

AttentionConfig attention_config(const UNetConfig& config, Mechanism mechanism, uint64_t seed) {
  AttentionConfig attention;
  attention.mechanism = mechanism;
  attention.head_dim = config.head_dim;
  attention.num_features = config.favor_features;
  attention.redraw_interval = config.redraw_interval;
  attention.seed = seed;
  return attention;
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t kernel, int64_t stride = 1) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2));
}

// Output layers that start at zero make every residual branch start as the identity (as in
// Ho et al.'s code), which keeps early training stable.
template <typename Layer>
Layer zero_initialised(Layer layer) {
  torch::NoGradGuard no_grad;
  layer->weight.zero_();
  if (layer->bias.defined()) layer->bias.zero_();
  return layer;
}

}  // namespace

std::vector<std::string> attention_names() {
  std::vector<std::string> names;
  for (Mechanism mechanism : kUNetMechanisms) names.push_back(mechanism_name(mechanism));
  return names;
}

Mechanism parse_attention(const std::string& name) {
  // Files written before the U-Net took the shared mechanism names call dense attention "exact".
  const std::string canonical = name == "exact" ? "dense" : name;
  for (Mechanism mechanism : kUNetMechanisms) {
    if (mechanism_name(mechanism) == canonical) return mechanism;
  }
  std::string choices;
  for (const std::string& choice : attention_names()) choices += (choices.empty() ? "" : ", ") + choice;
  throw std::invalid_argument("U-Net: unknown attention '" + name + "' (choose " + choices + ")");
}

std::vector<int64_t> UNetConfig::resolutions() const {
  std::vector<int64_t> sides;
  int64_t side = image_size;
  for (size_t level = 0; level < channel_multipliers.size(); ++level) {
    sides.push_back(side);
    side /= 2;
  }
  return sides;
}

void UNetConfig::validate() const {
  auto fail = [](const std::string& message) { throw std::invalid_argument("U-Net: " + message); };
  if (image_channels < 1) fail("image_channels must be >= 1, got " + std::to_string(image_channels));
  if (base_channels < 1) fail("base_channels must be >= 1, got " + std::to_string(base_channels));
  if (channel_multipliers.empty()) fail("channel_multipliers must name at least one level");
  if (res_blocks < 1) fail("res_blocks must be >= 1, got " + std::to_string(res_blocks));
  if (groups < 1) fail("groups must be >= 1, got " + std::to_string(groups));
  if (heads < 1 || head_dim < 1) fail("heads and head_dim must be >= 1");
  for (Mechanism mechanism : {attention, bottleneck_attention}) parse_attention(mechanism_name(mechanism));
  if (dropout < 0 || dropout >= 1) fail("dropout must be in [0, 1), got " + std::to_string(dropout));
  const int64_t halvings = static_cast<int64_t>(channel_multipliers.size()) - 1;
  if (image_size < 1 || image_size % (int64_t{1} << halvings) != 0) {
    fail("image_size " + std::to_string(image_size) + " must be divisible by 2^" +
         std::to_string(halvings) + " for " + std::to_string(halvings + 1) + " levels");
  }
  if (base_channels % groups != 0) {
    fail("base_channels " + std::to_string(base_channels) + " must be divisible by groups " +
         std::to_string(groups));
  }
  for (int64_t multiplier : channel_multipliers) {
    if (multiplier < 1 || (base_channels * multiplier) % groups != 0) {
      fail("channel multiplier " + std::to_string(multiplier) + " gives " +
           std::to_string(base_channels * multiplier) + " channels, not a positive multiple of groups " +
           std::to_string(groups));
    }
  }
  const std::vector<int64_t> sides = resolutions();
  for (int64_t side : attention_resolutions) {
    if (std::find(sides.begin(), sides.end(), side) == sides.end()) {
      std::string available;
      for (int64_t s : sides) available += (available.empty() ? "" : ", ") + std::to_string(s);
      fail("attention resolution " + std::to_string(side) + " is not a level of this U-Net (" +
           available + ")");
    }
  }
  if (favor_features < 0) fail("favor_features must be >= 0 (0: d ln d)");
  if (redraw_interval < 0) fail("redraw_interval must be >= 0 (0: never)");
}

void to_json(nlohmann::json& j, const UNetConfig& c) {
  j = {{"image_channels", c.image_channels},
          {"image_size", c.image_size},
          {"base_channels", c.base_channels},
          {"channel_multipliers", c.channel_multipliers},
          {"res_blocks", c.res_blocks},
          {"attention_resolutions", c.attention_resolutions},
          {"groups", c.groups},
          {"dropout", c.dropout},
          {"heads", c.heads},
          {"head_dim", c.head_dim},
          {"attention", mechanism_name(c.attention)},
          {"bottleneck_attention", mechanism_name(c.bottleneck_attention)},
          {"favor_features", c.favor_features},
          {"redraw_interval", c.redraw_interval},
          {"seed", c.seed}};
}

void from_json(const nlohmann::json& j, UNetConfig& c) {
  c.image_channels = j.at("image_channels").get<int64_t>();
  c.image_size = j.at("image_size").get<int64_t>();
  c.base_channels = j.at("base_channels").get<int64_t>();
  c.channel_multipliers = j.at("channel_multipliers").get<std::vector<int64_t>>();
  c.res_blocks = j.at("res_blocks").get<int64_t>();
  c.attention_resolutions = j.at("attention_resolutions").get<std::vector<int64_t>>();
  c.groups = j.at("groups").get<int64_t>();
  c.dropout = j.at("dropout").get<double>();
  c.heads = j.at("heads").get<int64_t>();
  c.head_dim = j.at("head_dim").get<int64_t>();
  c.attention = parse_attention(j.at("attention").get<std::string>());
  c.bottleneck_attention = parse_attention(j.at("bottleneck_attention").get<std::string>());
  c.favor_features = j.at("favor_features").get<int64_t>();
  c.redraw_interval = j.at("redraw_interval").get<int64_t>();
  c.seed = j.at("seed").get<uint64_t>();
}

ResBlockImpl::ResBlockImpl(int64_t in_channels, int64_t out_channels, int64_t time_dim,
                           int64_t groups, double dropout)
    : dropout_(dropout) {
  norm1_ = register_module("norm1", torch::nn::GroupNorm(groups, in_channels));
  conv1_ = register_module("conv1", conv(in_channels, out_channels, 3));
  time_projection_ = register_module("time_projection", torch::nn::Linear(time_dim, out_channels));
  norm2_ = register_module("norm2", torch::nn::GroupNorm(groups, out_channels));
  conv2_ = register_module("conv2", zero_initialised(conv(out_channels, out_channels, 3)));
  if (in_channels != out_channels) skip_ = register_module("skip", conv(in_channels, out_channels, 1));
}

torch::Tensor ResBlockImpl::forward(const torch::Tensor& x, const torch::Tensor& time_embedding,
                                    at::Generator* dropout_generator) {
  torch::Tensor h = conv1_(torch::silu(norm1_(x)));
  h = h + time_projection_(torch::silu(time_embedding)).unsqueeze(-1).unsqueeze(-1);
  h = conv2_(dropout(torch::silu(norm2_(h)), dropout_, dropout_generator));
  return (skip_ ? skip_(x) : x) + h;
}

AttentionBlockImpl::AttentionBlockImpl(int64_t channels, int64_t groups, int64_t heads,
                                       int64_t head_dim, const AttentionConfig& attention)
    : heads_(heads), head_dim_(head_dim) {
  norm_ = register_module("norm", torch::nn::GroupNorm(groups, channels));
  to_qkv_ = register_module("to_qkv", conv(channels, 3 * heads * head_dim, 1));
  attention_ = register_module("attention", Attention(attention));
  to_out_ = register_module("to_out", zero_initialised(conv(heads * head_dim, channels, 1)));
}

torch::Tensor AttentionBlockImpl::forward(const torch::Tensor& x) {
  const int64_t batch = x.size(0), height = x.size(2), width = x.size(3);
  // (batch, 3, heads, head_dim, positions) -> three (batch, heads, positions, head_dim)
  const torch::Tensor qkv =
      to_qkv_(norm_(x)).reshape({batch, 3, heads_, head_dim_, height * width}).transpose(-1, -2);
  const torch::Tensor out = attention_(qkv.select(1, 0), qkv.select(1, 1), qkv.select(1, 2));
  return x + to_out_(out.transpose(-1, -2).reshape({batch, heads_ * head_dim_, height, width}));
}

UNetImpl::UNetImpl(UNetConfig config) : config_(std::move(config)) {
  config_.validate();
  const UNetConfig& c = config_;
  time_dim_ = 4 * c.base_channels;
  time_in_ = register_module("time_in", torch::nn::Linear(c.base_channels, time_dim_));
  time_out_ = register_module("time_out", torch::nn::Linear(time_dim_, time_dim_));
  input_ = register_module("input", conv(c.image_channels, c.base_channels, 3));
  blocks_ = register_module("blocks", torch::nn::ModuleList());
  attentions_ = register_module("attentions", torch::nn::ModuleList());
  resamplers_ = register_module("resamplers", torch::nn::ModuleList());

  const std::vector<int64_t> sides = c.resolutions();
  const int64_t levels = static_cast<int64_t>(sides.size());
  auto wants_attention = [&](int64_t side) {
    return std::find(c.attention_resolutions.begin(), c.attention_resolutions.end(), side) !=
           c.attention_resolutions.end();
  };
  uint64_t attention_seed = c.seed;
  auto add_block = [&](std::vector<Stage>& stages, int64_t in, int64_t out, int64_t side) {
    Stage stage{Stage::block, static_cast<int64_t>(blocks_->size())};
    blocks_->push_back(ResBlock(in, out, time_dim_, c.groups, c.dropout));
    if (wants_attention(side)) {
      stage.attention = static_cast<int64_t>(attentions_->size());
      attentions_->push_back(AttentionBlock(out, c.groups, c.heads, c.head_dim,
                                            attention_config(c, c.attention, attention_seed++)));
    }
    stages.push_back(stage);
  };

  std::vector<int64_t> skip_channels = {c.base_channels};
  int64_t channels = c.base_channels;
  for (int64_t level = 0; level < levels; ++level) {
    const int64_t out = c.base_channels * c.channel_multipliers[level];
    for (int64_t r = 0; r < c.res_blocks; ++r) {
      add_block(encoder_, channels, out, sides[level]);
      channels = out;
      skip_channels.push_back(channels);
    }
    if (level + 1 < levels) {
      encoder_.push_back({Stage::down, static_cast<int64_t>(resamplers_->size())});
      resamplers_->push_back(conv(channels, channels, 3, /*stride=*/2));
      skip_channels.push_back(channels);
    }
  }
  middle_first_ = register_module("middle_first", ResBlock(channels, channels, time_dim_, c.groups, c.dropout));
  middle_attention_ = register_module(
      "middle_attention", AttentionBlock(channels, c.groups, c.heads, c.head_dim,
                                         attention_config(c, c.bottleneck_attention, attention_seed++)));
  middle_second_ = register_module("middle_second", ResBlock(channels, channels, time_dim_, c.groups, c.dropout));
  for (int64_t level = levels - 1; level >= 0; --level) {
    const int64_t out = c.base_channels * c.channel_multipliers[level];
    for (int64_t r = 0; r <= c.res_blocks; ++r) {
      add_block(decoder_, channels + skip_channels.back(), out, sides[level]);
      skip_channels.pop_back();
      channels = out;
    }
    if (level > 0) {
      decoder_.push_back({Stage::up, static_cast<int64_t>(resamplers_->size())});
      resamplers_->push_back(conv(channels, channels, 3));
    }
  }
  output_norm_ = register_module("output_norm", torch::nn::GroupNorm(c.groups, channels));
  output_ = register_module("output", zero_initialised(conv(channels, c.image_channels, 3)));
}

torch::Tensor UNetImpl::forward(const torch::Tensor& x, const torch::Tensor& t,
                                at::Generator* dropout) {
  const UNetConfig& c = config_;
  if (x.dim() != 4 || x.size(1) != c.image_channels || x.size(2) != c.image_size ||
      x.size(3) != c.image_size) {
    throw std::invalid_argument("U-Net: input must be (batch, " + std::to_string(c.image_channels) +
                                ", " + std::to_string(c.image_size) + ", " +
                                std::to_string(c.image_size) + "), got " + std::to_string(x.dim()) +
                                "-d tensor of " + std::to_string(x.numel()) + " elements");
  }
  if (t.dim() != 1 || t.size(0) != x.size(0)) {
    throw std::invalid_argument("U-Net: t must hold one step per image");
  }
  const torch::Tensor time = time_out_(torch::silu(time_in_(sinusoidal_embedding(t, c.base_channels, FrequencySpacing::endpoint))));
  auto run_block = [&](const Stage& stage, torch::Tensor h) {
    h = blocks_[stage.index]->as<ResBlock>()->forward(h, time, dropout);
    if (stage.attention >= 0) h = attentions_[stage.attention]->as<AttentionBlock>()->forward(h);
    return h;
  };
  auto resampler = [&](const Stage& stage) { return resamplers_[stage.index]->as<torch::nn::Conv2d>(); };

  torch::Tensor h = input_(x);
  std::vector<torch::Tensor> skips = {h};
  for (const Stage& stage : encoder_) {
    h = stage.kind == Stage::block ? run_block(stage, h) : resampler(stage)->forward(h);
    skips.push_back(h);
  }
  h = middle_second_(middle_attention_(middle_first_(h, time, dropout)), time, dropout);
  for (const Stage& stage : decoder_) {
    if (stage.kind == Stage::up) {
      h = torch::nn::functional::interpolate(
          h, torch::nn::functional::InterpolateFuncOptions()
                 .scale_factor(std::vector<double>{2.0, 2.0})
                 .mode(torch::kNearest));
      h = resampler(stage)->forward(h);
    } else {
      h = run_block(stage, torch::cat({h, skips.back()}, 1));
      skips.pop_back();
    }
  }
  return output_(torch::silu(output_norm_(h)));
}

}  // namespace structdiff::unet
