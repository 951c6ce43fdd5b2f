// Tracformer and its same-block baselines: RoPE, parameter count, no leakage, normalised CAR
// likelihoods, sparse = dense, training, exact resume, model files, sampling, bad input.
#include <cmath>
#include <fstream>
#include <limits>
#include <random>
#include <string>

#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/rope.h"
#include "structdiff/tracformer_runs.h"
#include "structdiff/training_loop.h"
#include "support/expect_throw.h"
#include "support/gradcheck.h"
#include "support/modules.h"
#include "support/temporary_files.h"

namespace structdiff::tracformer {
namespace {

// ---- RoPE ----------------------------------------------------------------------------------

TEST(Rope, MatchesTheRotationMatrix) {
  torch::manual_seed(0);
  const int64_t dim = 8, half = dim / 2;
  const torch::Tensor x = torch::randn({2, 3, 5, dim}, torch::kDouble);
  const torch::Tensor positions = torch::tensor({0, 1, 7, 100, 12345}, torch::kLong);
  const torch::Tensor rotated = apply_rope(x, positions);
  for (int64_t t = 0; t < 5; ++t) {
    const double m = positions[t].item<double>();
    for (int64_t i = 0; i < half; ++i) {
      const double angle = m * std::pow(kRopeBase, -2.0 * i / dim);
      const torch::Tensor a = x.select(2, t).select(2, i), b = x.select(2, t).select(2, i + half);
      EXPECT_TRUE(torch::allclose(rotated.select(2, t).select(2, i),
                                  a * std::cos(angle) - b * std::sin(angle), 1e-12, 1e-12));
      EXPECT_TRUE(torch::allclose(rotated.select(2, t).select(2, i + half),
                                  b * std::cos(angle) + a * std::sin(angle), 1e-12, 1e-12));
    }
  }
}

TEST(Rope, ScoresDependOnlyOnTheOffset) {
  torch::manual_seed(1);
  const torch::Tensor q = torch::randn({1, 1, 1, 16}, torch::kDouble);
  const torch::Tensor k = torch::randn({1, 1, 1, 16}, torch::kDouble);
  auto score = [&](int64_t m, int64_t n) {
    return (apply_rope(q, torch::tensor({m})) * apply_rope(k, torch::tensor({n})))
        .sum()
        .item<double>();
  };
  EXPECT_NEAR(score(3, 10), score(103, 110), 1e-10);
  EXPECT_NEAR(score(10, 3), score(500, 493), 1e-10);
  EXPECT_GT(std::abs(score(3, 10) - score(10, 3)), 1e-6);  // the sign of the offset matters
}

TEST(Rope, PerElementPositionsAndBadShapes) {
  const torch::Tensor x = torch::randn({2, 1, 3, 4});
  const torch::Tensor per_element = apply_rope(x, torch::tensor({{0, 1, 2}, {5, 6, 7}}));
  EXPECT_TRUE(torch::allclose(per_element.narrow(0, 1, 1),
                              apply_rope(x.narrow(0, 1, 1), torch::tensor({5, 6, 7}))));
  EXPECT_THROW_WITH(apply_rope(torch::randn({1, 1, 3, 5}), torch::arange(3)), std::invalid_argument,
                    "even head_dim");
  EXPECT_THROW_WITH(apply_rope(x, torch::arange(4)), std::invalid_argument,
                    "positions must be (3)");
}

// The fused CPU rotation's own backward, by central differences: shared and per-element
// positions, on a transposed (strided) input as the attention modules pass it.
TEST(Rope, GradientsMatchFiniteDifferences) {
  torch::manual_seed(2);
  const torch::Tensor x = torch::randn({2, 4, 3, 6}, torch::kDouble);  // (batch, tokens, heads, dim)
  for (const torch::Tensor& positions :
       {torch::tensor({0, 5, 1000, 7}), torch::tensor({{0, 1, 2, 3}, {9, 8, 7, 6}})}) {
    EXPECT_EQ(testing::check_gradients(
                  [&](const std::vector<torch::Tensor>& in) {
                    return apply_rope(in[0].transpose(1, 2), positions);
                  },
                  {x}),
              "")
        << positions;
  }
}

// float32 through the fused rotation against the float64 one, on a strided input.
TEST(Rope, Float32MatchesFloat64) {
  torch::manual_seed(3);
  const torch::Tensor x = torch::randn({2, 7, 3, 32}, torch::kDouble).transpose(1, 2);
  const torch::Tensor positions = torch::arange(100, 107);
  const torch::Tensor exact = apply_rope(x, positions);
  const torch::Tensor single = apply_rope(x.to(torch::kFloat), positions);
  EXPECT_TRUE(single.is_contiguous());
  EXPECT_LT((single.to(torch::kDouble) - exact).abs().max().item<double>(), 1e-5);
}

// ---- configuration ---------------------------------------------------------------------------

Config tiny(Architecture architecture, int64_t T = 16) {
  Config config;
  config.architecture = architecture;
  config.objective = architecture == Architecture::bert ? Mode::ac : Mode::car;
  config.characters = U"abcdefgh";
  config.d_model = 16;
  config.heads = 2;
  config.layers = 4;
  config.n_max = 3;
  config.block_size = T;
  config.dropout = 0.0;
  config.init_seed = 3;
  return config;
}

TEST(TracformerConfig, PaperConfigurationHasTableThreesParameterCount) {
  Config config;
  config.d_model = 576;
  config.heads = 9;
  config.layers = 10;
  config.n_max = 16;
  config.block_size = 1024;
  config.vocab_size_override = 50258;  // GPT-2's BPE and <MASK>
  Tracformer model(config);
  EXPECT_EQ(model->non_embedding_parameters(), 79788672);  // 79.79 M (paper: 79 M)
  int64_t total = 0;
  for (const auto& p : model->parameters()) total += p.numel();
  EXPECT_EQ(total, 108737280);  // 108.74 M (paper: 109 M), head tied to the embedding
}

TEST(TracformerConfig, BadConfigurationsNameTheField) {
  Config config = tiny(Architecture::tracformer);
  config.heads = 3;
  EXPECT_THROW_WITH(Tracformer{config}, std::invalid_argument, "multiple of heads");
  config = tiny(Architecture::tracformer);
  config.d_model = 6;
  config.heads = 2;
  EXPECT_THROW_WITH(Tracformer{config}, std::invalid_argument, "must be even for RoPE");
  config = tiny(Architecture::tracformer);
  config.mechanism = Mechanism::favor_softmax;
  EXPECT_THROW_WITH(Tracformer{config}, std::invalid_argument, "cannot be restricted to a pattern");
  config = tiny(Architecture::bert);
  config.objective = Mode::car;
  EXPECT_THROW_WITH(Tracformer{config}, std::invalid_argument, "bert is trained for ac");
  config = tiny(Architecture::tracformer);
  config.dropout = 1.0;
  EXPECT_THROW_WITH(Tracformer{config}, std::invalid_argument, "dropout must be in [0, 1)");
  EXPECT_THROW_WITH(parse_architecture("gpt"), std::invalid_argument,
                    "unknown architecture 'gpt' (choose tracformer, tracformer-dense-encoder, bart, bert or ar)");
}

TEST(TracformerConfig, JsonRoundTrip) {
  Config config = tiny(Architecture::bart);
  config.characters = U"aé日";
  const nlohmann::json json = config;
  const Config back = json.get<Config>();
  EXPECT_EQ(back.characters, config.characters);
  EXPECT_EQ(back.architecture, Architecture::bart);
  EXPECT_EQ(nlohmann::json(back), json);
}

// ---- no leakage ------------------------------------------------------------------------------

// Whether the prediction at t may depend on the token at s.
bool may_depend(Architecture architecture, Mode mode, const torch::Tensor& given, int64_t t,
                int64_t s) {
  const bool in_context = given[s].item<bool>();
  // A given position's own prediction (never scored) sees itself in the bidirectional encoders.
  if (s == t) {
    return in_context && (architecture == Architecture::bart || architecture == Architecture::bert);
  }
  switch (architecture) {
    case Architecture::ar:
      return s < t;
    case Architecture::bert:
      return in_context;
    case Architecture::bart:
      return s < t || in_context;
    default:
      return mode == Mode::car ? s < t || in_context : in_context;
  }
}

void expect_no_leakage(Architecture architecture, Mode mode) {
  const int64_t T = 16;
  Tracformer model(tiny(architecture, T));
  model->eval();
  torch::NoGradGuard no_grad;
  torch::manual_seed(11);
  const torch::Tensor tokens = torch::randint(8, {1, T}, torch::kLong);
  const torch::Tensor given = torch::rand({1, T}) < 0.4;
  const torch::Tensor base = model->forward(tokens, given, mode);
  for (int64_t s = 0; s < T; ++s) {
    torch::Tensor changed = tokens.clone();
    changed[0][s] = (tokens[0][s].item<int64_t>() + 3) % 8;
    const torch::Tensor out = model->forward(changed, given, mode);
    for (int64_t t = 0; t < T; ++t) {
      const bool same = torch::equal(out[0][t], base[0][t]);
      EXPECT_EQ(same, !may_depend(architecture, mode, given[0], t, s))
          << architecture_name(architecture) << " " << mode_name(mode) << ": output " << t
          << (same ? " ignores" : " depends on") << " input " << s
          << (given[0][s].item<bool>() ? " (given)" : " (hidden)");
    }
  }
}

TEST(TracformerLeakage, CarSeesOnlyThePastAndTheContext) {
  expect_no_leakage(Architecture::tracformer, Mode::car);
  expect_no_leakage(Architecture::tracformer_dense_encoder, Mode::car);
  expect_no_leakage(Architecture::bart, Mode::car);
}

TEST(TracformerLeakage, AcSeesOnlyTheContext) {
  expect_no_leakage(Architecture::tracformer, Mode::ac);
  expect_no_leakage(Architecture::tracformer_dense_encoder, Mode::ac);
  expect_no_leakage(Architecture::bert, Mode::ac);
}

TEST(TracformerLeakage, ArSeesOnlyThePast) { expect_no_leakage(Architecture::ar, Mode::car); }

// ---- likelihoods -----------------------------------------------------------------------------

// exp(log Pr(x_R | x_C)) summed over every completion of the hidden positions is 1.
void expect_normalised(Architecture architecture) {
  Config config = tiny(architecture, 5);
  config.characters = U"ab";
  Tracformer model(config);
  const torch::Tensor given = torch::tensor({false, true, false, false, true}).unsqueeze(0);
  const int64_t completions = 8;  // 2^3 hidden positions
  torch::Tensor tokens = torch::zeros({completions, 5}, torch::kLong);
  for (int64_t c = 0; c < completions; ++c) {
    tokens[c][0] = c & 1;
    tokens[c][2] = (c >> 1) & 1;
    tokens[c][3] = (c >> 2) & 1;
    tokens[c][1] = 1;
    tokens[c][4] = 0;
  }
  const torch::Tensor log_likelihood =
      chain_rule_log_likelihood(model, {tokens, given.expand({completions, 5}).clone()});
  EXPECT_NEAR(log_likelihood.exp().sum().item<double>(), 1.0, 1e-5)
      << architecture_name(architecture);
}

TEST(TracformerLikelihood, ChainRuleIsNormalised) {
  for (Architecture a : {Architecture::tracformer, Architecture::tracformer_dense_encoder,
                         Architecture::bart, Architecture::bert, Architecture::ar}) {
    expect_normalised(a);
  }
}

TEST(TracformerLikelihood, SparseEqualsDenseAndGather) {
  Config config = tiny(Architecture::tracformer, 24);
  Tracformer sparse(config);
  config.mechanism = Mechanism::dense;
  Tracformer dense(config);
  config.mechanism = Mechanism::gather;
  Tracformer gather(config);
  const torch::Tensor tokens = torch::randint(8, {3, 24}, torch::kLong);
  const torch::Tensor given = torch::rand({3, 24}) < 0.5;
  for (Mode mode : {Mode::car, Mode::ac}) {
    const torch::Tensor reference = dense->forward(tokens, given, mode);
    EXPECT_TRUE(torch::allclose(sparse->forward(tokens, given, mode), reference, 1e-5, 1e-5));
    EXPECT_TRUE(torch::allclose(gather->forward(tokens, given, mode), reference, 1e-5, 1e-5));
  }
}

TEST(TracformerLikelihood, AnyLengthAndUnknownCharacters) {
  Tracformer model(tiny(Architecture::tracformer, 16));
  // Longer than the training block (the top encoder scope no longer covers all of it) and with
  // characters outside the vocabulary (-1, read as <MASK>).
  torch::Tensor tokens = torch::randint(8, {2, 40}, torch::kLong);
  tokens[0][5] = -1;
  const torch::Tensor given = torch::rand({2, 40}) < 0.5;
  const Scores scores = score(model, {tokens, given}, Mode::car);
  EXPECT_TRUE(torch::isfinite(scores.log_probs).all().item<bool>());
  EXPECT_FALSE(scores.scored[0][5].item<bool>());
  EXPECT_THROW_WITH(model->forward(torch::full({1, 4}, 8, torch::kLong),
                                   torch::zeros({1, 4}, torch::kBool), Mode::car),
                    std::invalid_argument, "outside the vocabulary of 8 characters");
}

// Contexts of every kind: a prefix, a suffix, gaps.
torch::Tensor mixed_contexts(int64_t T) {
  torch::Tensor given = torch::zeros({3, T}, torch::kBool);
  given[0].narrow(0, 0, T / 2).fill_(true);
  given[1].narrow(0, T / 2, T - T / 2).fill_(true);
  given[2] = torch::rand({T}) < 0.5;
  return given;
}

TEST(TracformerCache, TeacherForcedLogProbabilitiesEqualTheFullPass) {
  for (Architecture architecture :
       {Architecture::tracformer, Architecture::tracformer_dense_encoder}) {
    const int64_t T = 21;  // not a power of two
    Tracformer model(tiny(architecture, 16));
    model->eval();
    torch::manual_seed(2);
    const torch::Tensor tokens = torch::randint(8, {3, T}, torch::kLong);
    const torch::Tensor given = mixed_contexts(T);
    torch::Tensor cached = torch::zeros({3, T, 8});
    const torch::Tensor out =
        model->decode_cached(tokens, given, [&](int64_t t, const torch::Tensor& logits) {
          cached.select(1, t).copy_(torch::log_softmax(logits, -1));
          return tokens.select(1, t);
        });
    EXPECT_TRUE(torch::equal(out, tokens));
    torch::NoGradGuard no_grad;
    const torch::Tensor full = torch::log_softmax(model->forward(tokens, given, Mode::car), -1);
    const torch::Tensor hidden = given.logical_not().unsqueeze(2).expand({3, T, 8});
    EXPECT_TRUE(
        torch::allclose(cached.masked_select(hidden), full.masked_select(hidden), 1e-5, 1e-5))
        << architecture_name(architecture) << ": largest difference "
        << (cached - full).masked_select(hidden).abs().max().item<double>();
  }
}

TEST(TracformerCache, CachedSamplingDrawsWhatReencodingDraws) {
  Tracformer model(tiny(Architecture::tracformer, 16));
  const torch::Tensor tokens = torch::randint(8, {3, 16}, torch::kLong);
  const torch::Tensor given = mixed_contexts(16);
  at::Generator g1 = at::make_generator<at::CPUGeneratorImpl>(8),
                g2 = at::make_generator<at::CPUGeneratorImpl>(8);
  SamplingOptions cached, reencoded;
  reencoded.cache = false;
  EXPECT_TRUE(torch::equal(infill(model, {tokens, given}, cached, g1),
                           infill(model, {tokens, given}, reencoded, g2)));
}

TEST(TracformerQuerySet, OnePassEqualsTheChainRuleTokenByToken) {
  Config config = tiny(Architecture::tracformer, 18);
  config.objective = Mode::ac;
  Tracformer model(config);
  torch::manual_seed(4);
  const int64_t T = 18;
  const torch::Tensor tokens = torch::randint(8, {2, T}, torch::kLong);
  const torch::Tensor draw = torch::rand({2, T});
  const torch::Tensor context = draw < 0.3, targets = (draw >= 0.3) & (draw < 0.7);  // rest unknown
  const Scores one_pass = score(model, {tokens, context, targets}, Mode::ac);
  // Token by token: each target given the context and the targets before it, in AC mode.
  torch::Tensor expected = torch::zeros({2}, torch::kDouble);
  torch::Tensor seen = context.clone();
  torch::NoGradGuard no_grad;
  for (int64_t t = 0; t < T; ++t) {
    const torch::Tensor log_probs =
        torch::log_softmax(model->forward(tokens, seen, Mode::ac).to(torch::kDouble), -1);
    for (int64_t b = 0; b < 2; ++b) {
      if (targets[b][t].item<bool>()) expected[b] += log_probs[b][t][tokens[b][t]];
    }
    seen.select(1, t).logical_or_(targets.select(1, t));
  }
  EXPECT_TRUE(torch::allclose(one_pass.log_probs.sum(1), expected, 1e-9, 1e-5))
      << one_pass.log_probs.sum(1) << expected;
  EXPECT_TRUE(torch::equal(one_pass.scored, targets));
}

TEST(TracformerQuerySet, ModelsReadingEveryPrecedingPositionRefuseUnknownsBeforeATarget) {
  Tracformer model(tiny(Architecture::bart, 8));
  const torch::Tensor tokens = torch::randint(8, {1, 8}, torch::kLong);
  const torch::Tensor context =
      torch::tensor({true, false, true, true, true, true, true, false}).unsqueeze(0);
  const torch::Tensor late =
      torch::tensor({false, false, false, false, false, false, false, true}).unsqueeze(0);
  EXPECT_THROW_WITH(score(model, {tokens, context, late}, Mode::car), std::invalid_argument,
                    "may not leave a position unknown before a target");
  const torch::Tensor early =
      torch::tensor({false, true, false, false, false, false, false, false}).unsqueeze(0);
  EXPECT_NO_THROW(score(model, {tokens, context, early}, Mode::car));  // the unknown comes after
  EXPECT_THROW_WITH(score(model, {tokens, context, context}, Mode::car), std::invalid_argument,
                    "overlap");
}

// ---- training --------------------------------------------------------------------------------

torch::Tensor repetitive_text(int64_t n) {
  torch::Tensor ids = torch::empty({n}, torch::kLong);
  for (int64_t i = 0; i < n; ++i) ids[i] = (i * 3 + i / 7) % 8;
  return ids;
}

TrainingOptions quick_options(int64_t steps) {
  TrainingOptions options;
  options.loop.steps = steps;
  options.batch = 8;
  options.loop.learning_rate = 3e-3;
  options.loop.warmup_steps = 0;
  options.loop.decay = train::LearningRateDecay::constant;  // so a run cut in two follows one schedule
  options.loop.show_progress = false;
  options.spans = {0.5, 3, data::SpanDistribution::geometric, 3};
  return options;
}

TEST(TracformerTraining, LossFalls) {
  const Config config = tiny(Architecture::tracformer, 16);
  Tracformer model(config), averaged(config);
  const torch::Tensor text = repetitive_text(2000);
  std::mt19937_64 rng(1);
  const Batch batch = random_batch(text, 16, 16, Masking::spans, quick_options(1).spans, rng);
  const double before = masked_nll(model, batch, nullptr).item<double>();
  train_model(model, averaged, text, text.narrow(0, 0, 200), quick_options(100), {{"kind", "test"}},
              1);
  model->eval();
  const double after = masked_nll(model, batch, nullptr).item<double>();
  EXPECT_LT(after, 0.7 * before) << before << " -> " << after;
}

TEST(TracformerTraining, PartsWeighedByTheirHiddenTokensAddUpToTheBatchLoss) {
  const Tracformer model(tiny(Architecture::tracformer, 16));
  std::mt19937_64 rng(2);
  const Batch batch =
      random_batch(repetitive_text(2000), 6, 16, Masking::spans, quick_options(1).spans, rng);
  Tracformer evaluated = model;
  const double whole = masked_nll(evaluated, batch, nullptr).item<double>();
  at::Generator noise = at::make_generator<at::CPUGeneratorImpl>(1);
  const std::vector<train::LossPart> parts = loss_parts(model, batch, noise, {{0, 2}, {1, 2}});
  ASSERT_EQ(parts.size(), 2u);
  const torch::Tensor hidden = batch.given.logical_not().sum(1);
  EXPECT_EQ(parts[0].weight, hidden.narrow(0, 0, 3).sum().item<double>());
  EXPECT_EQ(parts[1].weight, hidden.narrow(0, 3, 3).sum().item<double>());
  const double weighed = (parts[0].weight * parts[0].mean_loss().item<double>() +
                          parts[1].weight * parts[1].mean_loss().item<double>()) /
                         (parts[0].weight + parts[1].weight);
  EXPECT_NEAR(weighed, whole, 1e-5 * whole);
  Batch nothing_hidden = batch;
  nothing_hidden.given = torch::ones_like(batch.given);
  EXPECT_THROW_WITH(loss_parts(model, nothing_hidden, noise, {{0, 2}, {1, 2}}),
                    std::invalid_argument, "hides no character");
}

TEST(TracformerTraining, ResumeIsBitExact) {
  const TemporaryDirectory directory;
  Config config = tiny(Architecture::tracformer, 16);
  config.dropout = 0.1;  // dropout draws must resume too
  const torch::Tensor text = repetitive_text(1000);
  Tracformer straight(config), straight_average(config);
  train_model(straight, straight_average, text, text, quick_options(6), {{"kind", "test"}}, 4);

  TrainingOptions half = quick_options(3);
  half.loop.checkpoint_path = directory.file("run.pt");
  Tracformer first(config), first_average(config);
  train_model(first, first_average, text, text, half, {{"kind", "test"}}, 4);
  TrainingOptions rest = quick_options(6);
  rest.loop.checkpoint_path = half.loop.checkpoint_path;
  rest.loop.resume = true;
  Tracformer resumed(config), resumed_average(config);
  train_model(resumed, resumed_average, text, text, rest, {{"kind", "test"}}, 4);
  expect_identical(*straight, *resumed);
}

TEST(TracformerTraining, ModelFileRoundTrip) {
  const TemporaryDirectory directory;
  Tracformer model(tiny(Architecture::bart, 16));
  save_model(directory.file("m.pt"), model, {{"note", "x"}});
  nlohmann::json metadata;
  Tracformer loaded = load_model(directory.file("m.pt"), &metadata);
  EXPECT_EQ(metadata.at("note"), "x");
  expect_identical(*model, *loaded);
  EXPECT_EQ(loaded->config().architecture, Architecture::bart);
}

// ---- evaluation and sampling -----------------------------------------------------------------

TEST(TracformerEval, SameSeedSameMasksAndRanges) {
  const torch::Tensor text = repetitive_text(1000);
  const EvalMasking spans{{0.5, 4, data::SpanDistribution::geometric, 3}, {}};
  const auto a = evaluation_batches(text, 100, 7, spans, 9, 4);
  const auto b = evaluation_batches(text, 100, 7, spans, 9, 4);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_EQ(a[1].tokens.size(0), 3);
  EXPECT_TRUE(torch::equal(a[0].given, b[0].given));
  const auto ranged = evaluation_batches(text, 100, 1, {{}, parse_ranges("0.25:0.5,0.9:1")}, 9, 4);
  const torch::Tensor hidden = ranged[0].given.logical_not()[0];
  EXPECT_EQ(hidden.sum().item<int64_t>(), 35);
  EXPECT_TRUE(hidden[25].item<bool>());
  EXPECT_FALSE(hidden[24].item<bool>());
  EXPECT_TRUE(hidden[99].item<bool>());
  EXPECT_THROW_WITH(parse_ranges("0.5"), std::invalid_argument, "has no ':'");
  EXPECT_THROW_WITH(parse_ranges("0.7:0.2"), std::invalid_argument, "out of order");
  EXPECT_THROW_WITH(parse_ranges("a:b"), std::invalid_argument, "not two numbers");
  EXPECT_THROW_WITH(evaluation_batches(text, 100, 1, {{}, parse_ranges("0.5:0.501")}, 9, 4),
                    std::invalid_argument, "hide no position");
}

TEST(TracformerEval, CountsUnknownCharacters) {
  Tracformer model(tiny(Architecture::tracformer, 16));
  torch::Tensor text = repetitive_text(64);
  text.narrow(0, 0, 64).index_put_({torch::arange(0, 64, 2)}, -1);
  const EvalResult result = evaluate(
      model,
      evaluation_batches(text, 16, 4, {{1.0, 3, data::SpanDistribution::geometric, 3}, {}}, 1, 4),
      Mode::car);
  EXPECT_EQ(result.unknown_chars, 32);
  EXPECT_EQ(result.masked_chars, 32);
  EXPECT_TRUE(std::isfinite(result.bits_per_char));
}

TEST(TracformerSampling, FillsOnlyTheHiddenPositions) {
  Tracformer model(tiny(Architecture::tracformer, 16));
  const torch::Tensor tokens = torch::randint(8, {3, 16}, torch::kLong);
  const torch::Tensor given = torch::rand({3, 16}) < 0.5;
  at::Generator g1 = at::make_generator<at::CPUGeneratorImpl>(5),
                g2 = at::make_generator<at::CPUGeneratorImpl>(5);
  const torch::Tensor a = infill(model, {tokens, given}, {}, g1);
  const torch::Tensor b = infill(model, {tokens, given}, {}, g2);
  EXPECT_TRUE(torch::equal(a, b));
  EXPECT_TRUE(torch::equal(a.masked_select(given), tokens.masked_select(given)));
  // A vanishing nucleus is the most probable token, position by position.
  const torch::Tensor greedy = infill(model, {tokens, given}, {1.0, 1e-12}, g1);
  const torch::Tensor logits = model->forward(greedy, given, Mode::car);
  const torch::Tensor hidden = given.logical_not();
  EXPECT_TRUE(torch::equal(logits.argmax(-1).masked_select(hidden), greedy.masked_select(hidden)));
  // So is a vanishing temperature (dividing the logits by it first gave inf / inf).
  EXPECT_TRUE(torch::equal(
      infill(model, {tokens, given}, {std::numeric_limits<double>::denorm_min(), 1.0}, g1), greedy));
  EXPECT_THROW_WITH(infill(model, {tokens, given}, {0.0, 1.0}, g1), std::invalid_argument,
                    "temperature must be");
  EXPECT_THROW_WITH(infill(model, {tokens, given}, {1.0, 1.5}, g1), std::invalid_argument,
                    "top-p must be in (0, 1]");
}

// ---- the runs on a text file -------------------------------------------------------------------

std::string text_file_of_blocks(const TemporaryDirectory& directory, int64_t blocks) {
  const std::string path = directory.file("blocks.txt");
  std::ofstream out(path);
  for (int64_t b = 0; b < blocks; ++b) out << (b ? "\n\n" : "") << "abc defg hab cdef gha bcd efgh ab " << b % 7;
  return path;
}

// The library's runs resolve the defaults that depend on the architecture, train, score and fill
// with no command line involved.
TEST(TracformerRuns, TrainEvaluateAndInfillAFile) {
  const TemporaryDirectory directory;
  TrainRequest request;
  request.text_path = text_file_of_blocks(directory, 60);
  request.config = tiny(Architecture::bert);
  request.training = quick_options(3);
  TrainReport report = train_on_text(request);
  EXPECT_EQ(report.averaged->config().objective, Mode::ac);  // bert's own objective
  EXPECT_EQ(report.result.steps_done, 3);
  EXPECT_EQ(report.metadata.at("training").at("masking"), "spans");
  request.config = tiny(Architecture::ar);
  report = train_on_text(request);
  EXPECT_EQ(report.averaged->config().objective, Mode::car);
  EXPECT_EQ(report.metadata.at("training").at("masking"), "all");  // ar reads every position
  const std::string model_path = directory.file("runs.pt");
  save_model(model_path, report.averaged, report.metadata);

  TextEvalRequest eval;
  eval.model_path = model_path;
  eval.text_path = request.text_path;
  eval.split = "test";
  eval.crops = 2;
  const TextEvalReport scored = evaluate_text(eval);
  EXPECT_EQ(scored.result.crops, 2);
  EXPECT_GT(scored.result.bits_per_char, 0);
  EXPECT_EQ(eval_record(eval, scored).at("crop_bits").size(), 2u);
  eval.query_set = "0:0.5";
  EXPECT_THROW_WITH(evaluate_text(eval), std::invalid_argument, "--query-set takes CONTEXT/TARGETS");

  InfillRequest fill;
  fill.model_path = model_path;
  fill.text = "abc ____ hab";
  fill.samples = 2;
  const InfillReport filled = infill_text(fill);
  ASSERT_EQ(filled.samples.size(), 2u);
  EXPECT_EQ(filled.hidden, 4);
  EXPECT_EQ(filled.samples[0].text.substr(0, 4), "abc ");
  EXPECT_LT(filled.samples[0].log_likelihood, 0);
  EXPECT_EQ(filled.unknown_context, 0);
  fill.text = "a\u2605c _ \u2605\u00e9";  // two characters the text never had, one twice
  const InfillReport unknown = infill_text(fill);
  EXPECT_EQ(unknown.unknown_context, 3);
  EXPECT_EQ(unknown.unknown_characters, "\u2605\u00e9");
  EXPECT_EQ(unknown.samples[0].text.substr(0, 5), "a\u2605c");  // printed as given
  fill.mask = "10:13";
  EXPECT_THROW_WITH(infill_text(fill), std::invalid_argument, "--mask range '10:13' is not A:B");
}

// A constant-rate run resumed with more steps ends where one run to that number ends (the
// Tracformer study extends and splits its runs so); under cosine decay, whose rates depend on the
// number of steps, resuming with another number or another decay is refused.
TEST(TracformerRuns, AConstantRateRunGoesOnToMoreStepsACosineOneDoesNot) {
  const TemporaryDirectory directory;
  TrainRequest request;
  request.text_path = text_file_of_blocks(directory, 60);
  request.config = tiny(Architecture::tracformer);
  request.seed = 2;
  request.training = quick_options(4);
  TrainReport straight = train_on_text(request);
  request.training.loop.checkpoint_path = directory.file("extended.ckpt");
  request.training.loop.steps = 2;
  train_on_text(request);
  request.training.loop.steps = 4;
  request.training.loop.resume = true;
  TrainReport extended = train_on_text(request);
  EXPECT_EQ(extended.result.steps_this_run, 2);  // resumed at step 2, not started afresh
  expect_identical(*straight.averaged, *extended.averaged);

  request.training.loop.decay = train::LearningRateDecay::cosine;
  request.training.loop.checkpoint_path = directory.file("cosine.ckpt");
  request.training.loop.steps = 2;
  request.training.loop.resume = false;
  train_on_text(request);
  request.training.loop.steps = 4;
  request.training.loop.resume = true;
  EXPECT_THROW_WITH(train_on_text(request), std::invalid_argument,
                    "training.train_steps is 2 in the checkpoint but 4 in this run");
  request.training.loop.decay = train::LearningRateDecay::constant;
  EXPECT_THROW_WITH(train_on_text(request), std::invalid_argument,
                    "training.lr_decay is \"cosine\" in the checkpoint");
}

}  // namespace
}  // namespace structdiff::tracformer
