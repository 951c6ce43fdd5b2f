// Tracformer and its same-block baselines: configuration, blocks, patterns, forward pass.
#include <stdexcept>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/dropout.h"
#include "structdiff/enum_names.h"
#include "structdiff/model_tensors.h"
#include "structdiff/rope.h"
#include "structdiff/runtime.h"
#include "structdiff/text_data.h"
#include "structdiff/tracformer.h"
#include "structdiff/model_file.h"

namespace structdiff::tracformer {
namespace {

const auto kArchitectureNames = enum_names<Architecture>(
    "architecture", {{Architecture::tracformer, "tracformer"},
                     {Architecture::tracformer_dense_encoder, "tracformer-dense-encoder"},
                     {Architecture::bart, "bart"},
                     {Architecture::bert, "bert"},
                     {Architecture::ar, "ar"}});

int64_t decoder_depth(const Config& config) {
  switch (config.architecture) {
    case Architecture::tracformer:
    case Architecture::tracformer_dense_encoder:
      return config.layers;
    case Architecture::bart:
      return config.decoder_layers > 0 ? config.decoder_layers : config.layers;
    default:
      return 0;
  }
}

// Query i attends keys i .. n-1.
AttentionPattern anti_causal(int64_t n) { return patterns::sliding_window(n, 0, n); }

}  // namespace

bool has_prefix_encoder(Architecture architecture) {
  return architecture == Architecture::tracformer ||
         architecture == Architecture::tracformer_dense_encoder;
}

Architecture parse_architecture(const std::string& name) { return kArchitectureNames.parse(name); }

std::vector<std::string> architecture_names() { return kArchitectureNames.choices(); }

std::string architecture_name(Architecture architecture) {
  return kArchitectureNames.name(architecture);
}

namespace {
const auto kModeNames = enum_names<Mode>("mode", {
    {Mode::car, "car"},
    {Mode::ac, "ac"},
});
}  // namespace

Mode parse_mode(const std::string& name) { return kModeNames.parse(name); }

std::string mode_name(Mode mode) { return kModeNames.name(mode); }

int64_t Config::vocab_size() const {
  return vocab_size_override > 0 ? vocab_size_override
                                 : static_cast<int64_t>(characters.size()) + 1;
}

void check_config(const Config& c) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("tracformer: " + what); };
  if (c.d_model < 1 || c.heads < 1 || c.d_model % c.heads != 0) {
    fail("d_model (" + std::to_string(c.d_model) + ") must be a positive multiple of heads (" +
         std::to_string(c.heads) + ")");
  }
  if (c.head_dim() % 2 != 0) {
    fail("the head dimension d_model / heads = " + std::to_string(c.head_dim()) +
         " must be even for RoPE");
  }
  if (c.layers < 1 || c.layers > 64)
    fail("layers must be in [1, 64], got " + std::to_string(c.layers));
  if (c.decoder_layers < 0 || c.decoder_layers > 64) {
    fail("decoder_layers must be in [0, 64], got " + std::to_string(c.decoder_layers));
  }
  if (c.n_max < 2) fail("n_max must be >= 2, got " + std::to_string(c.n_max));
  if (c.block_size < 2) fail("block_size must be >= 2, got " + std::to_string(c.block_size));
  if (!(c.dropout >= 0 && c.dropout < 1))
    fail("dropout must be in [0, 1), got " + std::to_string(c.dropout));
  if (c.vocab_size() < 2) fail("the vocabulary needs at least one character");
  if (c.mechanism != Mechanism::sparse && c.mechanism != Mechanism::dense &&
      c.mechanism != Mechanism::gather && c.mechanism != Mechanism::structured) {
    fail("attention '" + mechanism_name(c.mechanism) +
         "' cannot be restricted to a pattern (accepted: sparse, structured, dense, gather)");
  }
  if (c.architecture == Architecture::bert && c.objective != Mode::ac) {
    fail("bert is trained for ac (arbitrary context), not car");
  }
  if ((c.architecture == Architecture::bart || c.architecture == Architecture::ar) &&
      c.objective != Mode::car) {
    fail(architecture_name(c.architecture) +
         " conditions on the preceding tokens: its objective is car");
  }
}

void to_json(nlohmann::json& out, const Config& c) {
  out = {{"architecture", architecture_name(c.architecture)},
         {"objective", mode_name(c.objective)},
         {"characters", data::encode_utf8(c.characters)},
         {"d_model", c.d_model},
         {"heads", c.heads},
         {"layers", c.layers},
         {"decoder_layers", c.decoder_layers},
         {"n_max", c.n_max},
         {"block_size", c.block_size},
         {"dropout", c.dropout},
         {"attention", mechanism_name(c.mechanism)},
         {"init_seed", c.init_seed}};
}

void from_json(const nlohmann::json& in, Config& c) {
  c.architecture = parse_architecture(in.at("architecture").get<std::string>());
  c.objective = parse_mode(in.at("objective").get<std::string>());
  c.characters =
      data::decode_utf8(in.at("characters").get<std::string>(), "the model's vocabulary");
  c.d_model = in.at("d_model").get<int64_t>();
  c.heads = in.at("heads").get<int64_t>();
  c.layers = in.at("layers").get<int64_t>();
  c.decoder_layers = in.at("decoder_layers").get<int64_t>();
  c.n_max = in.at("n_max").get<int64_t>();
  c.block_size = in.at("block_size").get<int64_t>();
  c.dropout = in.at("dropout").get<double>();
  c.mechanism = parse_mechanism(in.at("attention").get<std::string>());
  c.init_seed = in.at("init_seed").get<uint64_t>();
}

// ---- blocks ----------------------------------------------------------------------------------

RotaryAttentionImpl::RotaryAttentionImpl(int64_t d_model, int64_t heads, Mechanism mechanism)
    : heads_(heads) {
  q_ = register_module("q", torch::nn::Linear(d_model, d_model));
  k_ = register_module("k", torch::nn::Linear(d_model, d_model));
  v_ = register_module("v", torch::nn::Linear(d_model, d_model));
  o_ = register_module("o", torch::nn::Linear(d_model, d_model));
  AttentionConfig config;
  config.mechanism = mechanism;
  config.head_dim = d_model / heads;
  attention_ = register_module("attention", Attention(config));
}

torch::Tensor RotaryAttentionImpl::query(const torch::Tensor& x, const torch::Tensor& positions) {
  const int64_t head_dim = x.size(2) / heads_;
  return apply_rope(q_(x).view({x.size(0), x.size(1), heads_, head_dim}).transpose(1, 2),
                    positions);
}

KeyValue RotaryAttentionImpl::key_value(const torch::Tensor& x, const torch::Tensor& positions) {
  const int64_t head_dim = x.size(2) / heads_;
  auto split = [&](const torch::Tensor& y) {
    return y.view({x.size(0), x.size(1), heads_, head_dim}).transpose(1, 2);
  };
  return {apply_rope(split(k_(x)), positions), split(v_(x)).contiguous()};
}

torch::Tensor RotaryAttentionImpl::attend(const torch::Tensor& q, const KeyValue& kv,
                                          const PatternBatch* pattern) {
  const torch::Tensor out = pattern != nullptr
                                ? attention_(q, kv.keys, kv.values, pattern)
                                : dense_attention(q, kv.keys, kv.values, Scaling::inverse_sqrt_dim);
  // (B, H, Q, head_dim) -> (B, Q, d)
  return o_(out.transpose(1, 2).reshape({q.size(0), q.size(2), q.size(1) * q.size(3)}));
}

torch::Tensor RotaryAttentionImpl::forward(const torch::Tensor& queries,
                                           const torch::Tensor& keys_values,
                                           const torch::Tensor& query_positions,
                                           const torch::Tensor& key_positions,
                                           const PatternBatch& pattern) {
  return attend(query(queries, query_positions), key_value(keys_values, key_positions), &pattern);
}

BlockImpl::BlockImpl(const Config& config, bool self_attention, bool cross_attention)
    : dropout_(config.dropout) {
  const int64_t d = config.d_model;
  auto norm = [d] { return torch::nn::LayerNorm(torch::nn::LayerNormOptions({d})); };
  if (self_attention) {
    self_norm_ = register_module("self_norm", norm());
    self_attention_ =
        register_module("self_attention", RotaryAttention(d, config.heads, config.mechanism));
  }
  if (cross_attention) {
    cross_norm_ = register_module("cross_norm", norm());
    memory_norm_ = register_module("memory_norm", norm());
    cross_attention_ =
        register_module("cross_attention", RotaryAttention(d, config.heads, config.mechanism));
  }
  ffn_norm_ = register_module("ffn_norm", norm());
  up_ = register_module("up", torch::nn::Linear(d, 4 * d));
  down_ = register_module("down", torch::nn::Linear(4 * d, d));
}

torch::Tensor BlockImpl::feed_forward(const torch::Tensor& x, at::Generator* generator) {
  return x + dropout(down_(torch::gelu(up_(ffn_norm_(x)))), dropout_, generator);
}

torch::Tensor BlockImpl::forward(torch::Tensor x, const Context& context) {
  if (self_attention_) {
    const torch::Tensor normed = self_norm_(x);
    x = x + dropout(self_attention_(normed, normed, context.query_positions,
                                    context.query_positions, *context.self_pattern),
                    dropout_, context.dropout);
  }
  if (cross_attention_) {
    x = x + dropout(cross_attention_(cross_norm_(x), memory_norm_(*context.memory),
                                     context.query_positions, context.memory_positions,
                                     *context.cross_pattern),
                    dropout_, context.dropout);
  }
  return feed_forward(x, context.dropout);
}

KeyValue BlockImpl::self_key_value(const torch::Tensor& x, const torch::Tensor& positions) {
  return self_attention_->key_value(self_norm_(x), positions);
}

KeyValue BlockImpl::memory_key_value(const torch::Tensor& memory, const torch::Tensor& positions) {
  return cross_attention_->key_value(memory_norm_(memory), positions);
}

torch::Tensor BlockImpl::forward_cached(torch::Tensor x, const torch::Tensor& positions,
                                        const KeyValue* self, const KeyValue* memory) {
  if (self_attention_) {
    x = x +
        self_attention_->attend(self_attention_->query(self_norm_(x), positions), *self, nullptr);
  }
  if (cross_attention_) {
    x = x + cross_attention_->attend(cross_attention_->query(cross_norm_(x), positions), *memory,
                                     nullptr);
  }
  return feed_forward(x, nullptr);
}

// ---- patterns --------------------------------------------------------------------------------

AttentionPattern decoder_union_pattern(int64_t T, int64_t num_layers, int64_t layer) {
  const AttentionPattern prefix =
      patterns::tracformer_decoder(T, num_layers, layer, patterns::Direction::prefix);
  const AttentionPattern suffix =
      patterns::tracformer_decoder(T, num_layers, layer, patterns::Direction::suffix);
  std::vector<int64_t> offsets{0}, columns;
  columns.reserve(prefix.num_entries() + suffix.num_entries());
  for (int64_t row = 0; row < T; ++row) {
    for (int64_t e = prefix.row_offsets()[row]; e < prefix.row_offsets()[row + 1]; ++e) {
      columns.push_back(prefix.col_indices()[e]);
    }
    for (int64_t e = suffix.row_offsets()[row]; e < suffix.row_offsets()[row + 1]; ++e) {
      columns.push_back(T + suffix.col_indices()[e]);
    }
    offsets.push_back(static_cast<int64_t>(columns.size()));
  }
  return AttentionPattern(T, 2 * T, std::move(offsets), std::move(columns));
}

AttentionPattern TracformerImpl::encoder_pattern(int64_t T, int64_t layer,
                                                 patterns::Direction direction) const {
  if (config_.architecture == Architecture::tracformer_dense_encoder) {
    return direction == patterns::Direction::prefix ? patterns::causal(T) : anti_causal(T);
  }
  return patterns::tracformer_encoder(T, layer, config_.n_max, direction);
}

struct TracformerImpl::Patterns {
  std::vector<PatternBatch> encoder, decoder_self, decoder_cross;
  torch::Tensor positions, memory_positions;
};

const TracformerImpl::Patterns& TracformerImpl::patterns(int64_t T, int64_t batch) {
  std::lock_guard<std::mutex> lock(patterns_mutex_);
  // Only the Tracformer encoders' patterns differ between batch elements (prefix, then suffix).
  const int64_t key_batch = has_prefix_encoder(config_.architecture) ? batch : 0;
  auto& cached = patterns_[{T, key_batch}];
  if (cached) return *cached;
  auto built = std::make_shared<Patterns>();
  built->positions = torch::arange(T, torch::kLong);
  const int64_t L = config_.layers;
  switch (config_.architecture) {
    case Architecture::tracformer:
    case Architecture::tracformer_dense_encoder: {
      for (int64_t l = 1; l <= L; ++l) {
        std::vector<AttentionPattern> per_element(
            batch, encoder_pattern(T, l, patterns::Direction::prefix));
        per_element.insert(per_element.end(), batch,
                           encoder_pattern(T, l, patterns::Direction::suffix));
        built->encoder.emplace_back(per_element);
        built->decoder_cross.emplace_back(decoder_union_pattern(T, L, l));
      }
      built->memory_positions = torch::cat({built->positions, built->positions});
      break;
    }
    case Architecture::bart:
      built->encoder.emplace_back(patterns::full(T, T));
      built->decoder_self.emplace_back(patterns::causal(T));
      built->decoder_cross.emplace_back(patterns::full(T, T));
      built->memory_positions = built->positions;
      break;
    case Architecture::bert:
      built->encoder.emplace_back(patterns::full(T, T));
      break;
    case Architecture::ar:
      built->encoder.emplace_back(patterns::causal(T));
      break;
  }
  cached = built;
  return *cached;
}

// ---- the model -------------------------------------------------------------------------------

TracformerImpl::TracformerImpl(Config config) : config_(std::move(config)) {
  check_config(config_);
  const bool bart = config_.architecture == Architecture::bart;
  {
    // Modules draw default initial weights from libtorch's generator: keep its stream untouched,
    // then draw the real ones from init_seed below.
    DefaultGeneratorGuard guard;
    embedding_ =
        register_module("embedding", torch::nn::Embedding(config_.vocab_size(), config_.d_model));
    encoder_ = register_module("encoder", torch::nn::ModuleList());
    for (int64_t l = 0; l < config_.layers; ++l) encoder_->push_back(Block(config_, true, false));
    decoder_ = register_module("decoder", torch::nn::ModuleList());
    for (int64_t l = 0; l < decoder_depth(config_); ++l) {
      decoder_->push_back(Block(config_, /*self_attention=*/bart, /*cross_attention=*/true));
    }
    final_norm_ = register_module(
        "final_norm", torch::nn::LayerNorm(torch::nn::LayerNormOptions({config_.d_model})));
  }
  // GPT-2's initialisation: N(0, 0.02) weights and embeddings, zero biases, unit LayerNorms.
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(config_.init_seed);
  torch::NoGradGuard no_grad;
  for (auto& item : named_parameters()) {
    torch::Tensor& p = item.value();
    const bool norm = item.key().find("norm") != std::string::npos;
    if (norm) continue;
    if (p.dim() >= 2) {
      p.copy_(at::normal(0.0, 0.02, p.sizes(), generator, p.options()));
    } else {
      p.zero_();
    }
  }
}

int64_t TracformerImpl::non_embedding_parameters() const {
  return train::parameter_count(*this) - embedding_->weight.numel();
}

Mode TracformerImpl::effective_mode(Mode requested) const {
  switch (config_.architecture) {
    case Architecture::bert:
      return Mode::ac;
    case Architecture::bart:
    case Architecture::ar:
      return Mode::car;
    default:
      return requested;
  }
}

torch::Tensor TracformerImpl::embed(const torch::Tensor& ids, at::Generator* generator) {
  return dropout(embedding_(ids), config_.dropout, generator);
}

torch::Tensor TracformerImpl::head(const torch::Tensor& features) {
  // Tied to the embedding; <MASK> (the last row) is never predicted.
  return torch::nn::functional::linear(final_norm_(features),
                                       embedding_->weight.narrow(0, 0, config_.vocab_size() - 1));
}

void TracformerImpl::check_inputs(const torch::Tensor& tokens, const torch::Tensor& given) const {
  if (tokens.dim() != 2 || tokens.scalar_type() != torch::kLong ||
      given.sizes() != tokens.sizes() || given.scalar_type() != torch::kBool) {
    throw std::invalid_argument(
        "Tracformer: expected (batch, T) int64 tokens and bool context, got " +
        c10::str(tokens.sizes()) + " and " + c10::str(given.sizes()));
  }
  if (tokens.size(0) < 1 || tokens.size(1) < 1)
    throw std::invalid_argument("Tracformer: empty batch");
  const int64_t largest = tokens.max().item<int64_t>();
  if (largest >= config_.vocab_size() - 1) {
    throw std::invalid_argument("Tracformer: token id " + std::to_string(largest) +
                                " is outside the vocabulary of " +
                                std::to_string(config_.vocab_size() - 1) + " characters");
  }
}

torch::Tensor TracformerImpl::forward(const torch::Tensor& tokens, const torch::Tensor& given,
                                      Mode mode, at::Generator* generator) {
  if (has_prefix_encoder(config_.architecture)) {
    return forward_visible(tokens, given, mode == Mode::car ? torch::ones_like(given) : given,
                           generator);
  }
  check_inputs(tokens, given);
  const int64_t batch = tokens.size(0), T = tokens.size(1);
  const torch::Tensor mask = torch::full_like(tokens, config_.mask_id());
  const torch::Tensor known = torch::where(tokens >= 0, tokens, mask);
  const torch::Tensor masked_input = torch::where(given, known, mask);  // x_C, <MASK> elsewhere
  // The true tokens shifted right by one, <MASK> first: position t reads x_{t-1}.
  const torch::Tensor shifted = torch::cat({mask.narrow(1, 0, 1), known.narrow(1, 0, T - 1)}, 1);
  const Patterns& p = patterns(T, batch);
  BlockImpl::Context context;
  context.query_positions = p.positions;
  context.dropout = generator;
  context.self_pattern = &p.encoder[0];
  if (config_.architecture == Architecture::bart) {
    torch::Tensor x = embed(masked_input, generator);
    for (const auto& block : *encoder_) x = block->as<Block>()->forward(x, context);
    torch::Tensor h = embed(shifted, generator);
    context.memory = &x;
    context.memory_positions = p.memory_positions;
    context.self_pattern = &p.decoder_self[0];
    context.cross_pattern = &p.decoder_cross[0];
    for (const auto& block : *decoder_) h = block->as<Block>()->forward(h, context);
    return head(h);
  }
  // bert reads the context, ar the preceding tokens.
  torch::Tensor x =
      embed(config_.architecture == Architecture::bert ? masked_input : shifted, generator);
  for (const auto& block : *encoder_) x = block->as<Block>()->forward(x, context);
  return head(x);
}

torch::Tensor TracformerImpl::forward_visible(const torch::Tensor& tokens,
                                              const torch::Tensor& given,
                                              const torch::Tensor& prefix_visible,
                                              at::Generator* generator) {
  if (!has_prefix_encoder(config_.architecture)) {
    throw std::invalid_argument("forward_visible: " + architecture_name(config_.architecture) +
                                " has no prefix encoder");
  }
  check_inputs(tokens, given);
  if (prefix_visible.sizes() != given.sizes() || prefix_visible.scalar_type() != torch::kBool) {
    throw std::invalid_argument("Tracformer: prefix_visible must be bool like the context");
  }
  const int64_t batch = tokens.size(0), T = tokens.size(1), L = config_.layers;
  const torch::Tensor mask = torch::full_like(tokens, config_.mask_id());
  const torch::Tensor known = torch::where(tokens >= 0, tokens, mask);
  const torch::Tensor suffix_input = torch::where(given, known, mask);  // x_C, <MASK> elsewhere
  const torch::Tensor prefix_input = torch::where(prefix_visible, known, mask);
  const Patterns& p = patterns(T, batch);
  BlockImpl::Context context;
  context.query_positions = p.positions;
  context.dropout = generator;
  torch::Tensor x = embed(torch::cat({prefix_input, suffix_input}, 0), generator);
  std::vector<torch::Tensor> layers;  // encoder outputs, prefix rows then suffix rows
  for (int64_t l = 0; l < L; ++l) {
    context.self_pattern = &p.encoder[l];
    x = encoder_[l]->as<Block>()->forward(x, context);
    layers.push_back(x);
  }
  torch::Tensor h = torch::zeros({batch, T, config_.d_model}, x.options());
  context.memory_positions = p.memory_positions;
  for (int64_t l = 0; l < L; ++l) {
    // Decoder layer l + 1 reads encoder layer L - l: coarse scopes first, fine last.
    const torch::Tensor& features = layers[L - 1 - l];
    const torch::Tensor memory =
        torch::cat({features.narrow(0, 0, batch), features.narrow(0, batch, batch)}, 1);
    context.memory = &memory;
    context.cross_pattern = &p.decoder_cross[l];
    h = decoder_[l]->as<Block>()->forward(h, context);
  }
  return head(h);
}

namespace {

// decode_cached's index of cache columns for each layer l and position t: the prefix encoder's
// keys (encoder_rows), and the decoder's cross-attention memory split into prefix positions
// (decoder_prefix) and suffix ones (decoder_suffix, counted from T).
struct CachedColumns {
  std::vector<std::vector<torch::Tensor>> encoder_rows, decoder_prefix, decoder_suffix;
};
CachedColumns cached_columns(const std::vector<AttentionPattern>& prefix_patterns, int64_t T,
                             torch::Device device) {
  const auto L = static_cast<int64_t>(prefix_patterns.size());
  const auto columns = [](const AttentionPattern& p, int64_t row) {
    return std::vector<int64_t>(p.col_indices().begin() + p.row_offsets()[row],
                                p.col_indices().begin() + p.row_offsets()[row + 1]);
  };
  CachedColumns c;
  c.encoder_rows.resize(L), c.decoder_prefix.resize(L), c.decoder_suffix.resize(L);
  for (int64_t l = 0; l < L; ++l) {
    const AttentionPattern cross = decoder_union_pattern(T, L, l + 1);
    for (int64_t t = 0; t < T; ++t) {
      c.encoder_rows[l].push_back(torch::tensor(columns(prefix_patterns[l], t), torch::kLong).to(device));
      std::vector<int64_t> before, after;
      for (int64_t col : columns(cross, t)) (col < T ? before : after).push_back(col < T ? col : col - T);
      c.decoder_prefix[l].push_back(torch::tensor(before, torch::kLong).to(device));
      c.decoder_suffix[l].push_back(torch::tensor(after, torch::kLong).to(device));
    }
  }
  return c;
}

KeyValue zero_cache(at::IntArrayRef sizes, const torch::TensorOptions& options) {
  return KeyValue{torch::zeros(sizes, options), torch::zeros(sizes, options)};
}

KeyValue select_columns(const KeyValue& kv, const torch::Tensor& columns) {
  return KeyValue{kv.keys.index_select(2, columns), kv.values.index_select(2, columns)};
}

// One position's keys and values (position 0 of `kv`) into the cache at t.
void store_position(KeyValue& cache, const KeyValue& kv, int64_t t) {
  cache.keys.select(2, t).copy_(kv.keys.select(2, 0));
  cache.values.select(2, t).copy_(kv.values.select(2, 0));
}

}  // namespace

torch::Tensor TracformerImpl::decode_cached(
    const torch::Tensor& tokens, const torch::Tensor& given,
    const std::function<torch::Tensor(int64_t t, const torch::Tensor& logits)>& choose) {
  if (!has_prefix_encoder(config_.architecture)) {
    throw std::invalid_argument("decode_cached: " + architecture_name(config_.architecture) +
                                " has no multi-scope encoder to cache");
  }
  check_inputs(tokens, given);
  torch::NoGradGuard no_grad;
  const int64_t batch = tokens.size(0), T = tokens.size(1), L = config_.layers;
  const int64_t heads = config_.heads, head_dim = config_.head_dim();
  const torch::Tensor mask = torch::full_like(tokens, config_.mask_id());
  torch::Tensor out = torch::where(tokens >= 0, tokens, mask);
  const auto on_device = torch::TensorOptions().device(tokens.device());
  const torch::Tensor positions = torch::arange(T, on_device.dtype(torch::kLong));
  auto block = [](torch::nn::ModuleList& list, int64_t l) { return list[l]->as<Block>(); };

  // The suffix encoder, once: its features at t' > t see only (t, T], given tokens and <MASK>.
  std::vector<KeyValue> suffix_memory(L);
  {
    BlockImpl::Context context;
    context.query_positions = positions;
    torch::Tensor x = embedding_(torch::where(given, out, mask));
    std::vector<torch::Tensor> layers;
    for (int64_t l = 1; l <= L; ++l) {
      const PatternBatch pattern(encoder_pattern(T, l, patterns::Direction::suffix));
      context.self_pattern = &pattern;
      x = block(encoder_, l - 1)->forward(x, context);
      layers.push_back(x);
    }
    for (int64_t l = 0; l < L; ++l) {
      suffix_memory[l] = block(decoder_, l)->memory_key_value(layers[L - 1 - l], positions);
    }
  }
  // Prefix caches, filled one position at a time: each encoder layer's self-attention keys and
  // values, and each decoder layer's cross-attention keys and values of its encoder layer.
  std::vector<KeyValue> encoder_cache(L), prefix_memory(L);
  std::vector<AttentionPattern> prefix_patterns;
  for (int64_t l = 0; l < L; ++l) {
    encoder_cache[l] = zero_cache({batch, heads, T, head_dim}, on_device);
    prefix_memory[l] = zero_cache({batch, heads, T, head_dim}, on_device);
    prefix_patterns.push_back(encoder_pattern(T, l + 1, patterns::Direction::prefix));
  }
  const auto [encoder_rows, decoder_prefix, decoder_suffix] =
      cached_columns(prefix_patterns, T, tokens.device());

  const torch::Tensor hidden = given.logical_not();
  for (int64_t t = 0; t < T; ++t) {
    const torch::Tensor position = positions.narrow(0, t, 1);
    const torch::Tensor rows = hidden.select(1, t);
    if (rows.any().item<bool>()) {
      torch::Tensor h = torch::zeros({batch, 1, config_.d_model}, on_device);
      for (int64_t l = 0; l < L; ++l) {
        const KeyValue before = select_columns(prefix_memory[l], decoder_prefix[l][t]);
        const KeyValue after = select_columns(suffix_memory[l], decoder_suffix[l][t]);
        const KeyValue memory{torch::cat({before.keys, after.keys}, 2),
                              torch::cat({before.values, after.values}, 2)};
        h = block(decoder_, l)->forward_cached(h, position, nullptr, &memory);
      }
      const torch::Tensor chosen = choose(t, head(h).squeeze(1));
      out.select(1, t).copy_(torch::where(rows, chosen, out.select(1, t)));
    }
    // Push x_t through the prefix encoder; decoder layers read its outputs at t from t + 1 on.
    torch::Tensor x = embedding_(out.select(1, t).unsqueeze(1));  // (B, 1, d)
    std::vector<torch::Tensor> outputs;
    for (int64_t l = 0; l < L; ++l) {
      store_position(encoder_cache[l], block(encoder_, l)->self_key_value(x, position), t);
      const KeyValue keys = select_columns(encoder_cache[l], encoder_rows[l][t]);
      x = block(encoder_, l)->forward_cached(x, position, &keys, nullptr);
      outputs.push_back(x);
    }
    for (int64_t l = 0; l < L; ++l) {
      store_position(prefix_memory[l], block(decoder_, l)->memory_key_value(outputs[L - 1 - l], position),
            t);
    }
  }
  // Given characters outside the vocabulary stay -1, as they came.
  return torch::where(hidden | (tokens >= 0), out, tokens);
}

// ---- model files -----------------------------------------------------------------------------

void save_model(const std::string& path, Tracformer& model, nlohmann::json metadata) {
  train::save_configured_model(path, "tracformer", model, std::move(metadata));
}

Tracformer load_model(const std::string& path, nlohmann::json* metadata) {
  return train::load_configured_model<Tracformer>(path, "tracformer", metadata);
}

}  // namespace structdiff::tracformer
