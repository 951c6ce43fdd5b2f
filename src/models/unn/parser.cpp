// The structured UNN parser: encoder, graph (H, M relu; Y tree marginals; biaffine factor),
// training with the tree-CRF loss on the one loop, evaluation with single-root decoding.
#include "structdiff/unn_parser.h"

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include <cmath>
#include <stdexcept>

#include "structdiff/best_weights.h"
#include "structdiff/model_file.h"
#include "structdiff/runtime.h"

namespace structdiff::unn {
namespace {

void require(bool condition, const std::string& message) {
  if (!condition) throw std::invalid_argument(message);
}

Graph build_graph(const ParserConfig& config, at::Generator& generator) {
  const int64_t n = config.max_words, r = 2 * config.lstm_hidden, d = config.arc_features;
  Graph graph;
  graph->add_variable({"Xh", {n + 1, r}, Activation::identity, 1.0, {}}, generator);
  graph->add_variable({"Xm", {n, r}, Activation::identity, 1.0, {}}, generator);
  graph->add_variable({"H", {n + 1, d}, Activation::relu, 1.0, {d}}, generator, r);
  graph->add_variable({"M", {n, d}, Activation::relu, 1.0, {d}}, generator, r);
  graph->add_variable({"Y", {n + 1, n}, Activation::tree, 1.0, {}}, generator);
  graph->add_factor(LinearFactor("Xh", "H", r, d, generator, torch::Tensor(), /*rows=*/true));
  graph->add_factor(LinearFactor("Xm", "M", r, d, generator, torch::Tensor(), /*rows=*/true));
  graph->add_factor(BiaffineFactor("Y", "H", "M", d, generator));
  return graph;
}

// Which arcs exist: head h in 0..length, modifier m in 1..length, h != m; (B, n + 1, n).
torch::Tensor arc_support(const torch::Tensor& lengths, int64_t n) {
  const torch::Tensor heads = torch::arange(n + 1).view({1, n + 1, 1});
  const torch::Tensor modifiers = torch::arange(1, n + 1).view({1, 1, n});
  const torch::Tensor length = lengths.view({-1, 1, 1});
  return heads.le(length).logical_and(modifiers.le(length)).logical_and(heads.ne(modifiers));
}

}  // namespace

void check_config(const ParserConfig& c) {
  require(c.vocabulary >= 3,
          "the parser needs a vocabulary of at least 3 ids, got " + std::to_string(c.vocabulary));
  require(c.max_words >= 1 && c.max_words <= 512,
          "max_words must be in 1..512, got " + std::to_string(c.max_words));
  require(c.embedding >= 1 && c.lstm_hidden >= 1 && c.lstm_layers >= 1 && c.arc_features >= 1,
          "embedding, lstm_hidden, lstm_layers and arc_features must be >= 1");
  require(c.iterations >= 1 && c.iterations <= 64,
          "iterations must be in 1..64, got " + std::to_string(c.iterations));
  require(c.dropout >= 0 && c.dropout < 1,
          "dropout must be in [0, 1), got " + std::to_string(c.dropout));
  require(c.encoder_dropout >= 0 && c.encoder_dropout < 1,
          "encoder_dropout must be in [0, 1), got " + std::to_string(c.encoder_dropout));
  require(c.character_embedding >= 0 && c.character_filters >= 1,
          "character_embedding must be >= 0 and character_filters >= 1");
}

void to_json(nlohmann::json& out, const ParserConfig& c) {
  out = {{"vocabulary", c.vocabulary},   {"max_words", c.max_words},
         {"embedding", c.embedding},     {"lstm_hidden", c.lstm_hidden},
         {"lstm_layers", c.lstm_layers}, {"arc_features", c.arc_features},
         {"iterations", c.iterations},   {"jacobi", c.jacobi},
         {"dropout", c.dropout},         {"init_seed", c.init_seed},
         {"character_embedding", c.character_embedding},
         {"character_filters", c.character_filters},
         {"encoder_dropout", c.encoder_dropout}};
}

void from_json(const nlohmann::json& in, ParserConfig& c) {
  c.vocabulary = in.at("vocabulary").get<int64_t>();
  c.max_words = in.at("max_words").get<int64_t>();
  c.embedding = in.at("embedding").get<int64_t>();
  c.lstm_hidden = in.at("lstm_hidden").get<int64_t>();
  c.lstm_layers = in.at("lstm_layers").get<int64_t>();
  c.arc_features = in.at("arc_features").get<int64_t>();
  c.iterations = in.at("iterations").get<int64_t>();
  c.jacobi = in.at("jacobi").get<bool>();
  c.dropout = in.at("dropout").get<double>();
  c.init_seed = in.at("init_seed").get<uint64_t>();
  // Files written before the character CNN and the encoder dropout have neither.
  c.character_embedding = in.value("character_embedding", int64_t{0});
  c.character_filters = in.value("character_filters", int64_t{100});
  c.encoder_dropout = in.value("encoder_dropout", 0.0);
}

UnnParserImpl::UnnParserImpl(ParserConfig config) : config_(std::move(config)) {
  check_config(config_);
  {
    // The encoder's layers draw libtorch's default initial weights; the caller's stream stays.
    DefaultGeneratorGuard initial_weights(config_.init_seed);
    embedding_ = register_module(
        "embedding",
        torch::nn::Embedding(torch::nn::EmbeddingOptions(config_.vocabulary, config_.embedding)
                                 .padding_idx(data::kTreebankPad)));
    int64_t lstm_input = config_.embedding;
    if (config_.character_embedding > 0) {
      character_embedding_ = register_module(
          "character_embedding",
          torch::nn::Embedding(torch::nn::EmbeddingOptions(257, config_.character_embedding)
                                   .padding_idx(0)));
      character_filters_ = register_module(
          "character_filters",
          torch::nn::Conv1d(torch::nn::Conv1dOptions(config_.character_embedding,
                                                     config_.character_filters, 3)
                                .padding(1)));
      lstm_input += config_.character_filters;
    }
    lstm_ = register_module(
        "lstm", torch::nn::LSTM(torch::nn::LSTMOptions(lstm_input, config_.lstm_hidden)
                                    .num_layers(config_.lstm_layers)
                                    .bidirectional(true)
                                    .batch_first(true)));
  }
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(config_.init_seed + 1);
  root_ =
      register_parameter("root", torch::empty({2 * config_.lstm_hidden}).normal_(0, 1, generator));
  network_ = register_module("network",
                             Network([&](int64_t) { return build_graph(config_, generator); }, 1));
}

namespace {

// Inverted dropout with masks drawn from `generator`, so that a resumed run draws the same ones.
torch::Tensor drop(const torch::Tensor& x, double p, at::Generator* generator) {
  if (generator == nullptr || p == 0) return x;
  return x * torch::empty_like(x).bernoulli_(1 - p, *generator) / (1 - p);
}

}  // namespace

InferenceResult UnnParserImpl::parse(const data::TreebankBatch& batch, int64_t iterations,
                                     at::Generator* dropout, bool record_energy) {
  const int64_t n = config_.max_words;
  const torch::Tensor& words = batch.words;
  const torch::Tensor& lengths = batch.lengths;
  require(words.dim() == 2 && words.size(1) <= n && words.size(0) == lengths.numel(),
          "words must be (batch, at most " + std::to_string(n) + ") with one length per sentence");
  require(lengths.min().item<int64_t>() >= 1 && lengths.max().item<int64_t>() <= words.size(1),
          "sentence lengths must be in 1..the padded width");
  require(words.min().item<int64_t>() >= 0 && words.max().item<int64_t>() < config_.vocabulary,
          "word ids must be in 0.." + std::to_string(config_.vocabulary - 1));
  const int64_t batch_size = words.size(0), width = words.size(1);
  torch::Tensor input = embedding_->forward(words);
  if (config_.character_embedding > 0) {
    require(batch.characters.defined() && batch.characters.dim() == 3 &&
                batch.characters.size(0) == batch_size && batch.characters.size(1) == width,
            "this parser reads characters: the batch needs the sentences' forms");
    const torch::Tensor bytes = batch.characters.reshape({batch_size * width, -1});
    const torch::Tensor filtered =
        character_filters_->forward(character_embedding_->forward(bytes).transpose(1, 2));
    input = torch::cat(
        {input, std::get<0>(filtered.max(2)).view({batch_size, width, config_.character_filters})},
        2);
  }
  input = drop(input, config_.encoder_dropout, dropout);
  // Packed, so that the backward direction starts at each sentence's last word, not at padding.
  const auto packed = torch::nn::utils::rnn::pack_padded_sequence(input, lengths, true, false);
  torch::Tensor encoded = std::get<0>(torch::nn::utils::rnn::pad_packed_sequence(
      std::get<0>(lstm_->forward_with_packed_input(packed)), true, 0.0, width));
  encoded = torch::constant_pad_nd(drop(encoded, config_.encoder_dropout, dropout),
                                   {0, 0, 0, n - width}, 0);
  const torch::Tensor rows =
      torch::cat({root_.view({1, 1, -1}).expand({batch_size, 1, root_.size(0)}), encoded}, 1);
  InferenceOptions options;
  options.iterations = iterations;
  options.observed = {{"Xh", rows}, {"Xm", encoded}};
  options.support["Y"] = arc_support(lengths, n);
  if (config_.jacobi) {
    options.schedule = Schedule::jacobi;
    options.then = {"Y"};
  }
  if (dropout != nullptr && config_.dropout > 0) {
    options.dropout = {{"H", config_.dropout}, {"M", config_.dropout}};
    options.generator = dropout;
  }
  options.record_energy = record_energy;
  return network_->infer(options);
}

ParseScores evaluate_parser(UnnParser& model, const std::vector<data::Sentence>& sentences,
                            int64_t iterations) {
  torch::NoGradGuard no_grad;
  model->eval();
  require(!sentences.empty(), "no sentences to parse");
  ParseScores scores{};
  for (size_t first = 0; first < sentences.size(); first += 256) {
    std::vector<int64_t> index;
    for (size_t i = first; i < std::min(sentences.size(), first + 256); ++i) {
      index.push_back(static_cast<int64_t>(i));
    }
    const data::TreebankBatch batch = data::make_batch(sentences, index);
    const torch::Tensor theta = model->parse(batch, iterations).preactivation.at("Y");
    const int64_t width = batch.words.size(1);
    const torch::Tensor trimmed = theta.narrow(1, 0, width + 1).narrow(2, 0, width);
    scores += score_parses(max_spanning_tree(trimmed, batch.lengths), batch.heads, batch.lengths);
  }
  return scores;
}

ParserTrainingResult train_parser(UnnParser& model, const data::Treebank& bank,
                                  const ParserTraining& options) {
  const ParserConfig& config = model->config();
  require(options.batch_size >= 1, "batch size must be >= 1");
  require(options.word_dropout >= 0 && options.word_dropout < 1,
          "word dropout must be in [0, 1), got " + std::to_string(options.word_dropout));
  std::vector<int64_t> kept;  // indices into bank.train of the sentences trained on
  for (size_t i = 0; i < bank.train.size(); ++i) {
    const int64_t length = bank.train[i].size();
    if (length >= options.min_words && length <= config.max_words) {
      kept.push_back(static_cast<int64_t>(i));
    }
  }
  const int64_t n = static_cast<int64_t>(kept.size());
  require(n > 0 && !bank.dev.empty(),
          "training needs dev sentences and training sentences of " +
              std::to_string(options.min_words) + ".." + std::to_string(config.max_words) +
              " words");
  const int64_t batches = (n + options.batch_size - 1) / options.batch_size;
  UnnParser evaluated{nullptr};
  train::BestWeights best{nullptr};
  {
    DefaultGeneratorGuard guard;
    evaluated = UnnParser(config);
    best = train::BestWeights(UnnParser(config).ptr());
  }
  train::LoopTask task;
  task.model = model.ptr().get();
  task.ema_model = evaluated.ptr().get();
  nlohmann::json config_json = config;
  task.metadata = {
      {"kind", "unn-parser-run"}, {"config", config_json}, {"batch_size", options.batch_size}};
  task.loss = [&](int64_t step, std::mt19937_64&, at::Generator& noise) {
    const int64_t first = (step % batches) * options.batch_size;
    const torch::Tensor order = train::epoch_order(n, options.seed, step / batches)
                                    .narrow(0, first, std::min(options.batch_size, n - first));
    std::vector<int64_t> index;
    for (int64_t i = 0; i < order.numel(); ++i) {
      index.push_back(kept[static_cast<size_t>(order.data_ptr<int64_t>()[i])]);
    }
    data::TreebankBatch batch = data::make_batch(bank.train, index);
    if (options.word_dropout > 0) {
      const torch::Tensor dropped = torch::empty(batch.words.sizes(), torch::kDouble)
                                        .bernoulli_(options.word_dropout, noise)
                                        .to(torch::kBool)
                                        .logical_and(batch.words.ne(data::kTreebankPad));
      batch.words = batch.words.masked_fill(dropped, data::kTreebankUnknown);
    }
    const torch::Tensor theta =
        model->parse(batch, config.iterations, &noise).preactivation.at("Y");
    const int64_t width = batch.words.size(1);
    const torch::Tensor trimmed = theta.narrow(1, 0, width + 1).narrow(2, 0, width);
    return -tree_log_likelihood(trimmed, batch.heads, batch.lengths).mean().to(theta.dtype());
  };
  train::LoopOptions loop = options.loop;
  if (loop.validate_every == 0) loop.validate_every = batches;
  const train::LoopResult trained = train::run_training_keeping_best(
      task, loop, options.seed,
      [&] { return evaluate_parser(evaluated, bank.dev, config.iterations).uas(); }, "uas", best);
  ParserTrainingResult result;
  result.steps = trained.steps_done;
  result.seconds = trained.seconds;
  result.best_step = best->step();
  result.best_dev_uas = best->score();
  return result;
}

void save_parser(const std::string& path, UnnParser& model, nlohmann::json metadata) {
  train::save_configured_model(path, "unn-parser", model, std::move(metadata));
}

UnnParser load_parser(const std::string& path, nlohmann::json* metadata) {
  return train::load_configured_model<UnnParser>(path, "unn-parser", metadata);
}

}  // namespace structdiff::unn
