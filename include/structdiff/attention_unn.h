// Undirected self-attention (UNN paper Sec. 4, App. B, E) on the engine of unn.h: one head over a
// sequence of token rows X (n, d), with queries Q, keys K, values V, output H (all identity
// variables), scores S (n, n, row softmax at temperature sqrt(d)) and the factors
//   E = -<Q, (X + P) Wq^T> - <K, (X + P) Wk^T> - <V, (X + P) Wv^T> - <S, Q K^T> - <H, S V>,
// P fixed sinusoidal positions. The given tokens clamp their rows of X to their embeddings; the
// masked rows are free, start at zero, and are read out through the tied embedding. There is no
// output projection, feed-forward block, normalisation or residual: nothing but the energy.
#pragma once

#include <cstdint>
#include <random>
#include <string>

#include <ATen/core/Generator.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "structdiff/number_sequences.h"
#include "structdiff/loop_options.h"
#include "structdiff/unn.h"

namespace structdiff::unn {

struct AttentionUnnConfig {
  int64_t d_model = 128;
  int64_t iterations = 1;  // k in training (and the default in use) unless random_iterations
  // forward-backward: Q K V S H S V K Q, then X (the paper's default); forward: Q K V S H, then X;
  // random: a fresh permutation of Q K V S H each iteration, then X; jacobi: those five at once.
  Schedule schedule = Schedule::forward_backward;
  bool random_iterations = false;  // training draws k from 1..5 per batch (App. B); use k = 3
  uint64_t init_seed = 0;
};
void check_config(const AttentionUnnConfig& config);
void to_json(nlohmann::json& out, const AttentionUnnConfig& config);
void from_json(const nlohmann::json& in, AttentionUnnConfig& config);

class AttentionUnnImpl : public torch::nn::Module {
 public:
  explicit AttentionUnnImpl(AttentionUnnConfig config);
  const AttentionUnnConfig& config() const { return config_; }
  Network& network() { return network_; }
  // Tokens (B, 24), MASK where a token is to be filled and PAD after the end -> the inference;
  // state["X"] holds the filled rows. `generator` draws random orders (none: a fixed stream).
  InferenceResult infer(const torch::Tensor& tokens, int64_t iterations, Schedule schedule,
                        at::Generator* generator = nullptr, bool record_energy = false);
  // Logits (B, 24, vocabulary) of every row of X through the tied embedding.
  torch::Tensor logits(const torch::Tensor& tokens, int64_t iterations, Schedule schedule,
                       at::Generator* generator = nullptr);

  torch::Tensor embedding;  // (vocabulary, d), N(0, 1)

 private:
  AttentionUnnConfig config_;
  Network network_{nullptr};
};
TORCH_MODULE(AttentionUnn);

// The fraction of masked tokens predicted exactly, in batches without gradients.
double masked_token_accuracy(AttentionUnn& model, const data::NumberSequences& data,
                             int64_t iterations, Schedule schedule);

struct AttentionUnnTraining {
  int64_t batch_size = 256;
  int64_t dev_size = 10000;  // training examples held out for model selection
  train::LoopOptions loop;
  uint64_t seed = 0;
};
struct AttentionUnnTrainingResult {
  int64_t steps = 0;
  double seconds = 0;
  int64_t best_step = 0;
  double best_dev_accuracy = 0;
};
// Trains on `train` (minus the development rows it holds out) with the mean cross-entropy over the
// masked tokens; keeps the weights of the best development accuracy (at k = 3 for random-k
// models), in eval mode on return.
AttentionUnnTrainingResult train_attention_unn(AttentionUnn& model,
                                               const data::NumberSequences& train,
                                               const AttentionUnnTraining& options);

void save_attention_unn(const std::string& path, AttentionUnn& model, nlohmann::json metadata);
AttentionUnn load_attention_unn(const std::string& path, nlohmann::json* metadata = nullptr);

}  // namespace structdiff::unn
