// The GSDM problem registry: each problem's graph (mask sizes from the spec note), its examples'
// identities, its metric, and the shared model file and evaluation.
#include <random>
#include <set>
#include <tuple>

#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/gsdm_problems.h"
#include "structdiff/runtime.h"
#include "support/expect_throw.h"
#include "support/modules.h"
#include "support/temporary_files.h"

namespace structdiff::gsdm {
namespace {

graph::GraphicalModel sorting_graph(int64_t n, bool intermediates = true) {
  const Problem& sorting = find_problem("sorting");
  return sorting.graph(resolve_options(sorting, {{n}, intermediates}));
}

TEST(Registry, UnknownProblemsAndSizesAreNamed) {
  EXPECT_THROW_WITH(find_problem("sortng"), std::invalid_argument,
                    "unknown problem 'sortng' (did you mean 'sorting'?); the problems are sudoku, "
                    "sorting, bcmf, matrix-inversion, boolean");
  EXPECT_THROW_WITH(resolve_options(find_problem("sorting"), {{1}, true}), std::invalid_argument,
                    "--size for sorting (list length) must be in 2 .. 64, got 1");
  EXPECT_THROW_WITH(resolve_options(find_problem("sudoku"), {{9}, false}), std::invalid_argument,
                    "sudoku has no intermediate variables to drop");
  EXPECT_THROW_WITH(resolve_options(find_problem("sudoku"), {{10}, true}), std::invalid_argument,
                    "--size for sudoku (grid side: 4, 9, 16 or 25): a square of 2..5, got 10");
  ProblemOptions puzzles_at_4{{4}, true};
  puzzles_at_4.variant = "puzzles";
  EXPECT_THROW_WITH(resolve_options(find_problem("sudoku"), puzzles_at_4), std::invalid_argument,
                    "--size for sudoku (grid side: 4, 9, 16 or 25): the puzzles variant is 9x9 only, got 4");
  EXPECT_THROW_WITH(resolve_options(find_problem("sudoku"), {{3}, true}), std::invalid_argument,
                    "--size for sudoku (grid side: 4, 9, 16 or 25) must be in 4 .. 25, got 3");
  EXPECT_EQ(resolve_options(find_problem("sorting"), {}).size, std::vector<int64_t>{5});
}

// Mask statistics of the spec note (§2.2), self-edges included.
TEST(Sorting, MaskSizesAreTheSpecNotes) {
  const AttentionPattern n5 = sorting_graph(5).compile();
  EXPECT_EQ(sorting_graph(5).num_nodes(), 60);
  EXPECT_EQ(n5.num_entries(), 418);
  const AttentionPattern n20 = sorting_graph(20).compile();
  EXPECT_EQ(sorting_graph(20).num_nodes(), 840);
  EXPECT_EQ(n20.num_entries(), 18478);
  EXPECT_EQ(n20.stats().max_degree, 40);
  const AttentionPattern without = sorting_graph(20, false).compile();
  EXPECT_EQ(sorting_graph(20, false).num_nodes(), 440);
  EXPECT_EQ(without.num_entries(), 17278);
  EXPECT_EQ(without.stats().max_degree, 43);
}

// Theorem 3.1 for the shared embeddings: relabelling j jointly in u_j, P_.j and C_.j keeps the
// mask; relabelling the sorted list's positions does not.
// Fig. 7's other graphs of the same data: s as one factor (n (n - 1) pairs instead of the
// neighbours' 2 (n - 1)) or without any.
TEST(Sorting, VariantsChangeOnlyTheFactorsOnS) {
  const Problem& sorting = find_problem("sorting");
  ProblemOptions options{{20}};
  options.variant = "s-fully-connected";
  EXPECT_EQ(sorting.graph(resolve_options(sorting, options)).compile().num_entries(),
            18478 - 38 + 380);
  options.variant = "unconstrained-s";
  EXPECT_EQ(sorting.graph(resolve_options(sorting, options)).compile().num_entries(), 18478 - 38);
  options.variant = "s-fully-conected";
  EXPECT_THROW_WITH(resolve_options(sorting, options), std::invalid_argument,
                    "--variant 's-fully-conected' (did you mean 's-fully-connected'?): sorting's "
                    "variants are s-fully-connected, unconstrained-s");
  ProblemOptions factorisation{{2, 2, 2}};
  factorisation.variant = "unconstrained-s";
  EXPECT_THROW_WITH(resolve_options(find_problem("bcmf"), factorisation), std::invalid_argument,
                    "--variant 'unconstrained-s': bcmf's variants are unconditional");
  factorisation.size = {9};
  EXPECT_THROW_WITH(resolve_options(find_problem("sudoku"), factorisation), std::invalid_argument,
                    "--variant 'unconstrained-s': sudoku's variants are pattern");
}

TEST(Sorting, SharedEmbeddingsAreLicensedByTheMask) {
  const graph::GraphicalModel model = sorting_graph(4);
  EXPECT_TRUE(model.mask_invariant_under({{{"u", 0}, {"P", 1}, {"C", 1}}, {2, 0, 3, 1}}));
  EXPECT_FALSE(model.mask_invariant_under({{{"s", 0}}, {1, 0, 2, 3}}));
}

TEST(Sorting, ExamplesHoldTheGeneratorsIdentities) {
  for (const bool intermediates : {true, false}) {
    const Problem& sorting = find_problem("sorting");
    const ProblemOptions options{{6}, intermediates};
    const graph::GraphicalModel model = sorting.graph(options);
    std::mt19937_64 rng(3);
    const TrainingBatch batch = sorting.make_examples(model, options, 8, rng);
    const torch::Tensor values = decode_state(StateLayout(model), model, batch.x0);
    const int64_t n = 6;
    const torch::Tensor u = values.narrow(1, 0, n);
    const torch::Tensor P = values.narrow(1, model.array("P").first_node, n * n).view({8, n, n});
    const torch::Tensor s = values.narrow(1, model.array("s").first_node, n);
    EXPECT_TRUE(P.sum(1).eq(1).all().item<bool>());
    EXPECT_TRUE(P.sum(2).eq(1).all().item<bool>());
    EXPECT_TRUE(torch::allclose(s, torch::bmm(P, u.unsqueeze(2)).squeeze(2)));
    EXPECT_TRUE((s.narrow(1, 1, n - 1) >= s.narrow(1, 0, n - 1)).all().item<bool>());
    if (intermediates) {
      const torch::Tensor C = values.narrow(1, model.array("C").first_node, n * n).view({8, n, n});
      EXPECT_TRUE(torch::allclose(C, P * u.unsqueeze(1)));
      EXPECT_TRUE(torch::allclose(C.sum(2), s));
    }
    // Only the list is observed.
    EXPECT_TRUE(batch.observed.narrow(1, 0, n).all().item<bool>());
    EXPECT_EQ(batch.observed.sum().item<int64_t>(), 8 * n);
    EXPECT_TRUE(torch::equal(encode_state(StateLayout(model), model, values), batch.x0));
  }
}

TEST(Sorting, ScoreIsZeroForTheTruthAndCountsWrongRows) {
  const Problem& sorting = find_problem("sorting");
  const ProblemOptions options{{5}, true};
  const graph::GraphicalModel model = sorting.graph(options);
  std::mt19937_64 rng(4);
  const TrainingBatch batch = sorting.make_examples(model, options, 4, rng);
  nlohmann::json perfect = sorting.score(model, options, batch, batch.x0);
  EXPECT_EQ(perfect["rmse"], 0.0);
  EXPECT_EQ(perfect["lists_sorted"], 1.0);
  EXPECT_EQ(perfect["rows_correct"], 1.0);
  EXPECT_EQ(perfect["permutation_matrices"], 1.0);
  EXPECT_NEAR(perfect["baseline_random_permutation_rmse"].get<double>(), std::sqrt(1.6), 1e-12);
  // Swap the first two rows of P in the first example: two rows wrong, one list unsorted.
  const StateLayout layout(model);
  torch::Tensor values = decode_state(layout, model, batch.x0);
  torch::Tensor P = values.narrow(1, model.array("P").first_node, 25).view({4, 5, 5});
  const torch::Tensor first = P[0][0].clone();
  P[0][0].copy_(P[0][1]);
  P[0][1].copy_(first);
  const nlohmann::json swapped =
      sorting.score(model, options, batch, encode_state(layout, model, values));
  EXPECT_GT(swapped["rmse"].get<double>(), 0.0);
  EXPECT_EQ(swapped["rows_correct"], 18.0 / 20.0);
  EXPECT_EQ(swapped["lists_sorted"], 0.75);
  EXPECT_EQ(swapped["permutation_matrices"], 1.0);
}

graph::GraphicalModel bcmf_graph(std::vector<int64_t> size, bool intermediates = true) {
  const Problem& bcmf = find_problem("bcmf");
  return bcmf.graph(resolve_options(bcmf, {std::move(size), intermediates}));
}

// Mask statistics of the spec note (§2.3), self-edges included; (3,3,2) is the paper's Fig. 1.
TEST(Bcmf, MaskSizesAreTheSpecNotes) {
  EXPECT_EQ(bcmf_graph({3, 3, 2}).num_nodes(), 39);
  EXPECT_EQ(bcmf_graph({3, 3, 2}).compile().num_entries(), 147);
  EXPECT_EQ(bcmf_graph({8, 8, 4}).num_nodes(), 384);
  EXPECT_EQ(bcmf_graph({8, 8, 4}).compile().num_entries(), 1920);
  const AttentionPattern big = bcmf_graph({16, 16, 8}).compile();
  EXPECT_EQ(bcmf_graph({16, 16, 8}).num_nodes(), 2560);
  EXPECT_EQ(big.num_entries(), 14848);
  EXPECT_EQ(big.stats().max_degree, 17);
  EXPECT_EQ(bcmf_graph({16, 16, 8}, false).num_nodes(), 512);
  EXPECT_EQ(bcmf_graph({16, 16, 8}, false).compile().num_entries(), 8704);
}

// The plates: relabelling the rank index l (or a row index i) jointly keeps the mask.
TEST(Bcmf, PlatesLicenseTheSharedEmbeddings) {
  const graph::GraphicalModel model = bcmf_graph({3, 4, 2});
  EXPECT_TRUE(model.mask_invariant_under({{{"A", 1}, {"R", 0}, {"C", 2}}, {1, 0}}));
  EXPECT_TRUE(model.mask_invariant_under({{{"A", 0}, {"C", 0}, {"E", 0}}, {2, 0, 1}}));
  EXPECT_FALSE(model.mask_invariant_under({{{"A", 1}}, {1, 0}}));
}

TEST(Bcmf, ExamplesHoldTheGeneratorsIdentitiesAndTheTruthScoresZero) {
  const Problem& bcmf = find_problem("bcmf");
  const ProblemOptions options{{3, 4, 2}, true};
  const graph::GraphicalModel model = bcmf.graph(options);
  std::mt19937_64 rng(8);
  const TrainingBatch batch = bcmf.make_examples(model, options, 16, rng);
  const torch::Tensor values = decode_state(StateLayout(model), model, batch.x0);
  const auto part = [&](const char* name) {
    const graph::Array& a = model.array(name);
    return values.narrow(1, a.first_node, a.size());
  };
  const torch::Tensor A = part("A").view({16, 3, 2}), R = part("R").view({16, 2, 4});
  EXPECT_TRUE((A >= 0).logical_and(A <= 1).all().item<bool>());
  EXPECT_TRUE(R.eq(0).logical_or(R.eq(1)).all().item<bool>());
  EXPECT_TRUE(torch::allclose(part("E").view({16, 3, 4}), torch::bmm(A, R)));
  const torch::Tensor C = part("C").view({16, 3, 4, 2});
  EXPECT_TRUE(torch::allclose(C.sum(3), part("E").view({16, 3, 4})));
  EXPECT_EQ(batch.observed.sum().item<int64_t>(), 16 * 12);
  const nlohmann::json perfect = bcmf.score(model, options, batch, batch.x0);
  EXPECT_NEAR(perfect["rmse"].get<double>(), 0.0, 1e-6);
  EXPECT_NEAR(perfect["baseline_prior_rmse"].get<double>(), std::sqrt(2 * 2 * (0.1 - 0.0225)),
              1e-12);

  // A sample whose E is off by 0.5 everywhere: the given E is what counts when E is observed;
  // unconditionally (nothing observed, paper Fig. 13) the sample's own E is.
  const graph::Array& E = model.array("E");
  const torch::Tensor shifted_e = batch.x0.clone();
  shifted_e.narrow(1, StateLayout(model).node_offset[E.first_node], E.size()).add_(0.5);
  EXPECT_NEAR(bcmf.score(model, options, batch, shifted_e)["rmse"].get<double>(), 0.0, 1e-6);
  ProblemOptions unconditional = options;
  unconditional.variant = "unconditional";
  const TrainingBatch joint = bcmf.make_examples(model, unconditional, 16, rng);
  EXPECT_EQ(joint.observed.sum().item<int64_t>(), 0);
  EXPECT_NEAR(bcmf.score(model, unconditional, joint, joint.x0)["rmse"].get<double>(), 0.0, 1e-6);
  const torch::Tensor shifted = joint.x0.clone();
  shifted.narrow(1, StateLayout(model).node_offset[E.first_node], E.size()).add_(0.5);
  EXPECT_NEAR(bcmf.score(model, unconditional, joint, shifted)["rmse"].get<double>(), 0.5, 1e-5);
}

// Mask statistics of the spec note (§2.5); test examples have E = I and R = A^-1.
TEST(MatrixInversion, MaskSizesAndTheInversionExamples) {
  const Problem& inversion = find_problem("matrix-inversion");
  const ProblemOptions options = resolve_options(inversion, {});
  const graph::GraphicalModel model = inversion.graph(options);
  EXPECT_EQ(model.num_nodes(), 200);
  const AttentionPattern mask = model.compile();
  EXPECT_EQ(mask.num_entries(), 950);
  EXPECT_EQ(mask.stats().max_degree, 6);
  std::mt19937_64 rng(9);
  const TrainingBatch test = inversion.make_test_examples(model, options, 8, rng);
  const torch::Tensor values = decode_state(StateLayout(model), model, test.x0);
  const auto part = [&](const char* name) {
    const graph::Array& a = model.array(name);
    return values.narrow(1, a.first_node, a.size()).view({8, 5, 5});
  };
  EXPECT_TRUE(torch::allclose(part("E"), torch::eye(5).expand({8, 5, 5})));
  EXPECT_TRUE(torch::allclose(torch::bmm(part("A"), part("R")), part("E"), 1e-4, 1e-4));
  EXPECT_EQ(test.observed.sum().item<int64_t>(), 8 * 50);
  const nlohmann::json perfect = inversion.score(model, options, test, test.x0);
  EXPECT_LT(perfect["median_rmse_AR_E"].get<double>(), 1e-4);
  EXPECT_EQ(perfect["median_rmse_R"], 0.0);
  EXPECT_NEAR(perfect["baseline_zero_median_rmse_AR_E"].get<double>(), std::sqrt(0.2), 1e-6);
  const TrainingBatch training = inversion.make_examples(model, options, 8, rng);
  EXPECT_GT(inversion.score(model, options, training, training.x0)["well_conditioned_fraction"]
                .get<double>(),
            0.0);
}

// Mask statistics of the spec note (§2.4); without intermediates the graph is a star.
TEST(BooleanCircuit, MaskSizesOfTheSpecNote) {
  const Problem& boolean = find_problem("boolean");
  const auto graph_of = [&](int64_t depth, bool intermediates) {
    return boolean.graph(resolve_options(boolean, {{depth}, intermediates}));
  };
  EXPECT_EQ(graph_of(2, true).num_nodes(), 7);
  EXPECT_EQ(graph_of(2, true).compile().num_entries(), 19);
  EXPECT_EQ(graph_of(4, true).num_nodes(), 31);
  EXPECT_EQ(graph_of(4, true).compile().num_entries(), 91);
  EXPECT_EQ(graph_of(5, true).num_nodes(), 63);
  EXPECT_EQ(graph_of(5, true).compile().num_entries(), 187);
  EXPECT_EQ(graph_of(4, false).num_nodes(), 17);
  EXPECT_EQ(graph_of(4, false).compile().num_entries(), 17 + 2 * 16);
}

// Every gate output is the AND or OR of its two inputs, the same circuit for every batch, and
// the truth scores perfectly.
TEST(BooleanCircuit, ExamplesFollowOneFixedCircuit) {
  const Problem& boolean = find_problem("boolean");
  const ProblemOptions options{{3}, true};
  const graph::GraphicalModel model = boolean.graph(options);
  std::mt19937_64 rng(10);
  const TrainingBatch batch = boolean.make_examples(model, options, 64, rng);
  const torch::Tensor v = decode_state(StateLayout(model), model, batch.x0);
  // Layers x (8), h1 (4), h2 (2), y (1): gate g of a layer reads bits 2g, 2g+1 below.
  const int64_t first[] = {0, 8, 12, 14};
  for (int64_t layer = 1; layer <= 3; ++layer) {
    for (int64_t g = 0; g < (8 >> layer); ++g) {
      const torch::Tensor a = v.select(1, first[layer - 1] + 2 * g);
      const torch::Tensor b = v.select(1, first[layer - 1] + 2 * g + 1);
      const torch::Tensor out = v.select(1, first[layer] + g);
      const bool is_and = out.eq(a * b).all().item<bool>();
      const bool is_or = out.eq(torch::maximum(a, b)).all().item<bool>();
      EXPECT_TRUE(is_and || is_or) << "layer " << layer << " gate " << g;
    }
  }
  std::mt19937_64 same(10);
  EXPECT_TRUE(torch::equal(boolean.make_examples(model, options, 64, same).x0, batch.x0));
  const nlohmann::json perfect = boolean.score(model, options, batch, batch.x0);
  EXPECT_EQ(perfect["accuracy"], 1.0);
  EXPECT_EQ(perfect["intermediate_accuracy"], 1.0);
  EXPECT_EQ(batch.observed.sum().item<int64_t>(), 64 * 8);
}

TEST(Registry, SizesParseStrictly) {
  EXPECT_EQ(parse_size("16,16,8"), (std::vector<int64_t>{16, 16, 8}));
  EXPECT_EQ(parse_size("9x9x3"), (std::vector<int64_t>{9, 9, 3}));
  for (const char* bad : {"", "1,,2", "-1", "2.5", "1e3", "99999999999"}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW_WITH(parse_size(bad), std::invalid_argument, "give whole numbers");
  }
  EXPECT_THROW_WITH(
      resolve_options(find_problem("bcmf"), {{8, 8}, true}), std::invalid_argument,
      "--size for bcmf (m,n,k: E is m x n, the rank k) must be in 1,1,1 .. 256,256,32, "
      "got 8,8");
}

TEST(EncodeState, RejectsAnOptionOutsideTheVariable) {
  const graph::GraphicalModel model = sorting_graph(2);
  torch::Tensor values = torch::zeros({1, model.num_nodes()});
  values[0][model.array("P").first_node] = 2;
  EXPECT_THROW_WITH(encode_state(StateLayout(model), model, values), std::invalid_argument,
                    "array 'P' takes option indices 0..1");
}

TEST(Sudoku, TheTruthIsValid) {
  const Problem& sudoku = find_problem("sudoku");
  const ProblemOptions options{{4}, true};
  const graph::GraphicalModel model = sudoku.graph(options);
  std::mt19937_64 rng(5);
  const TrainingBatch batch = sudoku.make_examples(model, options, 6, rng);
  const nlohmann::json score = sudoku.score(model, options, batch, batch.x0);
  EXPECT_EQ(score["valid_fraction"], 1.0);
  EXPECT_EQ(score["violated_fraction"], 0.0);
}

// A model file of any problem comes back with its problem, options and weights, and evaluates.
GsdmConfig tiny_config(EmbeddingKind embedding) {
  GsdmConfig config;
  config.dim = 16;
  config.blocks = 1;
  config.heads = 2;
  config.embedding = embedding;
  return config;
}

ProblemModel tiny_model(const std::string& problem, const ProblemOptions& options,
                        EmbeddingKind embedding, uint64_t seed = 1) {
  const Problem& entry = find_problem(problem);
  DefaultGeneratorGuard initial_weights(seed);
  return build_problem_model(problem_model_metadata(
      entry, resolve_options(entry, options), tiny_config(embedding), diffusion::ScheduleConfig{}));
}

TEST(ProblemModel, SavesLoadsAndEvaluates) {
  const Problem& sorting = find_problem("sorting");
  ProblemOptions options{{3}, false};
  options.variant = "unconstrained-s";
  ProblemModel built = tiny_model("sorting", options, EmbeddingKind::exchangeable);
  TemporaryDirectory directory;
  save_problem_model(directory.file("sorting.pt"), built);
  ProblemModel loaded = load_problem_model(directory.file("sorting.pt"));
  EXPECT_EQ(loaded.problem->name, "sorting");
  EXPECT_EQ(loaded.options.size, std::vector<int64_t>{3});
  EXPECT_FALSE(loaded.options.intermediates);
  EXPECT_EQ(loaded.options.variant, "unconstrained-s");
  ASSERT_EQ(loaded.model->parameters().size(), built.model->parameters().size());
  for (size_t i = 0; i < built.model->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(loaded.model->parameters()[i], built.model->parameters()[i]));
  }
  std::mt19937_64 rng(6);
  const TrainingBatch examples = sorting.make_examples(loaded.graph, loaded.options, 5, rng);
  SampleOptions sampling;
  sampling.ddim_steps = 2;
  sampling.generator = at::make_generator<at::CPUGeneratorImpl>(7);
  const nlohmann::json metrics = evaluate(loaded, examples, sampling, 2);
  EXPECT_EQ(metrics["examples"], 5);
  EXPECT_TRUE(metrics.contains("rmse"));
  EXPECT_TRUE(metrics.contains("seconds"));
}

// A small architecture (dim 16, one block, two heads) trained `steps` steps without a progress bar.
ProblemTrainRequest tiny_request(const std::string& problem, int64_t size, int64_t steps) {
  ProblemTrainRequest request;
  request.problem = problem;
  request.options.size = {size};
  request.dim = 16;
  request.blocks = 1;
  request.heads = 2;
  request.training.loop.steps = steps;
  request.training.loop.show_progress = false;
  return request;
}

// The library entry point of `gsdm train`: unset architecture, rate and batch are the problem's;
// a run can start from a model file of the same architecture, and one of another is refused by
// what differs; a stop condition must name a validation metric.
TEST(ProblemTraining, TrainsARequestWithTheProblemsDefaultsAndStartsFromAFile) {
  ProblemTrainRequest request = tiny_request("sorting", 3, 3);
  request.batch = 4;
  ProblemTrainReport first = train_problem(request);
  EXPECT_EQ(first.result.steps_done, 3);
  EXPECT_EQ(first.averaged.metadata["trained_steps"], 3);
  const Problem& sorting = find_problem("sorting");
  EXPECT_EQ(first.averaged.model->config().embedding, sorting.config.embedding);
  EXPECT_EQ(first.averaged.metadata["config"]["model"]["dim"], 16);

  TemporaryDirectory directory;
  save_problem_model(directory.file("first.pt"), first.averaged);
  request.init_from = directory.file("first.pt");
  request.training.loop.steps = 1;
  request.learning_rate = 1e-12;  // one step that moves nothing: the file's weights come out
  request.training.loop.warmup_steps = 0;
  ProblemTrainReport second = train_problem(request);
  EXPECT_EQ(second.averaged.metadata["initialised_from"]["trained_steps"], 3);
  for (size_t i = 0; i < first.averaged.model->parameters().size(); ++i) {
    EXPECT_LT((second.averaged.model->parameters()[i] - first.averaged.model->parameters()[i])
                  .abs().max().item<double>(), 1e-6) << i;  // float32 rounding of the EMA blend
  }
  request.heads = 4;
  EXPECT_THROW_WITH(train_problem(request), std::invalid_argument,
                    "model heads is 2 in the file and 4 here");
  request.heads = 2;
  request.init_from.clear();
  request.stop = parse_stop_condition("accuracy>=1");
  request.training.loop.validate_every = 1;
  EXPECT_THROW_WITH(train_problem(request), std::invalid_argument,
                    "--stop-at: sorting has no validation metric 'accuracy'; it has");
  EXPECT_THROW_WITH(parse_stop_condition("rmse<0.1"), std::invalid_argument,
                    "--stop-at takes METRIC>=LEVEL or METRIC<=LEVEL");
}

// A variant that changes only the examples (sudoku's "puzzles") may start from a file of the
// problem's own form, since the graph and so every weight is the same; a variant that changes the
// graph (sorting's "s-fully-connected") is refused by name.
TEST(ProblemTraining, StartsFromAFileOfAnotherVariantOnlyWhereTheGraphIsTheSame) {
  TemporaryDirectory directory;
  for (const auto& [problem, size, variant] :
       {std::make_tuple("sudoku", int64_t{9}, "puzzles"), std::make_tuple("sorting", int64_t{3}, "s-fully-connected")}) {
    ProblemTrainRequest request = tiny_request(problem, size, 1);
    request.batch = 2;
    const std::string file = directory.file(std::string(problem) + ".pt");
    ProblemTrainReport first = train_problem(request);
    save_problem_model(file, first.averaged);
    request.init_from = file;
    request.options.variant = variant;
    if (std::string(problem) == "sudoku") {
      EXPECT_EQ(train_problem(request).averaged.metadata["initialised_from"]["trained_steps"], 1);
    } else {
      EXPECT_THROW_WITH(train_problem(request), std::invalid_argument,
                        "problem option variant is null in the file and \"s-fully-connected\" here");
    }
  }
}

// A mask ablation is part of the model's configuration: the model file records the rule and its
// seed, so the loaded model attends through the same mask; dense attention refuses a rule it
// would ignore.
TEST(ProblemModel, AMaskAblationIsRecordedAndTheLoadedModelRebuildsItsMask) {
  ProblemTrainRequest request;
  request.problem = "sorting";
  request.options.size = {3};
  request.model = tiny_config(EmbeddingKind::exchangeable);
  request.model.mask = {graph::MaskRule::random, 4};
  request.training.loop.steps = 2;
  request.training.loop.show_progress = false;
  request.batch = 2;
  ProblemTrainReport report = train_problem(request);
  TemporaryDirectory directory;
  save_problem_model(directory.file("sorting-random.pt"), report.averaged);
  const ProblemModel loaded = load_problem_model(directory.file("sorting-random.pt"));
  EXPECT_EQ(loaded.model->config().mask.rule, graph::MaskRule::random);
  EXPECT_EQ(loaded.model->config().mask.seed, 4u);
  EXPECT_EQ(loaded.model->pattern(), loaded.graph.compile({graph::MaskRule::random, 4}));
  EXPECT_FALSE(loaded.model->pattern() == loaded.graph.compile());

  request.model.attention = Mechanism::dense;
  request.model.mask = {graph::MaskRule::non_symmetrised, 1};
  EXPECT_THROW_WITH(train_problem(request), std::invalid_argument,
                    "dense attention uses no mask, so mask rule non-symmetrised has no effect");
}

// Size generalisation without copies: the model on another size's structure computes exactly
// what a model built at that size computes with the same parameters.
TEST(ProblemModel, AnotherSizesStructureEqualsAModelBuiltAtThatSize) {
  for (EmbeddingKind embedding : {EmbeddingKind::exchangeable, EmbeddingKind::array}) {
    ProblemModel small = tiny_model("bcmf", {{2, 2, 2}}, embedding, 1);
    ProblemModel large = tiny_model("bcmf", {{3, 4, 2}}, embedding, 2);
    {
      torch::NoGradGuard no_grad;
      const auto source = small.model->named_parameters();
      for (auto& item : large.model->named_parameters()) item.value().copy_(source[item.key()]);
    }
    small.model->use_structure(small.model->structure_for(large.graph));
    std::mt19937_64 rng(3);
    const TrainingBatch examples =
        find_problem("bcmf").make_examples(large.graph, large.options, 4, rng);
    const torch::Tensor t = torch::tensor({0, 5, 500, 999}, torch::kLong);
    EXPECT_TRUE(torch::equal(small.model->forward(examples.x0, t, examples.observed),
                             large.model->forward(examples.x0, t, examples.observed)));
    small.model->use_structure(small.model->home_structure());
    EXPECT_EQ(small.model->num_nodes(), small.graph.num_nodes());
  }
}

TEST(ProblemModel, TrainsOnANewSizePerBatchAndResumesBitForBit) {
  ProblemOptions options{{2, 2, 2}};
  parse_size_range("1,1,1..3,3,2", options);
  ProblemModel trained = tiny_model("bcmf", options, EmbeddingKind::exchangeable);
  TrainingProblem task;
  add_training_batches(task, trained);
  ASSERT_TRUE(task.largest_structure);
  EXPECT_EQ(task.largest_structure->num_nodes, find_problem("bcmf").graph({{3, 3, 2}}).num_nodes());
  std::mt19937_64 rng(5);
  std::set<int64_t> widths;
  for (int draw = 0; draw < 30; ++draw) {
    const TrainingBatch batch = task.make_batch(2, rng);
    ASSERT_TRUE(batch.structure);
    EXPECT_EQ(batch.x0.size(1), batch.structure->layout.width);
    EXPECT_EQ(batch.observed.size(1), batch.structure->num_nodes);
    widths.insert(batch.x0.size(1));
  }
  EXPECT_GE(widths.size(), 6u);

  // The size range is part of the model file.
  TemporaryDirectory directory;
  save_problem_model(directory.file("bcmf.pt"), trained);
  const ProblemModel loaded = load_problem_model(directory.file("bcmf.pt"));
  EXPECT_EQ(loaded.options.size_low, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(loaded.options.size_high, (std::vector<int64_t>{3, 3, 2}));

  // Sizes come from the data generator, which the checkpoint holds: stopping halfway and
  // resuming gives the uninterrupted run's weights.
  const auto run = [&](int64_t steps, const std::string& checkpoint, bool resume) {
    ProblemModel model = tiny_model("bcmf", options, EmbeddingKind::exchangeable);
    ProblemModel averaged = tiny_model("bcmf", options, EmbeddingKind::exchangeable);
    TrainingProblem sized;
    sized.metadata = model.metadata;
    add_training_batches(sized, model);
    TrainingOptions training;
    training.loop.steps = steps;
    training.batch = 2;
    training.loop.checkpoint_path = checkpoint;
    training.loop.resume = resume;
    train(model.model, averaged.model, model.schedule, sized, training, 9);
    EXPECT_EQ(model.model->structure(), model.model->home_structure());
    return model;
  };
  ProblemModel straight = run(6, "", false);
  run(3, directory.file("bcmf.ckpt"), false);
  ProblemModel resumed = run(6, directory.file("bcmf.ckpt"), true);
  expect_identical(*straight.model, *resumed.model);
}

TEST(ProblemModel, SizeRangesAreCheckedBeforeTraining) {
  ProblemOptions options{{2, 2, 2}};
  EXPECT_THROW_WITH(parse_size_range("1,1,1", options), std::invalid_argument,
                    "--size-range '1,1,1': give the smallest and largest size as LOW..HIGH, e.g. "
                    "1,1,1..10,10,10");
  EXPECT_THROW_WITH(parse_size_range("1,1,1..a", options), std::invalid_argument,
                    "--size-range 'a': give whole numbers separated by ',' or 'x', e.g. "
                    "1,1,1..10,10,10");
  const Problem& bcmf = find_problem("bcmf");
  parse_size_range("3,1,1..2,4,4", options);
  EXPECT_THROW_WITH(resolve_options(bcmf, options), std::invalid_argument,
                    "--size-range 3,1,1..2,4,4: the low end must not exceed the high end in any "
                    "dimension");
  parse_size_range("1,1..4,4,4", options);
  EXPECT_THROW_WITH(resolve_options(bcmf, options), std::invalid_argument,
                    "--size-range 1,1..4,4,4: both ends need the same number of dimensions");
  parse_size_range("1,1..4,4", options);
  EXPECT_THROW_WITH(resolve_options(bcmf, options), std::invalid_argument,
                    "--size-range: --size for bcmf (m,n,k: E is m x n, the rank k) must be in "
                    "1,1,1 .. 256,256,32, got 1,1");
  parse_size_range("1,1,1..2,2,99", options);
  EXPECT_THROW_WITH(resolve_options(bcmf, options), std::invalid_argument,
                    "--size-range: --size for bcmf (m,n,k: E is m x n, the rank k) must be in "
                    "1,1,1 .. 256,256,32, got 2,2,99");

  parse_size_range("1,1,1..3,3,2", options);
  TrainingProblem task;
  EXPECT_THROW_WITH(
      add_training_batches(task, tiny_model("bcmf", options, EmbeddingKind::independent)),
      std::invalid_argument,
      "--size-range: this model cannot run at other sizes: a model with IE "
      "embeddings (a learned row per variable) runs only on the graph it was built "
      "on; AE and EE embeddings carry over to other sizes");
  // Sorting's EE gives each s_i its own row, so the rows depend on the list length.
  ProblemOptions lists{{4}};
  parse_size_range("3..5", lists);
  EXPECT_THROW_WITH(
      add_training_batches(task, tiny_model("sorting", lists, EmbeddingKind::exchangeable)),
      std::invalid_argument,
      "--size-range: this model cannot run at other sizes: this graph needs 10 "
      "embedding rows and the model has 11 (EE groups whose number depends on the "
      "size, such as sorting's one per s_i, do not carry over; AE does)");
  EXPECT_NO_THROW(add_training_batches(task, tiny_model("sorting", lists, EmbeddingKind::array)));
}

}  // namespace
}  // namespace structdiff::gsdm
