// GSDM's masked (absorbing-state) process: the schedule's ELBO weight, the loss's entropy bound,
// samplers that keep observed variables and trust a model that knows the answer, and Gaussian
// variables unchanged bit for bit when a graph has no discrete ones.
#include <algorithm>
#include <cmath>
#include <numeric>

#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/gsdm.h"
#include "structdiff/mask_schedule.h"
#include "structdiff/sudoku.h"
#include "structdiff/sudoku_model.h"
#include "support/expect_throw.h"

namespace structdiff::gsdm {
namespace {

using diffusion::MaskScheduleKind;

at::Generator generator(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

GsdmConfig masked_config() {
  GsdmConfig c;
  c.dim = 16;
  c.blocks = 1;
  c.heads = 2;
  c.process = DiffusionProcess::masked;
  return c;
}

TEST(MaskSchedule, ElboWeightIsMinusAlphaPrimeOverOneMinusAlpha) {
  for (const MaskScheduleKind kind : {MaskScheduleKind::linear, MaskScheduleKind::cosine}) {
    for (const double t : {0.01, 0.2, 0.5, 0.8, 0.99}) {
      const double h = 1e-6;
      const auto alpha = [&](double at) {
        return diffusion::mask_alpha(kind, torch::tensor(at, torch::kDouble)).item<double>();
      };
      const double derivative = (alpha(t + h) - alpha(t - h)) / (2 * h);
      const double expected = -derivative / (1 - alpha(t));
      const double weight =
          diffusion::mask_elbo_weight(kind, torch::tensor(t, torch::kDouble)).item<double>();
      EXPECT_NEAR(weight, expected, 1e-6 * expected) << diffusion::mask_schedule_name(kind) << " t " << t;
    }
    EXPECT_NEAR(diffusion::mask_alpha(kind, torch::tensor(0.0, torch::kDouble)).item<double>(), 1, 1e-12);
    EXPECT_NEAR(diffusion::mask_alpha(kind, torch::tensor(1.0, torch::kDouble)).item<double>(), 0, 1e-12);
  }
}

TEST(MaskSchedule, TimeOfAlphaInvertsAlpha) {
  const torch::Tensor t = torch::linspace(0, 1, 11, torch::kDouble);
  for (const MaskScheduleKind kind : {MaskScheduleKind::linear, MaskScheduleKind::cosine}) {
    EXPECT_TRUE(torch::allclose(diffusion::mask_time_of_alpha(kind, diffusion::mask_alpha(kind, t)), t,
                                1e-9, 1e-7));
  }
  EXPECT_THROW_WITH(diffusion::parse_mask_schedule("sqrt"), std::invalid_argument,
                    "unknown mask schedule 'sqrt' (choose linear or cosine)");
}

// n independent uniform K-way variables: a model that predicts the true distribution (uniform
// logits) has the ELBO n log K, the data's entropy, under either schedule.
TEST(MaskedLoss, TrueDistributionMeetsTheEntropyBound) {
  const int64_t n = 4, k = 5, batch = 20000;
  graph::GraphicalModel graph;
  graph.add_array("v", {n}, graph::VariableType::discrete, k);
  const Gsdm model(graph, masked_config());
  const diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  torch::manual_seed(3);
  const torch::Tensor x0 = torch::one_hot(torch::randint(k, {batch, n}), k).to(torch::kFloat).view({batch, -1});
  const torch::Tensor observed = torch::zeros({batch, n}, torch::kBool);
  const MaskedModelFn uniform = [](const torch::Tensor& x_t, const torch::Tensor&) {
    return torch::zeros_like(x_t);
  };
  for (const MaskScheduleKind kind : {MaskScheduleKind::linear, MaskScheduleKind::cosine}) {
    const diffusion::TrainingExample example =
        diffusion::make_training_example(schedule, x0, /*antithetic=*/true, generator(1));
    const double loss = masked_training_loss(uniform, *model->structure(), schedule, kind,
                                             MaskedLoss::elbo, x0, observed, example)
                            .item<double>();
    EXPECT_NEAR(loss, n * std::log(static_cast<double>(k)), 0.03 * n * std::log(k))
        << diffusion::mask_schedule_name(kind);
  }
  // Observed variables are never masked, so they carry no loss.
  const diffusion::TrainingExample example =
      diffusion::make_training_example(schedule, x0, true, generator(1));
  EXPECT_EQ(masked_training_loss(uniform, *model->structure(), schedule, MaskScheduleKind::linear,
                                 MaskedLoss::elbo, x0, torch::ones({batch, n}, torch::kBool), example)
                .item<double>(),
            0.0);
}

std::vector<sudoku::Grid> puzzles_4x4(int count, int givens, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<sudoku::Grid> puzzles;
  for (int i = 0; i < count; ++i) {
    puzzles.push_back(sudoku::observe_random_cells(sudoku::generate_solution(2, rng), givens, rng));
  }
  return puzzles;
}

TEST(MaskedSamplers, ObservedVariablesNeverChangeAndEveryLatentOneIsDecided) {
  torch::manual_seed(0);
  const graph::GraphicalModel graph = sudoku::graphical_model(2);
  const Gsdm model(graph, masked_config());
  const diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  const std::vector<sudoku::Grid> puzzles = puzzles_4x4(6, 7, 1);
  struct Case {
    Sampler sampler;
    Confidence confidence;
    double temperature;
    int64_t unmask_per_step, remask;
    double order_noise;
  };
  for (const Case& c : {Case{Sampler::ancestral, Confidence::probability, 1.0, 0, 0, 0},
                        Case{Sampler::adaptive, Confidence::probability, 0.0, 0, 0, 0},
                        Case{Sampler::adaptive, Confidence::margin, 0.5, 0, 0, 0},
                        Case{Sampler::adaptive, Confidence::probability, 0.0, 1, 0, 0},
                        Case{Sampler::adaptive, Confidence::margin, 0.0, 1, 0, 0.3},
                        Case{Sampler::adaptive, Confidence::probability, 1.0, 2, 3, 0},
                        Case{Sampler::model_default, Confidence::probability, 0.0, 0, 2, 0}}) {
    SampleOptions options;
    options.sampler = c.sampler;
    options.confidence = c.confidence;
    options.temperature = c.temperature;
    options.unmask_per_step = c.unmask_per_step;
    options.remask = c.remask;
    options.order_noise = c.order_noise;
    options.ddim_steps = 5;
    options.generator = generator(2);
    const torch::Tensor state = sample(model, schedule, sudoku::observed_mask(puzzles),
                                       sudoku::encode(puzzles), options);
    // Every cell one value: a one-hot block (no mask left).
    EXPECT_TRUE(torch::equal(state.view({6, 16, 4}).sum(-1), torch::ones({6, 16})));
    const std::vector<sudoku::Grid> solved = sudoku::decode(state, 2);
    for (size_t p = 0; p < puzzles.size(); ++p) {
      for (int cell = 0; cell < 16; ++cell) {
        if (puzzles[p].cells[cell] != sudoku::kBlank) {
          EXPECT_EQ(solved[p].cells[cell], puzzles[p].cells[cell])
              << sampler_name(c.sampler) << " puzzle " << p << " cell " << cell;
        }
      }
    }
  }
}

TEST(MaskedSamplers, AModelThatKnowsTheAnswerIsSolvedInOnePass) {
  torch::manual_seed(0);
  const graph::GraphicalModel graph = sudoku::graphical_model(2);
  const Gsdm model(graph, masked_config());
  const diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  std::mt19937_64 rng(4);
  std::vector<sudoku::Grid> solutions, puzzles;
  for (int i = 0; i < 3; ++i) {
    solutions.push_back(sudoku::generate_solution(2, rng));
    puzzles.push_back(sudoku::observe_random_cells(solutions.back(), 4, rng));
  }
  const torch::Tensor answer = sudoku::encode(solutions);
  int calls = 0;
  const MaskedModelFn knows = [&](const torch::Tensor&, const torch::Tensor&) {
    ++calls;
    return answer * 20;  // logits: the answer's value far ahead of the others
  };
  SampleOptions options;
  options.sampler = Sampler::adaptive;
  options.unmask_per_step = 0;  // the schedule's pace: everything in the one step
  options.ddim_steps = 1;
  options.generator = generator(1);
  const torch::Tensor observed = sudoku::observed_mask(puzzles);
  const torch::Tensor state =
      sample_masked(knows, *model->structure(), schedule, MaskScheduleKind::cosine, observed,
                    sudoku::encode(puzzles), torch::zeros_like(answer), options);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(torch::equal(state, answer));
  // Unmasking one variable a step, it still follows the model to the answer.
  options.unmask_per_step = 1;
  calls = 0;
  EXPECT_TRUE(torch::equal(sample_masked(knows, *model->structure(), schedule,
                                         MaskScheduleKind::linear, observed, sudoku::encode(puzzles),
                                         torch::zeros_like(answer), options),
                           answer));
  EXPECT_EQ(calls, 12);  // 16 cells, 4 given
  // At a temperature far below the logits' scale every draw is the answer (dividing the float32
  // logits by it gave 0 / 0, and the draw failed).
  options.temperature = 1e-300;
  EXPECT_TRUE(torch::equal(sample_masked(knows, *model->structure(), schedule,
                                         MaskScheduleKind::linear, observed, sudoku::encode(puzzles),
                                         torch::zeros_like(answer), options),
                           answer));
}

// Order noise shuffles the order in which the adaptive sampler decides variables of nearly equal
// confidence and keeps apart those far apart, while every value stays the most probable one.
// The model here is confident of value 0 in every cell, more so the higher the cell's index (its
// margin rises by about 0.05 a cell), and the order is read off the decided cells it is shown.
TEST(MaskedSamplers, OrderNoiseShufflesOnlyNearlyEqualConfidencesAndKeepsTheValues) {
  const graph::GraphicalModel graph = sudoku::graphical_model(2);
  const Gsdm model(graph, masked_config());
  const diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  const int64_t cells = 16, values = 4;
  const torch::Tensor logits = torch::zeros({1, cells, values});
  logits.select(2, 0).copy_(torch::linspace(0.5, 3.0, cells).unsqueeze(0));
  std::vector<int64_t> order;
  const MaskedModelFn reader = [&](const torch::Tensor& x, const torch::Tensor&) {
    const torch::Tensor decided = x.view({1, cells, values}).sum(-1).squeeze(0) > 0;
    for (int64_t cell = 0; cell < cells; ++cell) {
      if (decided[cell].item<bool>() && std::find(order.begin(), order.end(), cell) == order.end()) {
        order.push_back(cell);
      }
    }
    return logits.view({1, cells * values});
  };
  const torch::Tensor nothing_observed = torch::zeros({1, cells}, torch::kBool);
  const torch::Tensor zeros = torch::zeros({1, cells * values});
  const auto draw_order = [&](double noise, uint64_t seed) {
    SampleOptions options;
    options.sampler = Sampler::adaptive;
    options.order_noise = noise;
    options.generator = generator(seed);
    order.clear();
    const torch::Tensor state = sample_masked(reader, *model->structure(), schedule, MaskScheduleKind::cosine,
                                              nothing_observed, zeros, zeros, options);
    EXPECT_TRUE(torch::equal(state.view({cells, values}).argmax(-1), torch::zeros({cells}, torch::kLong)))
        << "noise " << noise;
    // The last cell is decided in the last step, after the last reading.
    for (int64_t cell = 0; cell < cells; ++cell) {
      if (std::find(order.begin(), order.end(), cell) == order.end()) order.push_back(cell);
    }
    return order;
  };
  std::vector<int64_t> most_confident_first(cells);
  std::iota(most_confident_first.rbegin(), most_confident_first.rend(), int64_t{0});
  EXPECT_EQ(draw_order(0.0, 1), most_confident_first);
  EXPECT_EQ(draw_order(1e-3, 1), most_confident_first);  // gaps of about 0.05: far apart at this scale
  const std::vector<int64_t> shuffled = draw_order(10.0, 1);
  EXPECT_NE(shuffled, most_confident_first);
  EXPECT_NE(draw_order(10.0, 2), shuffled);
}

// Remasking revises a value the model doubts once more is decided, and sampling stops when no
// decided value is doubted: here the model's first reading puts a confident wrong digit in one
// cell of each puzzle, and every later one knows the answer.
TEST(MaskedSamplers, RevisionUndoesADoubtedValueAndStopsWhenNoneIsDoubted) {
  const graph::GraphicalModel graph = sudoku::graphical_model(2);
  const Gsdm model(graph, masked_config());
  const diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  std::mt19937_64 rng(4);
  std::vector<sudoku::Grid> solutions, puzzles;
  std::vector<int> misled;  // the cell first read wrong, per puzzle
  for (int i = 0; i < 3; ++i) {
    solutions.push_back(sudoku::generate_solution(2, rng));
    puzzles.push_back(sudoku::observe_random_cells(solutions.back(), 4, rng));
    int cell = 0;
    while (puzzles.back().cells[cell] != sudoku::kBlank) ++cell;
    misled.push_back(cell);
  }
  const torch::Tensor answer = sudoku::encode(solutions);
  torch::Tensor first_reading = answer.clone().view({3, 16, 4}) * 2;  // right but unsure
  for (int p = 0; p < 3; ++p) {
    const int64_t right = first_reading[p][misled[p]].argmax().item<int64_t>();
    first_reading[p][misled[p]][(right + 1) % 4] = 40;  // wrong and the most confident of all
  }
  first_reading = first_reading.view_as(answer);
  int calls = 0;
  const MaskedModelFn misled_once = [&](const torch::Tensor&, const torch::Tensor&) {
    return ++calls == 1 ? first_reading : answer * 20;
  };
  SampleOptions options;
  options.sampler = Sampler::adaptive;
  options.unmask_per_step = 1;
  options.generator = generator(1);
  const torch::Tensor observed = sudoku::observed_mask(puzzles);
  const auto draw = [&](int64_t remask) {
    calls = 0;
    options.remask = remask;
    return sample_masked(misled_once, *model->structure(), schedule, MaskScheduleKind::cosine,
                         observed, sudoku::encode(puzzles), torch::zeros_like(answer), options);
  };
  EXPECT_FALSE(torch::equal(draw(0), answer));
  EXPECT_EQ(calls, 12);  // one pass: 12 latent cells, the wrong digit kept
  EXPECT_TRUE(torch::equal(draw(1), answer));
  // The pass, one step that remasks the wrong digit and decides a cell again, and one reading
  // that doubts nothing.
  EXPECT_EQ(calls, 14);
}

// The margin ranks a drawn value by its lead over the strongest other value: the top-two margin
// for the most probable value, negative for any other draw (which must be decided last, or a
// temperature-1 draw of an unlikely digit would be committed first).
TEST(MaskedSamplers, TheMarginIsTheDrawnValuesLeadOverTheStrongestOther) {
  const torch::Tensor p = torch::tensor({0.5, 0.3, 0.2}, torch::kDouble).expand({3, 3});
  const torch::Tensor drawn = torch::tensor({0, 1, 2}, torch::kLong);
  EXPECT_TRUE(torch::allclose(proposal_confidence(p, drawn, Confidence::margin),
                              torch::tensor({0.2, -0.2, -0.3}, torch::kDouble)));
  EXPECT_TRUE(torch::allclose(proposal_confidence(p, drawn, Confidence::probability),
                              torch::tensor({0.5, 0.3, 0.2}, torch::kDouble)));
  const torch::Tensor one_value = torch::ones({2, 1}, torch::kDouble);
  EXPECT_TRUE(torch::equal(proposal_confidence(one_value, torch::zeros({2}, torch::kLong),
                                               Confidence::margin),
                           torch::ones({2}, torch::kDouble)));
}

// The default confidence is the margin at temperature 0 and the probability above. Two latent
// cells: at first cell A's best value leads by 0.05 at probability 0.5, cell B's by 0.2 at 0.4, so
// the probability decides A first and the margin B first; the model then proposes a value for the
// other cell that tells which went first.
TEST(MaskedSamplers, TheDefaultConfidenceIsTheMarginAtTemperatureZero) {
  const graph::GraphicalModel graph = sudoku::graphical_model(2);
  const Gsdm model(graph, masked_config());
  const diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  std::mt19937_64 rng(3);
  sudoku::Grid puzzle = sudoku::generate_solution(2, rng);
  const int a = 0, b = 15;
  puzzle.cells[a] = puzzle.cells[b] = sudoku::kBlank;
  const auto block = [](int cell) { return torch::indexing::Slice(4 * cell, 4 * cell + 4); };
  const MaskedModelFn staged = [&](const torch::Tensor& x, const torch::Tensor&) {
    torch::Tensor logits = torch::zeros_like(x);
    const bool a_decided = x.index({0, block(a)}).sum().item<double>() > 0;
    const bool b_decided = x.index({0, block(b)}).sum().item<double>() > 0;
    if (!a_decided && !b_decided) {
      logits.index_put_({0, block(a)}, torch::tensor({0.5, 0.45, 0.05, 1e-9}).log());
      logits.index_put_({0, block(b)}, torch::tensor({0.2, 0.4, 0.2, 0.2}).log());
    } else {
      // The undecided cell's proposal: value 3 after A went first, value 2 after B did.
      const int other = a_decided ? b : a;
      logits.index_put_({0, block(other)}, torch::one_hot(torch::tensor(a_decided ? 3 : 2), 4) * 20);
    }
    return logits;
  };
  const auto decided = [&](double temperature, Confidence confidence, uint64_t seed = 5) {
    SampleOptions options;
    options.sampler = Sampler::adaptive;
    options.temperature = temperature;
    options.confidence = confidence;
    options.generator = generator(seed);
    const std::vector<sudoku::Grid> puzzles = {puzzle};
    const torch::Tensor observed = sudoku::observed_mask(puzzles), values = sudoku::encode(puzzles);
    const sudoku::Grid solved = sudoku::decode(
        sample_masked(staged, *model->structure(), schedule, MaskScheduleKind::cosine, observed,
                      values, torch::zeros_like(values), options),
        2)[0];
    return std::make_pair(solved.cells[a], solved.cells[b]);
  };
  EXPECT_EQ(decided(0, Confidence::probability), std::make_pair(0, 3));  // A first
  EXPECT_EQ(decided(0, Confidence::margin), std::make_pair(2, 1));       // B first
  EXPECT_EQ(decided(0, Confidence::by_temperature), decided(0, Confidence::margin));
  // At temperature 1 the draws are random; the default draws as the probability does.
  for (uint64_t seed = 0; seed < 4; ++seed) {
    EXPECT_EQ(decided(1, Confidence::by_temperature, seed), decided(1, Confidence::probability, seed));
  }
}

TEST(MaskedSamplers, RefuseTheGaussianProcessesSamplersAndBadOptions) {
  const graph::GraphicalModel graph = sudoku::graphical_model(2);
  const Gsdm masked(graph, masked_config());
  GsdmConfig gaussian_config = masked_config();
  gaussian_config.process = DiffusionProcess::gaussian;
  const Gsdm gaussian(graph, gaussian_config);
  const diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  const std::vector<sudoku::Grid> puzzles = puzzles_4x4(1, 4, 1);
  SampleOptions options;
  options.generator = generator(1);
  options.sampler = Sampler::ddim;
  EXPECT_THROW_WITH(sample(masked, schedule, sudoku::observed_mask(puzzles), sudoku::encode(puzzles), options),
                    std::invalid_argument, "samples with ancestral or adaptive, not ddim");
  options.sampler = Sampler::adaptive;
  EXPECT_THROW_WITH(sample(gaussian, schedule, sudoku::observed_mask(puzzles), sudoku::encode(puzzles), options),
                    std::invalid_argument, "needs a masked-process model");
  options.temperature = std::nan("");
  EXPECT_THROW_WITH(sample(masked, schedule, sudoku::observed_mask(puzzles), sudoku::encode(puzzles), options),
                    std::invalid_argument, "temperature must be finite and >= 0");
  options.temperature = 0;
  for (const double noise : {-0.1, std::nan(""), HUGE_VAL}) {
    options.order_noise = noise;
    EXPECT_THROW_WITH(sample(masked, schedule, sudoku::observed_mask(puzzles), sudoku::encode(puzzles), options),
                      std::invalid_argument, "the order noise must be finite and >= 0");
  }
  options.order_noise = 0.1;
  options.sampler = Sampler::ancestral;
  EXPECT_THROW_WITH(sample(masked, schedule, sudoku::observed_mask(puzzles), sudoku::encode(puzzles), options),
                    std::invalid_argument,
                    "order noise reorders the adaptive sampler's choices; the ancestral sampler unmasks at random");
}

// A request for the model's default sampler runs the process's own; any other runs as named.
TEST(MaskedSamplers, TheModelsDefaultIsAdaptiveForMaskedAndDdimForGaussian) {
  EXPECT_EQ(resolve_sampler(Sampler::model_default, DiffusionProcess::masked), Sampler::adaptive);
  EXPECT_EQ(resolve_sampler(Sampler::model_default, DiffusionProcess::gaussian), Sampler::ddim);
  for (const Sampler named : {Sampler::ancestral, Sampler::ddim, Sampler::adaptive}) {
    EXPECT_EQ(resolve_sampler(named, DiffusionProcess::masked), named);
    EXPECT_EQ(resolve_sampler(named, DiffusionProcess::gaussian), named);
  }
}

// A graph of continuous variables only: the masked process is the Gaussian one, bit for bit.
TEST(MaskedProcess, WithoutDiscreteVariablesGaussianBehaviourIsKeptBitForBit) {
  graph::GraphicalModel graph;
  graph.add_array("x", {3}, graph::VariableType::continuous);
  graph.add_array("y", {2}, graph::VariableType::continuous);
  graph.add_edge({"x", {0}}, {"y", {0}});
  graph.add_edge({"x", {2}}, {"y", {1}});
  GsdmConfig gaussian_config = masked_config();
  gaussian_config.process = DiffusionProcess::gaussian;
  torch::manual_seed(5);
  const Gsdm gaussian(graph, gaussian_config);
  torch::manual_seed(5);
  const Gsdm masked(graph, masked_config());
  const diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  const torch::Tensor x0 = torch::randn({8, 5});
  const torch::Tensor observed = torch::rand({8, 5}) < 0.3;
  EXPECT_TRUE(torch::equal(training_loss(gaussian, schedule, x0, observed, generator(7)),
                           training_loss(masked, schedule, x0, observed, generator(7))));
  for (const double eta : {0.0, 1.0}) {
    SampleOptions options;
    options.ddim_steps = 10;
    options.ddim_eta = eta;
    options.generator = generator(9);
    const torch::Tensor from_gaussian = sample(gaussian, schedule, observed, x0, options);
    options.generator = generator(9);
    options.sampler = Sampler::ancestral;  // the masked process's ancestral sampler, DDIM grid
    const torch::Tensor from_masked = sample(masked, schedule, observed, x0, options);
    EXPECT_TRUE(torch::equal(from_gaussian, from_masked)) << "eta " << eta;
  }
}

// Redrawing a puzzle: the adaptive sampler at temperature 0 takes order noise (its values stay the
// most probable); draws that already vary are left alone; the diversity check draws from a masked
// model's own distribution.
TEST(MaskedSamplers, RepeatedDrawsVaryTheOrderAndTheDiversityCheckDrawsAtTemperatureOne) {
  for (const DiffusionProcess process : {DiffusionProcess::masked, DiffusionProcess::gaussian}) {
    const bool masked = process == DiffusionProcess::masked;
    GsdmConfig config = masked_config();
    config.process = process;
    sudoku::TrainedModel trained;
    trained.n = 2;
    trained.model = Gsdm(sudoku::graphical_model(2), config);
    SampleOptions options;
    SampleOptions again = sudoku::repeated_draws(trained, options);
    EXPECT_EQ(again.order_noise, masked ? sudoku::kRepeatedDrawOrderNoise : 0.0);
    EXPECT_EQ(again.temperature, 0.0);
    EXPECT_EQ(sudoku::own_distribution(trained, options).temperature, masked ? 1.0 : 0.0);
    options.order_noise = 0.3;
    EXPECT_EQ(sudoku::repeated_draws(trained, options).order_noise, 0.3);
    options.order_noise = 0;
    options.temperature = 0.5;
    again = sudoku::repeated_draws(trained, options);
    EXPECT_EQ(again.temperature, 0.5);
    EXPECT_EQ(again.order_noise, 0.0);
    EXPECT_EQ(sudoku::own_distribution(trained, options).temperature, masked ? 1.0 : 0.5);
    options.temperature = 0;
    options.sampler = Sampler::ancestral;  // its random order already varies
    EXPECT_EQ(sudoku::repeated_draws(trained, options).order_noise, 0.0);
  }
}

TEST(MaskedProcess, TheModelFileRecordsTheProcess) {
  GsdmConfig config = masked_config();
  config.mask_schedule = MaskScheduleKind::linear;
  config.masked_loss = MaskedLoss::unweighted;
  const GsdmConfig back = nlohmann::json(config).get<GsdmConfig>();
  EXPECT_EQ(back.process, DiffusionProcess::masked);
  EXPECT_EQ(back.mask_schedule, MaskScheduleKind::linear);
  EXPECT_EQ(back.masked_loss, MaskedLoss::unweighted);
  nlohmann::json old = nlohmann::json(GsdmConfig{});
  old.erase("process");
  EXPECT_EQ(old.get<GsdmConfig>().process, DiffusionProcess::gaussian);  // files from before
  nlohmann::json bad = nlohmann::json(config);
  bad["process"] = "absorbing";
  EXPECT_THROW_WITH(bad.get<GsdmConfig>(), std::invalid_argument,
                    "unknown diffusion process 'absorbing' (choose gaussian or masked)");
}

}  // namespace
}  // namespace structdiff::gsdm
