// The DDPM denoiser for images: a U-Net of ResNet blocks (GroupNorm, SiLU, 3x3 convolutions,
// time-embedding injection, dropout, residual) with down/up sampling, skip connections and
// self-attention blocks whose mechanism comes from the attention core (exact softmax, FAVOR+
// softmax or ReLU, linear).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/pimpl.h>

#include <ATen/core/Generator.h>

#include "structdiff/attention.h"

namespace structdiff::unet {

// The mechanisms a U-Net's attention blocks can use (dense, favor-softmax, favor-relu, linear:
// those that need no pattern), and a parser that refuses the others, naming the choices.
std::vector<std::string> attention_names();
Mechanism parse_attention(const std::string& name);

struct UNetConfig {
  int64_t image_channels = 1;
  int64_t image_size = 28;                     // square images; must halve cleanly per level
  int64_t base_channels = 32;
  std::vector<int64_t> channel_multipliers = {1, 2, 4};  // one per resolution level
  int64_t res_blocks = 1;                      // ResNet blocks per level (the way down)
  std::vector<int64_t> attention_resolutions = {28, 14, 7};  // side lengths with attention
  int64_t groups = 8;                          // GroupNorm groups
  double dropout = 0.1;
  int64_t heads = 4;
  int64_t head_dim = 32;
  Mechanism attention = Mechanism::dense;
  Mechanism bottleneck_attention = Mechanism::dense;
  int64_t favor_features = 0;                  // 0: d ln d
  int64_t redraw_interval = 1000;              // FAVOR+: training calls between redraws; 0 never
  uint64_t seed = 0;                           // FAVOR+ feature draws

  // Side lengths of the levels, from image_size down (28, 14, 7 for three levels).
  std::vector<int64_t> resolutions() const;
  // Throws std::invalid_argument naming the offending field.
  void validate() const;
};

// As every configuration: `nlohmann::json(config)` and `j.get<UNetConfig>()`; files that name
// dense attention "exact" still load.
void to_json(nlohmann::json& j, const UNetConfig& config);
void from_json(const nlohmann::json& j, UNetConfig& config);

// ResNet block: GN-SiLU-conv3x3, + projected time embedding, GN-SiLU-dropout-conv3x3, residual
// (1x1 convolution when the channel count changes).
class ResBlockImpl : public torch::nn::Module {
 public:
  ResBlockImpl(int64_t in_channels, int64_t out_channels, int64_t time_dim, int64_t groups,
               double dropout);
  // Dropout draws from `dropout` (none when nullptr).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& time_embedding,
                        at::Generator* dropout);

 private:
  torch::nn::GroupNorm norm1_{nullptr}, norm2_{nullptr};
  torch::nn::Conv2d conv1_{nullptr}, conv2_{nullptr}, skip_{nullptr};
  torch::nn::Linear time_projection_{nullptr};
  double dropout_;
};
TORCH_MODULE(ResBlock);

// Self-attention over the H*W positions: GN, 1x1 convolution to Q, K, V (heads x head_dim each),
// the core mechanism, 1x1 convolution back, residual.
class AttentionBlockImpl : public torch::nn::Module {
 public:
  AttentionBlockImpl(int64_t channels, int64_t groups, int64_t heads, int64_t head_dim,
                     const AttentionConfig& attention);
  torch::Tensor forward(const torch::Tensor& x);

 private:
  int64_t heads_, head_dim_;
  torch::nn::GroupNorm norm_{nullptr};
  torch::nn::Conv2d to_qkv_{nullptr}, to_out_{nullptr};
  Attention attention_{nullptr};
};
TORCH_MODULE(AttentionBlock);

class UNetImpl : public torch::nn::Module {
 public:
  explicit UNetImpl(UNetConfig config);
  // x: (batch, image_channels, size, size); t: int64 (batch,) diffusion steps. Returns the
  // prediction (the noise, for DDPM) with x's shape. Dropout draws from `dropout`: training passes
  // its own generator, sampling none.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& t,
                        at::Generator* dropout = nullptr);
  const UNetConfig& config() const { return config_; }

 private:
  // One position in the encoder or decoder: a ResNet block, optionally followed by attention,
  // or a resampling convolution.
  struct Stage {
    enum Kind { block, down, up } kind;
    int64_t index;  // into blocks_/attentions_ (block) or resamplers_ (down, up)
    int64_t attention = -1;
  };
  UNetConfig config_;
  int64_t time_dim_ = 0;
  torch::nn::Linear time_in_{nullptr}, time_out_{nullptr};
  torch::nn::Conv2d input_{nullptr}, output_{nullptr};
  torch::nn::GroupNorm output_norm_{nullptr};
  torch::nn::ModuleList blocks_, attentions_, resamplers_;
  std::vector<Stage> encoder_, decoder_;
  ResBlock middle_first_{nullptr}, middle_second_{nullptr};
  AttentionBlock middle_attention_{nullptr};
};
TORCH_MODULE(UNet);

}  // namespace structdiff::unet
