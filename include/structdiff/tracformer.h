// Tracformer (Liu et al., "Tractable Transformers for Flexible Conditional Generation", ICML
// 2025) and the baselines of its App. B.2 built from the same blocks: a character-level model of
// Pr(x_t | context) for any set of given positions.
//
// Tracformer: a multi-scope sparse encoder (paper Sec. 4.1), run twice with shared weights, over
// prefix and over suffix patterns; a decoder without self-attention whose layer l cross-attends
// encoder layer L - l + 1 through one softmax over the union of prefix keys (Eq. 5) and suffix
// keys (Eq. 6), a T x 2T pattern; RoPE in every attention; final LayerNorm; head tied to the
// embedding. The paper leaves four choices open; this implementation takes the ones its
// parameter count (Table 3) supports: one shared cross-attention over the union, a tied head;
// dropout after the embedding and on both residual branches (none on attention weights, which the
// fused kernel does not form); RoPE rotate-half with base 10,000 over the full head.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <ATen/core/Generator.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include "structdiff/attention.h"

namespace structdiff::tracformer {

// Which network; all are configurations of the same blocks.
enum class Architecture {
  tracformer,                // multi-scope sparse encoder, Eq. 5-6 decoder
  tracformer_dense_encoder,  // Table 11's ablation: dense causal / anti-causal encoder patterns
  bart,  // bidirectional encoder over the masked input, decoder with causal self-attention
         // over the true preceding tokens and full cross-attention (CAR objective)
  bert,  // bidirectional encoder over the masked input (AC objective)
  ar,    // left-to-right causal transformer (next-token objective)
};
Architecture parse_architecture(const std::string& name);  // "tracformer", "bart", ...
std::vector<std::string> architecture_names();
// Tracformer and its dense-encoder ablation: prefix and suffix encoders, a KV cache.
bool has_prefix_encoder(Architecture architecture);
std::string architecture_name(Architecture architecture);

// What a prediction at position t may condition on (paper Sec. 4.3): CAR, the given context and
// every preceding position; AC, the given context only.
enum class Mode { car, ac };
Mode parse_mode(const std::string& name);  // "car" | "ac"
std::string mode_name(Mode mode);

struct Config {
  Architecture architecture = Architecture::tracformer;
  Mode objective = Mode::car;  // what the model was trained for (bert: ac; bart, ar: car)
  std::u32string characters;   // the vocabulary (sorted); <MASK> is id characters.size()
  int64_t d_model = 128;
  int64_t heads = 4;
  int64_t layers = 8;          // encoder layers (= decoder layers for tracformer)
  int64_t decoder_layers = 0;  // bart only; 0 means `layers`
  int64_t n_max = 16;          // tracformer: keys per encoder row
  int64_t block_size = 256;    // training length T
  double dropout = 0.1;
  // structured (the core picks sparse or masked dense), sparse, dense or gather: all restricted to
  // patterns.
  Mechanism mechanism = Mechanism::structured;
  uint64_t init_seed = 0;                   // initial weights draw from this seed alone
  // The paper's vocabulary instead of characters (for the parameter-count check); 0: characters.
  int64_t vocab_size_override = 0;

  int64_t vocab_size() const;  // characters + <MASK>
  int64_t head_dim() const { return d_model / heads; }
  int64_t mask_id() const { return vocab_size() - 1; }
};
// Throws std::invalid_argument naming the field and value (e.g. d_model not divisible by heads,
// an odd head dimension, which RoPE cannot rotate, or a mechanism that cannot take a pattern).
void check_config(const Config& config);
void to_json(nlohmann::json& out, const Config& config);
void from_json(const nlohmann::json& in, Config& config);

// Keys and values split into heads: (B, heads, keys, head_dim) each, keys rotated.
struct KeyValue {
  torch::Tensor keys, values;
};

// Multi-head attention with RoPE (queries rotated by their positions, keys by theirs) restricted
// to a pattern. The parts are public for incremental decoding, which keeps keys and values.
class RotaryAttentionImpl : public torch::nn::Module {
 public:
  RotaryAttentionImpl(int64_t d_model, int64_t heads, Mechanism mechanism);
  // queries (B, Q, d), keys_values (B, K, d); positions (Q) and (K).
  torch::Tensor forward(const torch::Tensor& queries, const torch::Tensor& keys_values,
                        const torch::Tensor& query_positions, const torch::Tensor& key_positions,
                        const PatternBatch& pattern);
  torch::Tensor query(const torch::Tensor& x, const torch::Tensor& positions);  // (B, H, Q, hd)
  KeyValue key_value(const torch::Tensor& x, const torch::Tensor& positions);
  // (B, Q, d): the pattern's keys through the configured mechanism, or, without a pattern, all
  // of `kv`'s keys through dense softmax attention.
  torch::Tensor attend(const torch::Tensor& q, const KeyValue& kv, const PatternBatch* pattern);

 private:
  int64_t heads_;
  torch::nn::Linear q_{nullptr}, k_{nullptr}, v_{nullptr}, o_{nullptr};
  Attention attention_{nullptr};
};
TORCH_MODULE(RotaryAttention);

// A pre-LayerNorm block: optional self-attention, optional cross-attention (LayerNorm on both
// sides), GELU feed-forward of width 4d. Dropout on each residual branch.
class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const Config& config, bool self_attention, bool cross_attention);
  struct Context {
    const torch::Tensor* memory = nullptr;  // cross-attention keys and values (B, K, d)
    torch::Tensor query_positions, memory_positions;
    const PatternBatch* self_pattern = nullptr;
    const PatternBatch* cross_pattern = nullptr;
    at::Generator* dropout = nullptr;  // nullptr: no dropout
  };
  torch::Tensor forward(torch::Tensor x, const Context& context);

  // Incremental decoding: the self-attention keys and values of x (B, Q, d) at `positions`; the
  // cross-attention keys and values of `memory`; x through the block attending exactly `self`
  // and `memory` (no pattern, no dropout).
  KeyValue self_key_value(const torch::Tensor& x, const torch::Tensor& positions);
  KeyValue memory_key_value(const torch::Tensor& memory, const torch::Tensor& positions);
  torch::Tensor forward_cached(torch::Tensor x, const torch::Tensor& positions,
                               const KeyValue* self, const KeyValue* memory);

 private:
  torch::Tensor feed_forward(const torch::Tensor& x, at::Generator* generator);
  double dropout_;
  torch::nn::LayerNorm self_norm_{nullptr}, cross_norm_{nullptr}, memory_norm_{nullptr},
      ffn_norm_{nullptr};
  RotaryAttention self_attention_{nullptr}, cross_attention_{nullptr};
  torch::nn::Linear up_{nullptr}, down_{nullptr};
};
TORCH_MODULE(Block);

class TracformerImpl : public torch::nn::Module {
 public:
  explicit TracformerImpl(Config config);
  const Config& config() const { return config_; }

  // tokens: (B, T) int64 ids of the true sequence (any value where not given in AC mode);
  // given: (B, T) bool, the context C. Returns (B, T, characters) logits of Pr(x_t | ·) under
  // `mode` (tracformer only; bart and ar always condition on the preceding tokens, bert never).
  // Tokens outside the vocabulary (-1) are read as <MASK>. Dropout draws from `dropout`, none
  // when nullptr.
  torch::Tensor forward(const torch::Tensor& tokens, const torch::Tensor& given, Mode mode,
                        at::Generator* dropout = nullptr);
  // The general form: the prefix encoder reads the true tokens where `prefix_visible` (CAR: all;
  // AC: `given`), <MASK> elsewhere. Tracformer architectures only.
  torch::Tensor forward_visible(const torch::Tensor& tokens, const torch::Tensor& given,
                                const torch::Tensor& prefix_visible,
                                at::Generator* dropout = nullptr);

  // Left-to-right CAR decoding with the KV cache of App. E (Tracformer architectures): the
  // suffix encoder runs once; the prefix encoder takes one position at a time, each layer
  // attending its cached keys (at most N_max); the decoder runs one query per step. At each
  // position t hidden in some row, choose(t, logits) gets the (B, characters) logits of
  // Pr(x_t | x_C, x_<t) and returns (B) tokens, placed where t is hidden. Returns the tokens
  // (-1 kept where a given one was -1). Equal to full passes up to float rounding, for any
  // context: a prefix, a suffix or gaps.
  torch::Tensor decode_cached(
      const torch::Tensor& tokens, const torch::Tensor& given,
      const std::function<torch::Tensor(int64_t t, const torch::Tensor& logits)>& choose);
  // The mode a prediction of this architecture conditions on, whatever is asked.
  Mode effective_mode(Mode requested) const;

  // Parameters outside the token embedding (which the output head shares).
  int64_t non_embedding_parameters() const;

 private:
  struct Patterns;  // per sequence length and batch size, built on first use
  const Patterns& patterns(int64_t length, int64_t batch);
  AttentionPattern encoder_pattern(int64_t T, int64_t layer, patterns::Direction direction) const;
  void check_inputs(const torch::Tensor& tokens, const torch::Tensor& given) const;
  torch::Tensor embed(const torch::Tensor& ids, at::Generator* generator);
  torch::Tensor head(const torch::Tensor& features);

  Config config_;
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::ModuleList encoder_{nullptr}, decoder_{nullptr};
  torch::nn::LayerNorm final_norm_{nullptr};
  std::mutex patterns_mutex_;
  std::map<std::pair<int64_t, int64_t>, std::shared_ptr<const Patterns>> patterns_;
};
TORCH_MODULE(Tracformer);

// Model files (train::save_model_file's format, kind "tracformer"): the configuration under
// "config" beside what the caller records in `metadata`.
void save_model(const std::string& path, Tracformer& model, nlohmann::json metadata);
// Loads a model file (eval mode); throws std::runtime_error naming the path for a file of another
// kind or a broken one. `metadata`, when given, receives the file's metadata.
Tracformer load_model(const std::string& path, nlohmann::json* metadata = nullptr);

// The encoder and decoder patterns the model uses at length T (exposed for tests and the
// `pattern` command): decoder layer `layer`'s T x 2T union, prefix keys in columns [0, T) and
// suffix keys in [T, 2T).
AttentionPattern decoder_union_pattern(int64_t T, int64_t num_layers, int64_t layer);

}  // namespace structdiff::tracformer
