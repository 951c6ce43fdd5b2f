// The structured UNN parser: one iteration is the biaffine scorer over the encoder's rows, later
// iterations never raise the energy (sequential order), Jacobi updates H and M together, it learns
// a small synthetic treebank in CI time; model files and bad input.
#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "structdiff/treebank.h"
#include "structdiff/unn_parser.h"
#include "support/expect_throw.h"
#include "support/modules.h"
#include "support/temporary_files.h"

namespace unn = structdiff::unn;
namespace data = structdiff::data;

namespace {

data::Treebank small_bank() {
  data::TreebankOptions options;
  options.train_sentences = 600;
  options.dev_sentences = 100;
  options.test_sentences = 50;
  options.max_words = 20;
  return data::generate_treebank(options);
}

unn::ParserConfig small_config(const data::Treebank& bank, int64_t iterations) {
  unn::ParserConfig config;
  config.vocabulary = static_cast<int64_t>(bank.vocabulary.size());
  config.max_words = 20;
  config.embedding = 16;
  config.lstm_hidden = 16;
  config.lstm_layers = 1;
  config.arc_features = 16;
  config.iterations = iterations;
  return config;
}

data::TreebankBatch first(const std::vector<data::Sentence>& sentences, int64_t count) {
  std::vector<int64_t> index;
  for (int64_t i = 0; i < count; ++i) index.push_back(i);
  return data::make_batch(sentences, index);
}

}  // namespace

TEST(UnnParser, OneIterationIsTheBiaffineScorer) {
  const data::Treebank bank = small_bank();
  unn::UnnParser model(small_config(bank, 1));
  model->to(torch::kDouble);
  model->eval();
  const data::TreebankBatch batch = first(bank.dev, 4);
  const unn::InferenceResult result = model->parse(batch, 1);
  EXPECT_EQ(result.updates.at(0), (std::vector<std::string>{"H", "M", "Y"}));
  unn::Graph& g = model->network()->graph();
  const torch::Tensor wh = g->factors()[0]->as<unn::LinearFactorImpl>()->weight;
  const torch::Tensor wm = g->factors()[1]->as<unn::LinearFactorImpl>()->weight;
  const torch::Tensor v = g->factors()[2]->as<unn::BiaffineFactorImpl>()->weight;
  const torch::Tensor h = torch::relu(torch::matmul(result.state.at("Xh"), wh.t()) + g->bias("H"));
  const torch::Tensor m = torch::relu(torch::matmul(result.state.at("Xm"), wm.t()) + g->bias("M"));
  const torch::Tensor scores = torch::matmul(torch::matmul(h, v), m.transpose(1, 2));
  EXPECT_TRUE(torch::allclose(result.preactivation.at("Y"), scores, 1e-12, 1e-12));
  // Marginals only on real arcs, each real column a distribution over heads.
  const torch::Tensor y = result.state.at("Y");
  EXPECT_NEAR(y[0].sum().item<double>(), static_cast<double>(batch.lengths[0].item<int64_t>()),
              1e-9);
}

TEST(UnnParser, IterationsNeverRaiseTheEnergy) {
  const data::Treebank bank = small_bank();
  unn::ParserConfig config = small_config(bank, 3);
  unn::UnnParser model(config);
  model->to(torch::kDouble);
  {
    torch::NoGradGuard
        no_grad;  // larger arc weights than the initial N(0, 0.01): iterating matters
    model->network()->graph()->factors()[2]->as<unn::BiaffineFactorImpl>()->weight.normal_(0, 0.3);
  }
  const data::TreebankBatch batch = first(bank.dev, 3);
  const unn::InferenceResult result = model->parse(batch, 3, nullptr, true);
  const std::vector<double>& energy = result.energy;
  ASSERT_EQ(energy.size(), 10u);
  for (size_t i = 1; i < energy.size(); ++i) {
    if (std::isinf(energy[i - 1])) continue;
    EXPECT_LE(energy[i], energy[i - 1] + 1e-9 * std::abs(energy[i - 1])) << i;
  }
  config.jacobi = true;
  unn::UnnParser jacobi(config);
  EXPECT_EQ(jacobi->parse(batch, 2).updates.at(1),
            (std::vector<std::string>{"H", "M", "Y"}));
}

TEST(UnnParser, LearnsASmallTreebank) {
  const data::Treebank bank = small_bank();
  unn::UnnParser model(small_config(bank, 2));
  const double before = unn::evaluate_parser(model, bank.dev, 2).uas();
  unn::ParserTraining options;
  options.batch_size = 32;
  options.loop.steps = 80;
  options.loop.learning_rate = 5e-3;
  options.loop.ema_decay = 0;
  options.loop.clip_norm = 5;
  options.loop.validate_every = 40;
  options.loop.show_progress = false;
  const unn::ParserTrainingResult result = unn::train_parser(model, bank, options);
  EXPECT_GT(result.best_dev_uas, before + 0.2) << "from " << before;
  EXPECT_DOUBLE_EQ(unn::evaluate_parser(model, bank.dev, 2).uas(), result.best_dev_uas);
}

// Train 6 steps straight, or 3, stop, and resume to 6 from the checkpoint: the same weights, to
// the bit (dropout draws from the loop's generator, which the checkpoint carries).
TEST(UnnParser, ResumedTrainingIsBitExact) {
  const data::Treebank bank = small_bank();
  TemporaryDirectory scratch;
  unn::ParserTraining options;
  options.batch_size = 16;
  options.loop.steps = 6;
  options.loop.validate_every = 2;
  options.loop.show_progress = false;
  unn::UnnParser straight(small_config(bank, 2));
  unn::train_parser(straight, bank, options);

  unn::UnnParser interrupted(small_config(bank, 2));
  options.loop.checkpoint_path = scratch.file("run.pt");
  options.loop.checkpoint_every = 1;
  options.loop.steps = 3;
  unn::train_parser(interrupted, bank, options);
  unn::UnnParser resumed(small_config(bank, 2));
  options.loop.steps = 6;
  options.loop.resume = true;
  unn::train_parser(resumed, bank, options);
  expect_identical(*straight, *resumed);
}

TEST(UnnParser, ModelFileRoundTripAndBadInput) {
  const data::Treebank bank = small_bank();
  TemporaryDirectory scratch;
  unn::UnnParser model(small_config(bank, 2));
  unn::save_parser(scratch.file("p.pt"), model, {{"treebank_seed", 1}});
  unn::UnnParser loaded = unn::load_parser(scratch.file("p.pt"));
  expect_identical(*model, *loaded);
  unn::ParserConfig config = small_config(bank, 0);
  EXPECT_THROW_WITH(unn::UnnParser{config}, std::invalid_argument, "iterations must be in 1..64");
  data::TreebankBatch batch = first(bank.dev, 2);
  batch.lengths = batch.lengths * 0;
  EXPECT_THROW_WITH(model->parse(batch, 1), std::invalid_argument,
                    "sentence lengths must be in 1..the padded width");
  const auto words = [](int64_t width, int64_t id) {
    data::TreebankBatch b;
    b.words = torch::full({1, width}, id, torch::kLong);
    b.lengths = torch::full({1}, width, torch::kLong);
    return b;
  };
  EXPECT_THROW_WITH(model->parse(words(3, 100000), 1), std::invalid_argument,
                    "word ids must be in 0..");
  EXPECT_THROW_WITH(model->parse(words(30, 2), 1), std::invalid_argument,
                    "words must be (batch, at most 20)");
  config = small_config(bank, 1);
  config.character_embedding = 4;
  unn::UnnParser reads_characters(config);
  EXPECT_THROW_WITH(reads_characters->parse(words(3, 2), 1), std::invalid_argument,
                    "this parser reads characters: the batch needs the sentences' forms");
  unn::ParserTraining options;
  options.min_words = 21;
  EXPECT_THROW_WITH(unn::train_parser(model, bank, options), std::invalid_argument,
                    "training needs dev sentences and training sentences of 21..20 words");
  options.min_words = 1;
  options.word_dropout = 1;
  EXPECT_THROW_WITH(unn::train_parser(model, bank, options), std::invalid_argument,
                    "word dropout must be in [0, 1), got 1");
}

// A sentence's arc scores depend neither on what it is batched with nor on the model's padded
// width: the LSTM reads each sentence packed, so its backward direction starts at the sentence's
// own last word, not at padding.
TEST(UnnParser, ArcScoresDoNotDependOnTheBatchsPadding) {
  std::vector<data::Sentence> sentences(2);
  sentences[0].words = {3, 4, 5};
  sentences[0].heads = {2, 0, 2};
  sentences[0].forms = {"a", "bb", "\xc3\xa9t\xc3\xa9"};
  sentences[1].words = {3, 4, 5, 6, 7, 8, 9};
  sentences[1].heads = {2, 0, 2, 3, 4, 5, 6};
  sentences[1].forms = {"a", "bb", "c", "d", "e", "f", "averyveryverylongword"};
  for (auto& s : sentences) s.categories.assign(s.words.size(), 0);
  unn::ParserConfig config;
  config.vocabulary = 10;
  config.max_words = 8;
  config.embedding = 6;
  config.character_embedding = 4;
  config.character_filters = 5;
  config.lstm_hidden = 5;
  config.arc_features = 4;
  unn::UnnParser model(config);
  config.max_words = 12;
  unn::UnnParser wider(config);
  {
    torch::NoGradGuard no_grad;
    const auto from = model->named_parameters();
    for (auto& p : wider->named_parameters()) p.value().copy_(from[p.key()]);
  }
  for (unn::UnnParser* m : {&model, &wider}) {
    (*m)->to(torch::kDouble);
    (*m)->eval();
  }
  const torch::Tensor alone = model->parse(data::make_batch(sentences, {0}), 2).preactivation.at("Y");
  const torch::Tensor together =
      wider->parse(data::make_batch(sentences, {0, 1}), 2).preactivation.at("Y");
  EXPECT_TRUE(torch::allclose(alone[0].narrow(0, 0, 4).narrow(1, 0, 3),
                              together[0].narrow(0, 0, 4).narrow(1, 0, 3), 1e-12, 1e-12));
}