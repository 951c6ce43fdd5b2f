// The GSDM model: shapes and mixed variables, structure (no information outside the mask),
// embedding-sharing equivariance, clamping of observed values, checkpoints and exact resume.
#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/gsdm.h"
#include "structdiff/gsdm_training.h"
#include "structdiff/sudoku.h"
#include "structdiff/sudoku_model.h"
#include "structdiff/sudoku_runs.h"
#include "structdiff/training_loop.h"
#include "structdiff/sinusoidal.h"
#include "support/gradcheck.h"
#include "support/temporary_files.h"
#include "support/modules.h"

namespace structdiff::gsdm {
namespace {

GsdmConfig small_config(EmbeddingKind embedding = EmbeddingKind::array) {
  GsdmConfig c;
  c.dim = 32;
  c.blocks = 2;
  c.heads = 4;
  c.embedding = embedding;
  return c;
}

// A chain x0 - x1 - x2 - x3 of mixed variables: continuous scalar, 3-way, 2-way, continuous.
graph::GraphicalModel mixed_chain() {
  graph::GraphicalModel m;
  m.add_array("a", {}, graph::VariableType::continuous);
  m.add_array("b", {}, graph::VariableType::discrete, 3);
  m.add_array("c", {}, graph::VariableType::discrete, 2);
  m.add_array("d", {1}, graph::VariableType::continuous);
  m.add_edge({"a", {}}, {"b", {}});
  m.add_edge({"b", {}}, {"c", {}});
  m.add_edge({"c", {}}, {"d", {0}});
  return m;
}

TEST(Gsdm, MixedVariablesShapesAndSimplexOutputs) {
  torch::manual_seed(0);
  Gsdm model(mixed_chain(), small_config());
  EXPECT_EQ(model->layout().width, 1 + 3 + 2 + 1);
  torch::Tensor x = torch::randn({5, 7});
  torch::Tensor observed = torch::zeros({5, 4}, torch::kBool);
  torch::Tensor out = model->forward(x, torch::randint(1000, {5}), observed);
  ASSERT_EQ(out.sizes(), torch::IntArrayRef({5, 7}));
  EXPECT_TRUE(torch::allclose(out.narrow(1, 1, 3).sum(1), torch::ones({5})));
  EXPECT_TRUE(torch::allclose(out.narrow(1, 4, 2).sum(1), torch::ones({5})));
  torch::Tensor decoded = decode_state(model->layout(), mixed_chain(), out);
  EXPECT_EQ(decoded.sizes(), torch::IntArrayRef({5, 4}));
  EXPECT_TRUE(torch::equal(decoded.select(1, 1), out.narrow(1, 1, 3).argmax(1).to(torch::kFloat)));
}

TEST(Gsdm, RejectsBadShapesAndConfigs) {
  Gsdm model(mixed_chain(), small_config());
  EXPECT_THROW_WITH(model->forward(torch::zeros({2, 6}), torch::zeros({2}, torch::kLong),
                                   torch::zeros({2, 4}, torch::kBool)),
                    std::invalid_argument, "GSDM: state must be (batch, 7)");
  EXPECT_THROW_WITH(model->forward(torch::zeros({2, 7}), torch::zeros({2}, torch::kLong),
                                   torch::zeros({2, 3}, torch::kBool)),
                    std::invalid_argument, "observed mask must be (batch, 4)");
  GsdmConfig bad = small_config();
  bad.heads = 5;
  EXPECT_THROW_WITH(Gsdm(mixed_chain(), bad), std::invalid_argument,
                    "dim (32) must be a multiple of heads (5)");
  bad = small_config();
  bad.attention = Mechanism::linear;
  EXPECT_THROW_WITH(Gsdm(mixed_chain(), bad), std::invalid_argument,
                    "GSDM attention must be sparse, structured, gather or dense, got linear");
  // A width no machine holds (a hostile model file's, say) is refused before any weight exists.
  bad = small_config();
  bad.dim = 100000000;
  bad.heads = 1;
  EXPECT_THROW_WITH(Gsdm(mixed_chain(), bad), std::invalid_argument,
                    "a GSDM of dim 100000000 and 2 blocks needs 720000003.2 GB of memory");
}

// With per-token norms, a node's output after L blocks depends only on nodes within L hops.
TEST(Gsdm, NoInformationCrossesTheGraphOutsideTheMask) {
  torch::manual_seed(1);
  GsdmConfig c = small_config(EmbeddingKind::independent);
  c.blocks = 1;
  Gsdm model(mixed_chain(), c);
  torch::Tensor x = torch::randn({1, 7}).requires_grad_(true);
  torch::Tensor out = model->forward(x, torch::tensor({10}), torch::zeros({1, 4}, torch::kBool));
  out.narrow(1, 0, 1).sum().backward();  // node a sees b only
  torch::Tensor g = x.grad().abs();
  EXPECT_GT(g.narrow(1, 1, 3).sum().item<double>(), 0.0);  // b
  EXPECT_EQ(g.narrow(1, 4, 3).sum().item<double>(), 0.0);  // c, d
  // The reference's GroupNorm leaks across the graph.
  c.norm = NormKind::group;
  Gsdm leaky(mixed_chain(), c);
  torch::Tensor y = torch::randn({1, 7}).requires_grad_(true);
  leaky->forward(y, torch::tensor({10}), torch::zeros({1, 4}, torch::kBool)).narrow(1, 0, 1).sum().backward();
  EXPECT_GT(y.grad().narrow(1, 4, 3).abs().sum().item<double>(), 0.0);
}

TEST(Gsdm, SparseGatherAndDenseMaskedAgree) {
  torch::manual_seed(2);
  const auto graph = sudoku::graphical_model(2);
  GsdmConfig c = small_config();
  Gsdm sparse(graph, c);
  c.attention = Mechanism::gather;
  Gsdm gather(graph, c);
  torch::NoGradGuard no_grad;
  for (size_t i = 0; i < sparse->parameters().size(); ++i) gather->parameters()[i].copy_(sparse->parameters()[i]);
  torch::Tensor x = torch::randn({3, 64}), t = torch::randint(1000, {3});
  torch::Tensor observed = torch::rand({3, 16}) < 0.3;
  EXPECT_TRUE(torch::allclose(sparse->forward(x, t, observed), gather->forward(x, t, observed), 1e-4, 1e-5));
}

// The reference's unscaled scores equal scaled ones with the queries multiplied by sqrt(head_dim).
TEST(Gsdm, UnscaledAttentionIsScaledAttentionWithLargerQueries) {
  const auto graph = sudoku::graphical_model(2);
  GsdmConfig c = small_config();
  torch::manual_seed(3);
  Gsdm scaled(graph, c);
  c.attention_scaling = Scaling::none;
  torch::manual_seed(3);
  Gsdm unscaled(graph, c);
  torch::NoGradGuard no_grad;
  const double root = std::sqrt(static_cast<double>(c.dim / c.heads));
  for (auto& item : scaled->named_parameters()) {
    if (item.key().find(".qkv.") != std::string::npos) item.value().narrow(0, 0, c.dim).mul_(root);
  }
  torch::Tensor x = torch::randn({3, 64}), t = torch::randint(1000, {3});
  torch::Tensor observed = torch::rand({3, 16}) < 0.3;
  const torch::Tensor a = scaled->forward(x, t, observed), b = unscaled->forward(x, t, observed);
  EXPECT_TRUE(torch::allclose(a, b, 1e-4, 1e-5)) << (a - b).abs().max().item<double>();
  for (auto& item : scaled->named_parameters()) {
    if (item.key().find(".qkv.") != std::string::npos) item.value().narrow(0, 0, c.dim).div_(root * root);
  }
  EXPECT_FALSE(torch::allclose(scaled->forward(x, t, observed), b, 1e-4, 1e-5));
  EXPECT_THROW_WITH(parse_attention_scaling("sqrt"), std::invalid_argument,
                    "unknown attention scaling 'sqrt' (choose inverse-sqrt-dim or none)");
}

// Without the output norm the last attention block feeds the output projections, as in the
// reference; the switches travel with the configuration, and older files get the defaults.
TEST(Gsdm, ReferenceSwitchesTravelWithTheConfiguration) {
  const auto graph = sudoku::graphical_model(2);
  GsdmConfig c = small_config();
  const auto count_parameters = [&graph](const GsdmConfig& config) {
    int64_t count = 0;
    for (const torch::Tensor& p : Gsdm(graph, config)->parameters()) count += p.numel();
    return count;
  };
  const int64_t with_norm = count_parameters(c);
  c.output_norm = false;
  c.attention_scaling = Scaling::none;
  c.time_swish = true;
  c.observed_embedding_init = 1.0;
  EXPECT_EQ(count_parameters(c), with_norm - 2 * c.dim);
  nlohmann::json j = c;
  EXPECT_EQ(j.at("attention_scaling"), "none");
  EXPECT_EQ(j.at("output_norm"), false);
  const GsdmConfig back = j.get<GsdmConfig>();
  EXPECT_EQ(back.attention_scaling, Scaling::none);
  EXPECT_FALSE(back.output_norm);
  EXPECT_TRUE(back.time_swish);
  EXPECT_EQ(back.observed_embedding_init, 1.0);
  for (const char* key : {"attention_scaling", "output_norm", "time_swish", "observed_embedding_init"}) {
    j.erase(key);
  }
  const GsdmConfig old = j.get<GsdmConfig>();
  EXPECT_EQ(old.attention_scaling, Scaling::inverse_sqrt_dim);
  EXPECT_TRUE(old.output_norm);
  EXPECT_FALSE(old.time_swish);
  EXPECT_EQ(old.observed_embedding_init, 0.02);
  // The initial draw's scale: N(0, 1) against the default 0.02.
  torch::manual_seed(4);
  const double wide = Gsdm(graph, c)->named_parameters()["observed_embedding"].std().item<double>();
  EXPECT_GT(wide, 0.5);
  EXPECT_LT(wide, 2.0);
  c.observed_embedding_init = -1;
  EXPECT_THROW_WITH(Gsdm(graph, c), std::invalid_argument,
                    "the observed embedding's initial std must be finite and >= 0");
}

// The reference's time path: swish on the time embedding before each block's projection, the
// same parameters otherwise.
TEST(Gsdm, TimeSwishChangesOnlyTheTimePath) {
  const auto graph = sudoku::graphical_model(2);
  GsdmConfig c = small_config();
  torch::manual_seed(5);
  Gsdm plain(graph, c);
  c.time_swish = true;
  torch::manual_seed(5);
  Gsdm swish(graph, c);
  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 64}), t = torch::randint(1000, {2});
  torch::Tensor observed = torch::rand({2, 16}) < 0.3;
  EXPECT_FALSE(torch::allclose(plain->forward(x, t, observed), swish->forward(x, t, observed)));
  // With the time projections zeroed, the time path no longer matters.
  for (Gsdm* model : {&plain, &swish}) {
    for (auto& item : (*model)->named_parameters()) {
      if (item.key().find(".time_proj.") != std::string::npos) item.value().zero_();
    }
  }
  EXPECT_TRUE(torch::equal(plain->forward(x, t, observed), swish->forward(x, t, observed)));
}

// Permuting columns within a stack leaves the Sudoku mask and the EE groups unchanged, so the
// model is equivariant to it (Theorem 3.1).
TEST(Gsdm, EmbeddingSharingGivesEquivariance) {
  torch::manual_seed(3);
  const auto graph = sudoku::graphical_model(2);
  const graph::IndexPermutation swap_columns{{{"cell", 1}}, {1, 0, 2, 3}};
  ASSERT_TRUE(graph.mask_invariant_under(swap_columns));
  const std::vector<int64_t> pi = graph.node_permutation(swap_columns);
  Gsdm model(graph, small_config(EmbeddingKind::exchangeable));
  // Entry permutation of the flat state: node pi[i] takes node i's block of 4.
  std::vector<int64_t> source(64);
  for (int64_t node = 0; node < 16; ++node) {
    for (int64_t k = 0; k < 4; ++k) source[pi[node] * 4 + k] = node * 4 + k;
  }
  torch::Tensor entry_index = torch::tensor(source, torch::kLong);
  std::vector<int64_t> node_source(16);
  for (int64_t node = 0; node < 16; ++node) node_source[pi[node]] = node;
  torch::Tensor node_index = torch::tensor(node_source, torch::kLong);

  torch::NoGradGuard no_grad;
  torch::Tensor x = torch::randn({2, 64}), t = torch::tensor({5, 700});
  torch::Tensor observed = torch::rand({2, 16}) < 0.5;
  torch::Tensor out = model->forward(x, t, observed);
  torch::Tensor out_of_permuted =
      model->forward(x.index_select(1, entry_index), t, observed.index_select(1, node_index));
  EXPECT_TRUE(torch::allclose(out.index_select(1, entry_index), out_of_permuted, 1e-4, 1e-5));
  // Array embeddings break the symmetry (index codes differ between the swapped columns).
  Gsdm positional(graph, small_config(EmbeddingKind::array));
  EXPECT_FALSE(torch::allclose(positional->forward(x, t, observed).index_select(1, entry_index),
                               positional->forward(x.index_select(1, entry_index), t,
                                                   observed.index_select(1, node_index)),
                               1e-4, 1e-5));
}

TEST(Gsdm, ObservedValuesAreClampedAtEveryStep) {
  torch::manual_seed(4);
  sudoku::TrainedModel trained = sudoku::build_model(
      sudoku::model_metadata(2, sudoku::GridFamily::broad, small_config(),
                             diffusion::ScheduleConfig{}));
  std::mt19937_64 rng(5);
  const sudoku::Grid solution = sudoku::generate_solution(2, rng);
  const sudoku::Grid puzzle = sudoku::observe_random_cells(solution, 6, rng);
  torch::Tensor observed = sudoku::observed_mask({puzzle});
  torch::Tensor values = sudoku::encode({puzzle});
  torch::Tensor entries = trained.model->layout().expand_node_mask(observed);
  diffusion::ModelFn fn = conditioned_model(trained.model, observed, values);
  torch::NoGradGuard no_grad;
  torch::Tensor output = fn(torch::randn({1, 64}), torch::tensor({999}));
  EXPECT_TRUE(torch::equal(output.masked_select(entries), values.masked_select(entries)));

  diffusion::SamplerOptions options;
  int64_t clamped_steps = 0;
  options.clamp = [&](const torch::Tensor& x) {
    ++clamped_steps;
    return torch::where(entries, values, x);
  };
  // The sampler must hand back the clamped state: its result keeps every observed entry.
  const torch::Tensor result = diffusion::sample_ddim(fn, trained.schedule, torch::randn({1, 64}), 10, options);
  EXPECT_TRUE(torch::equal(result.masked_select(entries), values.masked_select(entries)));
  EXPECT_GE(clamped_steps, 10);
  // An untrained model still returns grids that keep every given.
  sudoku::SolveOptions solve_options;
  solve_options.generator = at::make_generator<at::CPUGeneratorImpl>(0);
  const sudoku::Grid sample = sudoku::solve(trained.model, trained.schedule, {puzzle}, solve_options).front();
  for (int c = 0; c < 16; ++c) {
    if (puzzle.cells[c] != sudoku::kBlank) EXPECT_EQ(sample.cells[c], puzzle.cells[c]);
  }
}

// The evaluation's settings, in their order, each reported as it is measured, and the same
// puzzles and samples again for the same seed.
TEST(Gsdm, SudokuEvaluationScoresEachSettingInOrderAndRepeatsPerSeed) {
  torch::manual_seed(7);
  const sudoku::TrainedModel trained = sudoku::build_model(sudoku::model_metadata(
      2, sudoku::GridFamily::broad, small_config(), diffusion::ScheduleConfig{}));
  sudoku::EvalRequest request;
  request.count = 2;
  request.diversity_samples = 3;
  request.seed = 5;
  request.sampling.ddim_steps = 3;
  std::vector<std::string> reported;
  int64_t diversity_calls = 0;
  request.on_setting = [&](const std::string& setting, const sudoku::Accuracy& accuracy) {
    reported.push_back(setting);
    EXPECT_EQ(accuracy.puzzles, 2);
  };
  request.on_diversity = [&](const sudoku::Diversity& diversity) {
    ++diversity_calls;
    EXPECT_EQ(diversity.samples, 3);
  };
  auto run = [&] {
    request.sampling.generator = at::make_generator<at::CPUGeneratorImpl>(request.seed);
    nlohmann::json rows = sudoku::evaluate_settings(trained, request).rows;
    for (auto& row : rows) row.erase("seconds_per_puzzle");
    return rows;
  };
  const nlohmann::json first = run();
  // A 4 x 4 model has no 16-given or unique-solution settings.
  EXPECT_EQ(reported, (std::vector<std::string>{"observed 0 (unconditional)", "observed 20%",
                                                "observed 50%", "observed 80%"}));
  EXPECT_EQ(diversity_calls, 1);
  ASSERT_EQ(first.size(), 5u);
  EXPECT_EQ(first[4]["setting"], "diversity");
  EXPECT_EQ(run(), first);
}

// The "puzzles" variant's examples: about half observe the givens of a unique-solution puzzle
// (17-45 of them), where random cells seldom pin one solution; 9x9 only.
TEST(Gsdm, SudokuPuzzlesVariantObservesUniquePuzzlesAboutHalfTheTime) {
  const auto unique_puzzles = [](bool variant) {
    std::mt19937_64 rng(4);
    const sudoku::Batch batch = sudoku::make_training_batch(3, 40, rng, sudoku::GridFamily::broad, variant);
    std::vector<sudoku::Grid> puzzles = sudoku::decode(batch.x0, 3);
    int unique = 0;
    for (size_t b = 0; b < puzzles.size(); ++b) {
      int givens = 0;
      for (int c = 0; c < 81; ++c) {
        if (!batch.observed[b][c].item<bool>()) puzzles[b].cells[c] = sudoku::kBlank;
        givens += puzzles[b].cells[c] != sudoku::kBlank;
      }
      unique += givens >= 17 && givens <= 45 && sudoku::count_solutions(puzzles[b], 2) == 1;
    }
    return unique;
  };
  const int with_variant = unique_puzzles(true), without = unique_puzzles(false);
  EXPECT_GE(with_variant, 14);
  EXPECT_LE(with_variant, 30);
  EXPECT_LE(without, 6);
  std::mt19937_64 rng(1);
  EXPECT_THROW_WITH(sudoku::make_training_batch(2, 1, rng, sudoku::GridFamily::broad, true),
                    std::invalid_argument, "sudoku: unique puzzles are 9x9 only");
}

// Only the settings named run, in their order, on the puzzles a full run scores: a masked model at
// temperature 0 draws nothing while it samples, so its rows equal the full run's.
TEST(Gsdm, SudokuEvaluationRunsOnlyTheNamedSettingsOnTheSamePuzzles) {
  torch::manual_seed(7);
  GsdmConfig config = small_config();
  config.process = DiffusionProcess::masked;
  const sudoku::TrainedModel trained = sudoku::build_model(
      sudoku::model_metadata(2, sudoku::GridFamily::broad, config, diffusion::ScheduleConfig{}));
  sudoku::EvalRequest request;
  request.count = 3;
  request.diversity_samples = 2;
  request.seed = 5;
  auto run = [&] {
    request.sampling.generator = at::make_generator<at::CPUGeneratorImpl>(1);
    nlohmann::json rows = sudoku::evaluate_settings(trained, request).rows;
    for (auto& row : rows) row.erase("seconds_per_puzzle");
    return rows;
  };
  const nlohmann::json all = run();
  ASSERT_EQ(all.size(), 5u);  // nothing, 20 %, 50 %, 80 %, diversity
  request.settings = {"80%", "nothing"};
  const nlohmann::json some = run();
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[0], all[0]);
  EXPECT_EQ(some[1], all[3]);
  request.settings = {"half"};
  EXPECT_THROW_WITH(sudoku::evaluate_settings(trained, request), std::invalid_argument,
                    "sudoku eval: no setting 'half' (nothing, 16, 20%, 50%, 80%, 25-35, diversity, "
                    "26-45, 17-25)");
}

// Each puzzle is scored by up to `samples` draws, and each row says how many it allowed and drew;
// the puzzles come from the grids the request names, else from those the model trained on.
TEST(Gsdm, SudokuEvaluationDrawsUpToKSamplesFromTheRequestedGrids) {
  torch::manual_seed(7);
  const sudoku::TrainedModel trained = sudoku::build_model(sudoku::model_metadata(
      2, sudoku::GridFamily::pattern, small_config(), diffusion::ScheduleConfig{}));
  sudoku::EvalRequest request;
  request.count = 2;
  request.diversity_samples = 2;
  request.samples = 3;
  request.sampling.ddim_steps = 2;
  request.sampling.generator = at::make_generator<at::CPUGeneratorImpl>(1);
  EXPECT_EQ(sudoku::puzzle_grids(trained, request), sudoku::GridFamily::pattern);
  const sudoku::EvalReport report = sudoku::evaluate_settings(trained, request);
  EXPECT_EQ(report.grids, sudoku::GridFamily::pattern);
  for (const nlohmann::json& row : report.rows) {
    if (row.at("setting") == "diversity") continue;
    EXPECT_EQ(row.at("grids"), "pattern");
    EXPECT_EQ(row.at("max_samples"), 3);
    EXPECT_GE(row.at("samples_per_puzzle").get<double>(), 1.0);
    EXPECT_LE(row.at("samples_per_puzzle").get<double>(), 3.0);
  }
  request.grids = sudoku::GridFamily::broad;
  EXPECT_EQ(sudoku::puzzle_grids(trained, request), sudoku::GridFamily::broad);
}

// `sudoku solve` as a library call: puzzles from the request and a file, named in every message;
// a puzzle without any solution draws no sample; a complete grid is solved as given.
TEST(Gsdm, SolvePuzzlesNamesEachPuzzleAndReportsWhatFailed) {
  torch::manual_seed(7);
  const TemporaryDirectory directory;
  sudoku::SolveRequest request;
  request.model_path = directory.file("sudoku4.pt");
  sudoku::save_model(request.model_path,
                     sudoku::build_model(sudoku::model_metadata(2, sudoku::GridFamily::broad, small_config(),
                                                                diffusion::ScheduleConfig{})));
  request.samples = 2;
  request.sampling.ddim_steps = 2;
  request.sampling.generator = at::make_generator<at::CPUGeneratorImpl>(1);
  request.file = directory.file("puzzles.txt");
  std::FILE* file = std::fopen(request.file.c_str(), "w");
  std::fputs("1234341221434321\n\n12.....3..3.....\n", file);
  std::fclose(file);
  request.puzzles = {"1234341221434321"};
  const sudoku::SolveReport report = sudoku::solve_puzzles(request);
  ASSERT_EQ(report.puzzles.size(), 3u);
  EXPECT_EQ(report.puzzles[0].name, "the puzzle given");
  EXPECT_EQ(report.puzzles[1].name, request.file + " line 1");
  EXPECT_EQ(report.puzzles[2].name, request.file + " line 3");
  EXPECT_EQ(report.puzzles[0].attempt.valid, 1);
  EXPECT_EQ(report.puzzles[0].attempt.drawn, 1);
  EXPECT_FALSE(report.puzzles[2].has_solution);
  EXPECT_EQ(report.puzzles[2].attempt.drawn, 0);
  EXPECT_EQ(report.solved(), 2);
  EXPECT_EQ(report.failures(2), request.file + " line 3 has no solution at all");

  request.puzzles = {std::string(81, '.')};
  EXPECT_THROW_WITH(sudoku::solve_puzzles(request), std::invalid_argument,
                    "the puzzle given: the model solves 4x4 puzzles, this one is 9x9");
  request.puzzles.clear();
  file = std::fopen(request.file.c_str(), "w");
  std::fputs("1234341221434321\n12x4\n", file);
  std::fclose(file);
  EXPECT_THROW_WITH(sudoku::solve_puzzles(request), std::invalid_argument, request.file + " line 2: ");
  request.file.clear();
  EXPECT_THROW_WITH(sudoku::solve_puzzles(request), std::invalid_argument,
                    "no puzzle given (PUZZLE or --file)");
}

// A file of many failing puzzles names the first five and counts the rest, in both kinds of failure.
TEST(Gsdm, SolveFailuresNameAtMostFivePuzzles) {
  sudoku::SolveReport report;
  for (int line = 1; line <= 7; ++line) {
    report.puzzles.push_back({"f line " + std::to_string(line), /*has_solution=*/line > 2, {}});
  }
  EXPECT_EQ(report.failures(4),
            "no solution at all for f line 1, f line 2; no valid solution in 4 sample(s) for "
            "f line 3, f line 4, f line 5, f line 6, f line 7 (try more --samples)");
  report.puzzles.push_back({"f line 8", true, {}});
  for (sudoku::SolvedPuzzle& puzzle : report.puzzles) puzzle.has_solution = !puzzle.has_solution;
  EXPECT_EQ(report.failures(4),
            "no solution at all for 6 puzzles: f line 3, f line 4, f line 5, f line 6, f line 7 "
            "and 1 more; no valid solution in 4 sample(s) for f line 1, f line 2 (try more --samples)");
  for (sudoku::SolvedPuzzle& puzzle : report.puzzles) puzzle.has_solution = true;
  EXPECT_EQ(report.failures(1),
            "no valid solution in 1 sample(s) for 8 puzzles: f line 1, f line 2, f line 3, "
            "f line 4, f line 5 and 3 more (try more --samples)");
}

// Drawing until valid: a solved puzzle needs one sample, a contradictory one takes all K (in
// rounds 1, 2, 4, ...), and K = 1 is plain batched solving with the same noise.
TEST(Gsdm, SolveUntilValidStopsAtTheFirstValidSample) {
  torch::manual_seed(7);
  const sudoku::TrainedModel trained = sudoku::build_model(sudoku::model_metadata(
      2, sudoku::GridFamily::broad, small_config(), diffusion::ScheduleConfig{}));
  std::mt19937_64 rng(3);
  const sudoku::Grid solved = sudoku::generate_solution(2, rng);
  sudoku::Grid contradictory = sudoku::observe_random_cells(solved, 0, rng);
  contradictory.cells[0] = contradictory.cells[1] = 0;  // the same digit twice in row 1
  const sudoku::Grid open = sudoku::observe_random_cells(solved, 6, rng);
  const auto options = [] {
    sudoku::SolveOptions o;
    o.generator = at::make_generator<at::CPUGeneratorImpl>(11);
    o.ddim_steps = 3;
    return o;
  };
  const std::vector<sudoku::Attempt> attempts =
      sudoku::solve_until_valid(trained, {solved, contradictory, open}, 6, options(), 4);
  EXPECT_EQ(attempts[0].drawn, 1);
  EXPECT_EQ(attempts[0].valid, 1);
  EXPECT_EQ(attempts[0].shown.cells, solved.cells);
  EXPECT_EQ(attempts[1].drawn, 6);
  EXPECT_EQ(attempts[1].valid, 0);
  EXPECT_GE(attempts[2].drawn, 1);
  EXPECT_LE(attempts[2].drawn, 6);
  EXPECT_EQ(attempts[2].valid > 0, sudoku::is_valid_solution(attempts[2].shown, open));
  const sudoku::Accuracy accuracy = sudoku::evaluate(trained, {solved, contradictory, open}, options(), 6, 4);
  EXPECT_EQ(accuracy.samples, attempts[0].drawn + attempts[1].drawn + attempts[2].drawn);
  EXPECT_EQ(accuracy.valid, 1 + (attempts[2].valid > 0));

  const std::vector<sudoku::Grid> puzzles = {open, contradictory, open, solved, open};
  const std::vector<sudoku::Attempt> once = sudoku::solve_until_valid(trained, puzzles, 1, options(), 2);
  sudoku::SolveOptions plain = options();
  std::vector<sudoku::Grid> expected;
  for (size_t first = 0; first < puzzles.size(); first += 2) {
    const std::vector<sudoku::Grid> chunk(puzzles.begin() + first,
                                          puzzles.begin() + std::min(puzzles.size(), first + 2));
    for (const sudoku::Grid& g : sudoku::solve(trained.model, trained.schedule, chunk, plain)) expected.push_back(g);
  }
  for (size_t i = 0; i < puzzles.size(); ++i) {
    EXPECT_EQ(once[i].drawn, 1);
    EXPECT_EQ(once[i].shown.cells, expected[i].cells) << i;
  }
  EXPECT_THROW_WITH(sudoku::solve_until_valid(trained, {open}, 0, options()), std::invalid_argument,
                    "samples per puzzle and batch must be >= 1");
}

TEST(Gsdm, ModelFileRoundTripGivesIdenticalOutputs) {
  torch::manual_seed(6);
  sudoku::TrainedModel trained = sudoku::build_model(
      sudoku::model_metadata(2, sudoku::GridFamily::pattern, small_config(EmbeddingKind::exchangeable),
                             diffusion::ScheduleConfig{}));
  const TemporaryDirectory directory;
  const std::string path = directory.file("gsdm_roundtrip.pt");
  sudoku::save_model(path, trained);
  sudoku::TrainedModel loaded = sudoku::load_model(path);
  EXPECT_EQ(nlohmann::json(loaded.model->config()), nlohmann::json(trained.model->config()));
  EXPECT_EQ(loaded.grids, sudoku::GridFamily::pattern);
  torch::NoGradGuard no_grad;
  trained.model->eval();
  torch::Tensor x = torch::randn({4, 64}), t = torch::randint(1000, {4});
  torch::Tensor observed = torch::rand({4, 16}) < 0.5;
  EXPECT_TRUE(torch::equal(trained.model->forward(x, t, observed), loaded.model->forward(x, t, observed)));
}

TrainingProblem sudoku4_problem(const nlohmann::json& metadata) {
  TrainingProblem problem;
  problem.metadata = metadata;
  problem.make_batch = [](int64_t batch, std::mt19937_64& rng) {
    sudoku::Batch b = sudoku::make_training_batch(2, batch, rng);
    return TrainingBatch{b.x0, b.observed};
  };
  return problem;
}

TEST(GsdmTraining, PartsOfABatchAddUpToItsLossAndGradients) {
  torch::manual_seed(0);
  Gsdm model(mixed_chain(), small_config());
  const diffusion::NoiseSchedule schedule{diffusion::ScheduleConfig{}};
  const torch::Tensor x0 = torch::randn({7, 7}), observed = torch::rand({7, 4}) < 0.3;
  const auto gradients = [&](const torch::Tensor& loss) {
    return torch::autograd::grad({loss}, model->parameters(), {}, false, false, true);
  };
  const torch::Tensor loss = training_loss(model, schedule, x0, observed,
                                           at::make_generator<at::CPUGeneratorImpl>(4));
  const auto expected = gradients(loss);
  const diffusion::TrainingExample whole =
      training_example(model, schedule, x0, at::make_generator<at::CPUGeneratorImpl>(4));
  const std::vector<train::LossPart> parts =
      loss_parts(model, schedule, x0, observed, whole, {{0, 2}, {1, 2}});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].weight, 3.0);
  EXPECT_EQ(parts[1].weight, 4.0);
  const torch::Tensor sum = parts[0].mean_loss() * (3.0 / 7.0) + parts[1].mean_loss() * (4.0 / 7.0);
  EXPECT_NEAR(sum.item<double>(), loss.item<double>(), 1e-5 * loss.item<double>());
  const auto actual = gradients(sum);
  for (size_t i = 0; i < expected.size(); ++i) {
    ASSERT_EQ(expected[i].defined(), actual[i].defined()) << "parameter " << i;
    if (expected[i].defined()) {
      EXPECT_TRUE(torch::allclose(actual[i], expected[i], 1e-4, 1e-6)) << "parameter " << i;
    }
  }
}

TEST(GsdmTraining, ResumeContinuesTheSameTrajectory) {
  const nlohmann::json metadata = sudoku::model_metadata(2, sudoku::GridFamily::broad, small_config(),
                                                         diffusion::ScheduleConfig{});
  auto run = [&](const std::string& checkpoint, int64_t first_leg) {
    torch::manual_seed(7);
    sudoku::TrainedModel a = sudoku::build_model(metadata), ema = sudoku::build_model(metadata);
    TrainingOptions options;
    options.batch = 8;
    options.loop.learning_rate = 1e-3;
    options.loop.checkpoint_path = checkpoint;
    options.loop.show_progress = false;
    options.loop.resume = true;
    if (first_leg > 0) {
      options.loop.steps = first_leg;
      train(a.model, ema.model, a.schedule, sudoku4_problem(metadata), options, 11);
      torch::manual_seed(12345);  // training draws nothing from the global generator
      a = sudoku::build_model(metadata);
    }
    options.loop.steps = 4;
    train(a.model, ema.model, a.schedule, sudoku4_problem(metadata), options, 11);
    return std::make_pair(a.model, ema.model);
  };
  const TemporaryDirectory directory;
  const std::string straight = directory.file("straight.pt");
  const std::string split = directory.file("split.pt");
  auto [model_a, ema_a] = run(straight, 0);
  auto [model_b, ema_b] = run(split, 2);
  for (size_t i = 0; i < model_a->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(model_a->parameters()[i], model_b->parameters()[i])) << "parameter " << i;
    EXPECT_TRUE(torch::equal(ema_a->parameters()[i], ema_b->parameters()[i])) << "EMA parameter " << i;
  }
}

// A 4x4 Sudoku GSDM trained through the one loop, with validation that samples.
struct TinySudokuTraining {
  sudoku::TrainedModel trained, averaged;
  gsdm::TrainingProblem problem;
  std::vector<sudoku::Grid> validation;
  TinySudokuTraining() {
    gsdm::GsdmConfig config;
    config.dim = 16;
    config.blocks = 1;
    config.heads = 2;
    const nlohmann::json metadata =
        sudoku::model_metadata(2, sudoku::GridFamily::broad, config, diffusion::ScheduleConfig{});
    torch::manual_seed(3);
    trained = sudoku::build_model(metadata);
    averaged = sudoku::build_model(metadata);
    std::mt19937_64 rng(11);
    for (int i = 0; i < 4; ++i) {
      validation.push_back(sudoku::observe_random_cells(sudoku::generate_solution(2, rng), 8, rng));
    }
    problem.metadata = metadata;
    problem.make_batch = [](int64_t batch, std::mt19937_64& rng) {
      sudoku::Batch b = sudoku::make_training_batch(2, batch, rng);
      return gsdm::TrainingBatch{b.x0, b.observed};
    };
    problem.validate = [this](gsdm::Gsdm ema_model) {
      sudoku::SolveOptions options;
      options.generator = at::make_generator<at::CPUGeneratorImpl>(5);
      options.ddim_steps = 3;
      sudoku::TrainedModel view{2, sudoku::GridFamily::broad, ema_model, trained.schedule};
      return nlohmann::json{{"valid", sudoku::evaluate(view, validation, options).valid_fraction()}};
    };
  }
  void train(gsdm::TrainingOptions options) {
    options.batch = 8;
    options.loop.learning_rate = 1e-3;
    options.loop.show_progress = false;
    gsdm::train(trained.model, averaged.model, trained.schedule, problem, options, /*data_seed=*/7);
  }
};

// A batch no machine holds is refused before the first step, by the library itself.
TEST(GsdmTraining, ABatchBeyondTheMachineIsRefusedBeforeTheFirstStep) {
  TinySudokuTraining tiny;
  gsdm::TrainingOptions options;
  options.batch = 1000000000000;
  EXPECT_THROW_WITH(gsdm::train(tiny.trained.model, tiny.averaged.model, tiny.trained.schedule,
                                tiny.problem, options, /*data_seed=*/7),
                    std::invalid_argument, "a training batch of 1000000000000 needs");
}

TEST(GsdmTraining, ValidationLeavesTheTrainingTrajectoryAlone) {
  TinySudokuTraining quiet, validated;
  gsdm::TrainingOptions options;
  options.loop.steps = 6;
  quiet.train(options);
  options.loop.validate_every = 2;
  validated.train(options);
  expect_identical(*quiet.trained.model, *validated.trained.model);
}

TEST(GsdmTraining, HalfThenResumeEqualsStraightRunBitForBit) {
  TemporaryDirectory directory;
  gsdm::TrainingOptions options;
  options.loop.steps = 6;
  options.loop.validate_every = 2;
  TinySudokuTraining straight;
  straight.train(options);

  options.loop.checkpoint_path = directory.file("gsdm.ckpt");
  options.loop.steps = 3;
  TinySudokuTraining{}.train(options);
  TinySudokuTraining resumed;
  torch::manual_seed(99);  // another process's default generator
  options.loop.steps = 6;
  options.loop.resume = true;
  resumed.train(options);
  expect_identical(*straight.trained.model, *resumed.trained.model);
  expect_identical(*straight.averaged.model, *resumed.averaged.model);
}

TEST(SinusoidalEmbedding, MatchesItsFormulaInFloat64) {
  const torch::Tensor positions = torch::tensor({0.0, 3.0, 999.0});
  for (FrequencySpacing spacing : {FrequencySpacing::transformer, FrequencySpacing::endpoint}) {
    const int64_t dim = 43, half = 21;  // odd: the last column is zero padding
    const double steps = spacing == FrequencySpacing::transformer ? half : half - 1;
    const torch::Tensor frequencies =
        torch::exp(-std::log(10000.0) * torch::arange(half, torch::kDouble) / steps);
    const torch::Tensor angles = positions.to(torch::kDouble).unsqueeze(1) * frequencies.unsqueeze(0);
    const torch::Tensor expected =
        torch::cat({torch::sin(angles), torch::cos(angles), torch::zeros({3, 1}, torch::kDouble)}, 1);
    const torch::Tensor code = sinusoidal_embedding(positions, dim, spacing);
    ASSERT_EQ(code.sizes(), expected.sizes());
    EXPECT_TRUE(torch::allclose(code.to(torch::kDouble), expected, 0, 2e-4)) << (code - expected).abs().max();
  }
}

}  // namespace
}  // namespace structdiff::gsdm
