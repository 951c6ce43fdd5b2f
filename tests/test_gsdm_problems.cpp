// The GSDM problem registry: each problem's graph (mask sizes from the spec note), its examples'
// identities, its metric, and the shared model file and evaluation.
#include <random>

#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/gsdm_problems.h"
#include "structdiff/runtime.h"
#include "support/expect_throw.h"
#include "support/temporary_files.h"

namespace structdiff::gsdm {
namespace {

graph::GraphicalModel sorting_graph(int64_t n, bool intermediates = true) {
  const Problem& sorting = find_problem("sorting");
  return sorting.graph(resolve_options(sorting, {n, intermediates}));
}

TEST(Registry, UnknownProblemsAndSizesAreNamed) {
  EXPECT_THROW_WITH(find_problem("sortng"), std::invalid_argument,
                    "unknown problem 'sortng' (did you mean 'sorting'?); the problems are sudoku, "
                    "sorting");
  EXPECT_THROW_WITH(resolve_options(find_problem("sorting"), {1, true}), std::invalid_argument,
                    "--size for sorting (list length) must be in 2..64, got 1");
  EXPECT_THROW_WITH(resolve_options(find_problem("sudoku"), {3, false}), std::invalid_argument,
                    "sudoku has no intermediate variables to drop");
  EXPECT_EQ(resolve_options(find_problem("sorting"), {}).size, 5);
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
TEST(Sorting, SharedEmbeddingsAreLicensedByTheMask) {
  const graph::GraphicalModel model = sorting_graph(4);
  EXPECT_TRUE(model.mask_invariant_under({{{"u", 0}, {"P", 1}, {"C", 1}}, {2, 0, 3, 1}}));
  EXPECT_FALSE(model.mask_invariant_under({{{"s", 0}}, {1, 0, 2, 3}}));
}

TEST(Sorting, ExamplesHoldTheGeneratorsIdentities) {
  for (const bool intermediates : {true, false}) {
    const Problem& sorting = find_problem("sorting");
    const ProblemOptions options{6, intermediates};
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
  const ProblemOptions options{5, true};
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

TEST(EncodeState, RejectsAnOptionOutsideTheVariable) {
  const graph::GraphicalModel model = sorting_graph(2);
  torch::Tensor values = torch::zeros({1, model.num_nodes()});
  values[0][model.array("P").first_node] = 2;
  EXPECT_THROW_WITH(encode_state(StateLayout(model), model, values), std::invalid_argument,
                    "array 'P' takes option indices 0..1");
}

TEST(Sudoku, TheTruthIsValid) {
  const Problem& sudoku = find_problem("sudoku");
  const ProblemOptions options{2, true};
  const graph::GraphicalModel model = sudoku.graph(options);
  std::mt19937_64 rng(5);
  const TrainingBatch batch = sudoku.make_examples(model, options, 6, rng);
  const nlohmann::json score = sudoku.score(model, options, batch, batch.x0);
  EXPECT_EQ(score["valid_fraction"], 1.0);
  EXPECT_EQ(score["violated_fraction"], 0.0);
}

// A model file of any problem comes back with its problem, options and weights, and evaluates.
TEST(ProblemModel, SavesLoadsAndEvaluates) {
  const Problem& sorting = find_problem("sorting");
  GsdmConfig config;
  config.dim = 16;
  config.blocks = 1;
  config.heads = 2;
  config.embedding = EmbeddingKind::exchangeable;
  const nlohmann::json metadata =
      problem_model_metadata(sorting, {3, false}, config, diffusion::ScheduleConfig{});
  ProblemModel built = [&] {
    DefaultGeneratorGuard initial_weights(1);
    return build_problem_model(metadata);
  }();
  TemporaryDirectory directory;
  save_problem_model(directory.file("sorting.pt"), built);
  ProblemModel loaded = load_problem_model(directory.file("sorting.pt"));
  EXPECT_EQ(loaded.problem->name, "sorting");
  EXPECT_EQ(loaded.options.size, 3);
  EXPECT_FALSE(loaded.options.intermediates);
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

}  // namespace
}  // namespace structdiff::gsdm
