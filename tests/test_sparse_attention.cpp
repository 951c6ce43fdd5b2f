// The fused sparse kernel and the gather baseline against dense-with-pattern on many patterns, in
// float64, forward and all three gradients (finite differences and float64 references are the
// registry harness's, in test_mechanism.cpp), plus edge cases, validation messages and the
// PatternBatch cache under concurrent first use. On a machine with a GPU, the CUDA kernel against
// the CPU kernel on the same cases (skipped, and reported so, without one).
#include <atomic>
#include <limits>
#include <numeric>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/attention.h"
#include "structdiff/sparse_attention.h"
#include "structdiff/sudoku_model.h"
#include "support/gpu.h"
#include "support/gradcheck.h"

namespace structdiff {
namespace {

using testing::expect_same_function;
using Inputs = std::vector<torch::Tensor>;

AttentionPattern sudoku_pattern(int n) { return sudoku::graphical_model(n).compile(); }

// Rows 0 and 3 empty, the others a hand-picked mix of degrees (cross-attention: 6 x 5).
AttentionPattern ragged_with_empty_rows() {
  return AttentionPattern(6, 5, {0, 0, 1, 4, 4, 9, 11}, {2, 0, 1, 4, 0, 1, 2, 3, 4, 1, 3});
}

AttentionPattern single_key_per_row(int64_t n) {
  std::vector<int64_t> offsets(n + 1), cols(n);
  for (int64_t i = 0; i < n; ++i) {
    offsets[i + 1] = i + 1;
    cols[i] = (i * 7 + 3) % n;
  }
  return AttentionPattern(n, n, offsets, cols);
}

Inputs random_qkv(int64_t batch, int64_t heads, int64_t queries, int64_t keys, int64_t dim,
                  torch::ScalarType dtype = torch::kDouble) {
  auto o = torch::TensorOptions().dtype(dtype);
  return {torch::randn({batch, heads, queries, dim}, o), torch::randn({batch, heads, keys, dim}, o),
          torch::randn({batch, heads, keys, dim}, o)};
}

struct Case {
  std::string name;
  std::vector<AttentionPattern> patterns;  // one shared, or one per batch element
  int64_t batch, heads, dim;
  Scaling scaling = Scaling::inverse_sqrt_dim;
};

std::vector<Case> cases() {
  std::vector<Case> all;
  all.push_back({"random", {patterns::random_per_row(40, 40, 7, 11)}, 2, 3, 16});
  all.push_back({"sudoku4x4", {sudoku_pattern(2)}, 2, 2, 8});
  all.push_back({"sudoku9x9", {sudoku_pattern(3)}, 1, 2, 32});
  all.push_back({"sudoku16x16_dense_tiles", {sudoku_pattern(4)}, 2, 2, 16});
  all.push_back({"causal", {patterns::causal(33)}, 2, 2, 5, Scaling::none});
  all.push_back({"multiscope_prefix",
                 {patterns::tracformer_encoder(64, 5, 4, patterns::Direction::prefix)}, 1, 2, 64});
  all.push_back({"multiscope_suffix",
                 {patterns::tracformer_encoder(64, 3, 3, patterns::Direction::suffix)}, 2, 1, 16});
  all.push_back({"decoder_cross_with_empty_row",
                 {patterns::tracformer_decoder(32, 5, 2, patterns::Direction::prefix)}, 2, 2, 8});
  all.push_back({"ragged_cross_attention_empty_rows", {ragged_with_empty_rows()}, 2, 3, 4});
  all.push_back({"single_key_per_row", {single_key_per_row(17)}, 2, 2, 128});
  all.push_back({"per_batch_patterns",
                 {patterns::random_per_row(20, 20, 3, 1), patterns::causal(20),
                  patterns::sliding_window(20, 1, 2)},
                 3, 2, 12});
  return all;
}

class AgainstDense : public ::testing::TestWithParam<Case> {};

TEST_P(AgainstDense, SparseEqualsDenseForwardAndGradients) {
  const Case& c = GetParam();
  torch::manual_seed(1);
  PatternBatch batch(c.patterns);
  const auto& first = c.patterns.front();
  Inputs in = random_qkv(c.batch, c.heads, first.num_queries(), first.num_keys(), c.dim);
  expect_same_function(
      [&](const Inputs& x) { return sparse_attention(x[0], x[1], x[2], batch, c.scaling); },
      [&](const Inputs& x) { return dense_attention(x[0], x[1], x[2], c.scaling, &batch); }, in);
}

TEST_P(AgainstDense, GatherEqualsDenseForwardAndGradients) {
  const Case& c = GetParam();
  torch::manual_seed(2);
  PatternBatch batch(c.patterns);
  const auto& first = c.patterns.front();
  Inputs in = random_qkv(c.batch, c.heads, first.num_queries(), first.num_keys(), c.dim);
  expect_same_function(
      [&](const Inputs& x) { return gather_attention(x[0], x[1], x[2], batch, c.scaling); },
      [&](const Inputs& x) { return dense_attention(x[0], x[1], x[2], c.scaling, &batch); }, in);
}

// `f` on copies of the inputs on the GPU, its result brought back: autograd carries the gradients
// across, so expect_same_function compares the CUDA kernel's gradients too.
torch::Tensor on_gpu(const std::function<torch::Tensor(const Inputs&)>& f, const Inputs& x) {
  Inputs moved;
  for (const auto& t : x) moved.push_back(t.to(torch::kCUDA));
  return f(moved).cpu();
}

TEST_P(AgainstDense, CudaKernelEqualsCpuKernelForwardAndGradients) {
  SKIP_WITHOUT_GPU();
  const Case& c = GetParam();
  torch::manual_seed(4);
  PatternBatch batch(c.patterns);
  const auto& first = c.patterns.front();
  Inputs in = random_qkv(c.batch, c.heads, first.num_queries(), first.num_keys(), c.dim);
  const auto sparse = [&](const Inputs& x) {
    return sparse_attention(x[0], x[1], x[2], batch, c.scaling);
  };
  expect_same_function([&](const Inputs& x) { return on_gpu(sparse, x); }, sparse, in);
}

INSTANTIATE_TEST_SUITE_P(Patterns, AgainstDense, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return info.param.name; });

TEST(SparseAttention, EmptyRowsGiveZerosNotNaN) {
  torch::manual_seed(3);
  PatternBatch batch(ragged_with_empty_rows());
  Inputs in = random_qkv(2, 2, 6, 5, 4);
  for (auto& x : in) x.requires_grad_(true);
  torch::Tensor out = sparse_attention(in[0], in[1], in[2], batch, Scaling::inverse_sqrt_dim);
  EXPECT_TRUE(out.select(2, 0).eq(0).all().item<bool>());
  EXPECT_TRUE(out.select(2, 3).eq(0).all().item<bool>());
  out.sum().backward();
  EXPECT_TRUE(in[0].grad().select(2, 0).eq(0).all().item<bool>());
  EXPECT_FALSE(torch::isnan(in[0].grad()).any().item<bool>());
}

TEST(SparseAttention, SingleKeyRowCopiesItsValue) {
  PatternBatch batch(single_key_per_row(9));
  Inputs in = random_qkv(1, 1, 9, 9, 3);
  torch::Tensor out = sparse_attention(in[0], in[1], in[2], batch, Scaling::none);
  for (int64_t i = 0; i < 9; ++i) {
    EXPECT_TRUE(torch::allclose(out[0][0][i], in[2][0][0][(i * 7 + 3) % 9]));
  }
}

TEST(DenseAttention, FullPatternEqualsUnrestricted) {
  PatternBatch batch(patterns::full(5, 7));
  Inputs in = random_qkv(2, 2, 5, 7, 4);
  EXPECT_TRUE(torch::allclose(dense_attention(in[0], in[1], in[2], Scaling::none, &batch),
                              dense_attention(in[0], in[1], in[2], Scaling::none)));
}

TEST(SparseAttention, StridedInputsNeedNoCopy) {
  // (batch, tokens, heads, dim) transposed to (batch, heads, tokens, dim), as models produce it.
  torch::manual_seed(7);
  PatternBatch batch(patterns::random_per_row(10, 10, 4, 2));
  auto make = [] { return torch::randn({2, 10, 3, 8}, torch::kDouble).transpose(1, 2); };
  Inputs in = {make(), make(), make()};
  ASSERT_FALSE(in[0].is_contiguous());
  expect_same_function(
      [&](const Inputs& x) { return sparse_attention(x[0], x[1], x[2], batch, Scaling::none); },
      [&](const Inputs& x) { return dense_attention(x[0], x[1], x[2], Scaling::none, &batch); }, in);
}

TEST(SparseAttention, Float32MatchesFloat64) {
  torch::manual_seed(8);
  PatternBatch batch(sudoku_pattern(3));
  Inputs in = random_qkv(2, 4, 81, 81, 32);
  torch::Tensor exact = sparse_attention(in[0], in[1], in[2], batch, Scaling::inverse_sqrt_dim);
  torch::Tensor single = sparse_attention(in[0].to(torch::kFloat), in[1].to(torch::kFloat),
                                          in[2].to(torch::kFloat), batch,
                                          Scaling::inverse_sqrt_dim);
  EXPECT_EQ(single.scalar_type(), torch::kFloat);
  EXPECT_LT((single.to(torch::kDouble) - exact).abs().max().item<double>(), 1e-5);
}

TEST(SparseAttention, FewSlicesUseRowParallelBackward) {
  // batch * heads = 1 takes the private-buffer path whenever more than one thread runs.
  const int saved_threads = at::get_num_threads();
  at::set_num_threads(2);
  torch::manual_seed(9);
  PatternBatch batch(patterns::random_per_row(300, 300, 9, 3));
  Inputs in = random_qkv(1, 1, 300, 300, 16);
  expect_same_function(
      [&](const Inputs& x) { return sparse_attention(x[0], x[1], x[2], batch, Scaling::none); },
      [&](const Inputs& x) { return dense_attention(x[0], x[1], x[2], Scaling::none, &batch); }, in);
  at::set_num_threads(saved_threads);
}

// `count` consecutive nodes from `first`.
std::vector<int64_t> consecutive(int64_t first, int64_t count) {
  std::vector<int64_t> members(count);
  std::iota(members.begin(), members.end(), first);
  return members;
}

// Three disjoint cliques of 12 over 36 nodes, which the planner takes as dense tiles; a fourth
// across them, too overlapped to pay (its 40 new entries stay in the neighbour lists); no
// self-edges (each tile's diagonal is masked); and one directed entry, 0 -> 35.
AttentionPattern cliques_with_leftovers() {
  std::vector<int64_t> overlapping = consecutive(0, 10);
  overlapping.insert(overlapping.end(), {12, 13});
  const AttentionPattern base = patterns::from_cliques(
      36, {consecutive(0, 12), consecutive(12, 12), consecutive(24, 12), overlapping},
      /*self_edges=*/false);
  return patterns::unite({base, patterns::from_edges(36, {{0, 35}})});
}

// The tiles must not depend on the machine's thread count: enough slices for two threads, and
// two threads whatever the machine has.
class TwoThreads {
 public:
  TwoThreads() : saved_(at::get_num_threads()) { at::set_num_threads(2); }
  ~TwoThreads() { at::set_num_threads(saved_); }

 private:
  int saved_;
};

// NaN in, NaN out, as PyTorch's masked softmax: a NaN or infinite query or key makes exactly the
// rows that use it NaN (never zeros, never rows that do not attend to it); a NaN value makes at
// least the rows that attend to it NaN. Neighbour lists and tiles, float32 and float64.
TEST(SparseAttention, NonFiniteInputsPropagateAsInDenseAttention) {
  const TwoThreads threads;
  torch::NoGradGuard no_gradient;
  const std::vector<AttentionPattern> patterns = {patterns::random_per_row(40, 40, 7, 11),
                                                  sudoku_pattern(4), cliques_with_leftovers()};
  for (const AttentionPattern& pattern : patterns) {
    const PatternBatch batch(pattern);
    const int64_t n = pattern.num_queries();
    const torch::Tensor attends = batch.dense_mask(torch::kCPU).squeeze(0);  // (n, n)
    for (const torch::ScalarType dtype : {torch::kFloat, torch::kDouble}) {
      for (const double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
        const std::string where = std::to_string(n) + " nodes, tiled entries " +
                                  std::to_string(batch.tiled_entries()) + ", " +
                                  c10::toString(dtype) + ", input " + std::to_string(bad);
        const auto nan_rows = [&](const Inputs& in) {
          const torch::Tensor sparse =
              sparse_attention(in[0], in[1], in[2], batch, Scaling::inverse_sqrt_dim);
          const torch::Tensor dense =
              dense_attention(in[0], in[1], in[2], Scaling::inverse_sqrt_dim, &batch);
          return std::make_pair(torch::isnan(sparse).any(-1)[0][0], torch::isnan(dense).any(-1)[0][0]);
        };
        torch::manual_seed(5);
        Inputs in = random_qkv(1, 2, n, n, 16, dtype);
        in[0][0][0][3].fill_(bad);
        auto [sparse, dense] = nan_rows(in);
        EXPECT_TRUE(sparse.equal(dense)) << "query: " << where;
        EXPECT_TRUE(sparse[3].item<bool>()) << "query: " << where;
        in = random_qkv(1, 2, n, n, 16, dtype);
        in[1][0][0][5].fill_(bad);
        std::tie(sparse, dense) = nan_rows(in);
        EXPECT_TRUE(sparse.equal(dense)) << "key: " << where;
        EXPECT_TRUE(sparse.equal(attends.select(1, 5))) << "key: " << where;
        in = random_qkv(1, 2, n, n, 16, dtype);
        in[2][0][0][5].fill_(std::nan(""));
        std::tie(sparse, dense) = nan_rows(in);
        EXPECT_TRUE(sparse.logical_or(attends.select(1, 5).logical_not()).all().item<bool>())
            << "value: " << where;
      }
    }
  }
}

TEST(SparseAttentionTiles, CliquePatternsAreCoveredWhereTilesPay) {
  // Sudoku's rows, columns and boxes are its cliques: from 16 x 16 on, every entry is in a tile.
  for (int n : {4, 5}) {
    PatternBatch batch(sudoku_pattern(n));
    EXPECT_EQ(batch.tiled_entries(), batch.num_entries()) << "Sudoku " << n * n;
    EXPECT_GT(batch.tile_index().numel(), 0);
  }
  // 9-member cliques are too small to beat the neighbour lists.
  EXPECT_EQ(PatternBatch(sudoku_pattern(3)).tiled_entries(), 0);
  EXPECT_EQ(PatternBatch(sudoku_pattern(3)).tile_index().numel(), 0);
  const PatternBatch mixed(cliques_with_leftovers());
  EXPECT_EQ(mixed.tiled_entries(), 3 * 12 * 11);
  EXPECT_EQ(mixed.num_entries(), 3 * 12 * 11 + 40 + 1);
  // No cliques, not square, or one pattern per element: no tiles.
  EXPECT_EQ(PatternBatch(patterns::causal(40)).tiled_entries(), 0);
  EXPECT_EQ(PatternBatch(patterns::full(20, 30)).tiled_entries(), 0);
  EXPECT_EQ(PatternBatch({sudoku_pattern(4), sudoku_pattern(4)}).tiled_entries(), 0);
}

TEST(SparseAttentionTiles, TilesWithLeftoversMatchFiniteDifferencesAndTheNeighbourLists) {
  const TwoThreads threads;
  torch::manual_seed(21);
  const PatternBatch batch(cliques_with_leftovers());
  ASSERT_GT(batch.tiled_entries(), 0);
  Inputs in = random_qkv(2, 2, 36, 36, 16);
  const auto tiled = [&](const Inputs& x) {
    return sparse_attention(x[0], x[1], x[2], batch, Scaling::inverse_sqrt_dim);
  };
  EXPECT_EQ(testing::check_gradients(tiled, in), "");
  expect_same_function(tiled, [&](const Inputs& x) {
    return dense_attention(x[0], x[1], x[2], Scaling::inverse_sqrt_dim, &batch);
  }, in);
  // The raw operator takes no tiles: the same numbers from the neighbour lists alone.
  const double scale = scale_factor(Scaling::inverse_sqrt_dim, 16);
  const torch::Tensor lists =
      sparse_attention_forward(in[0], in[1], in[2], batch.row_offsets(), batch.col_indices(), scale)
          .out;
  EXPECT_TRUE(torch::allclose(tiled(in), lists, 1e-12, 1e-12));
}

// Rows that no tile holds take all their entries from the neighbour lists, after the tiles; each
// such row has several, so its running maximum rises while its accumulator already holds values.
TEST(SparseAttentionTiles, RowsInNoTileMatchDenseAttention) {
  const TwoThreads threads;
  torch::manual_seed(24);
  const PatternBatch batch(
      patterns::unite({patterns::from_cliques(36, {consecutive(0, 12), consecutive(12, 12)}),
                       patterns::random_per_row(36, 36, 10, 5)}));
  ASSERT_GT(batch.tiled_entries(), 0);
  const Inputs in = random_qkv(2, 2, 36, 36, 16);
  expect_same_function(
      [&](const Inputs& x) {
        return sparse_attention(x[0], x[1], x[2], batch, Scaling::inverse_sqrt_dim);
      },
      [&](const Inputs& x) {
        return dense_attention(x[0], x[1], x[2], Scaling::inverse_sqrt_dim, &batch);
      },
      in);
  torch::NoGradGuard no_gradient;
  EXPECT_TRUE(torch::allclose(
      sparse_attention(in[0], in[1], in[2], batch, Scaling::inverse_sqrt_dim),
      dense_attention(in[0], in[1], in[2], Scaling::inverse_sqrt_dim, &batch), 1e-12, 1e-12));
}

// Whether tiles are used is decided by the forward pass (they need a slice per thread), which keeps
// their probabilities for the backward pass only when a gradient will be asked for.
TEST(SparseAttentionTiles, ThreadCountChangesBetweenPassesAndInferenceGiveTheSameNumbers) {
  const TwoThreads threads;
  torch::manual_seed(23);
  const PatternBatch batch(cliques_with_leftovers());
  const Inputs in = random_qkv(2, 2, 36, 36, 16);  // 4 slices
  const torch::Tensor cotangent = torch::randn({2, 2, 36, 16}, torch::kDouble);
  // Output and gradients with `forward_threads` in the forward pass, `backward_threads` after.
  const auto run = [&](int forward_threads, int backward_threads) {
    Inputs x;
    for (const auto& t : in) x.push_back(t.detach().clone().requires_grad_(true));
    at::set_num_threads(forward_threads);
    const torch::Tensor out = sparse_attention(x[0], x[1], x[2], batch, Scaling::inverse_sqrt_dim);
    at::set_num_threads(backward_threads);
    (out * cotangent).sum().backward();
    at::set_num_threads(2);
    return std::vector<torch::Tensor>{out.detach(), x[0].grad(), x[1].grad(), x[2].grad()};
  };
  const std::vector<torch::Tensor> tiled = run(2, 2), lists = run(8, 8);
  for (const auto& [forward_threads, backward_threads] : {std::pair{2, 8}, std::pair{8, 2}}) {
    const std::vector<torch::Tensor> mixed = run(forward_threads, backward_threads);
    for (size_t i = 0; i < mixed.size(); ++i) {
      EXPECT_TRUE(torch::allclose(mixed[i], tiled[i], 1e-12, 1e-12))
          << forward_threads << " then " << backward_threads << " threads, tensor " << i;
      EXPECT_TRUE(torch::allclose(mixed[i], lists[i], 1e-12, 1e-12));
    }
  }
  torch::NoGradGuard no_gradient;
  EXPECT_TRUE(torch::allclose(
      sparse_attention(in[0], in[1], in[2], batch, Scaling::inverse_sqrt_dim), tiled[0], 1e-12,
      1e-12));
}

TEST(SparseAttentionTiles, Float32TilesAreAsAccurateAsTheNeighbourLists) {
  // float32 tiles take the vectorised exp and the blocked GEMM; the neighbour lists std::exp and
  // dot products. Against float64, the tiles' error stays within twice the lists'.
  const TwoThreads threads;
  torch::manual_seed(22);
  const PatternBatch batch(sudoku_pattern(5));
  ASSERT_EQ(batch.tiled_entries(), batch.num_entries());
  Inputs in = random_qkv(2, 2, 625, 625, 32);
  for (auto& x : in) x.mul_(3).requires_grad_(true);  // peaked softmax rows
  const double scale = scale_factor(Scaling::inverse_sqrt_dim, 32);
  torch::Tensor exact = sparse_attention(in[0], in[1], in[2], batch, Scaling::inverse_sqrt_dim);
  const torch::Tensor cotangent = torch::randn(exact.sizes(), torch::kDouble);
  (exact * cotangent).sum().backward();
  Inputs single;
  for (const auto& x : in) single.push_back(x.detach().to(torch::kFloat).requires_grad_(true));
  torch::Tensor tiled =
      sparse_attention(single[0], single[1], single[2], batch, Scaling::inverse_sqrt_dim);
  (tiled * cotangent.to(torch::kFloat)).sum().backward();
  const SparseAttentionOutput lists = sparse_attention_forward(
      single[0], single[1], single[2], batch.row_offsets(), batch.col_indices(), scale);
  const SparseAttentionGradients list_grads = sparse_attention_backward(
      cotangent.to(torch::kFloat), single[0], single[1], single[2], lists.out, lists.logsumexp,
      batch.row_offsets(), batch.col_indices(), torch::Tensor(), torch::Tensor(), scale);
  const auto error = [](const torch::Tensor& approx, const torch::Tensor& reference) {
    return (approx.detach().to(torch::kDouble) - reference).abs().max().item<double>();
  };
  EXPECT_LT(error(tiled, exact), 2 * error(lists.out, exact) + 1e-7);
  const torch::Tensor list_grad[3] = {list_grads.q, list_grads.k, list_grads.v};
  for (int i = 0; i < 3; ++i) {
    EXPECT_LT(error(single[i].grad(), in[i].grad()), 2 * error(list_grad[i], in[i].grad()) + 1e-7)
        << "gradient " << i;
  }
}

TEST(SparseAttentionCuda, Float32MatchesFloat64) {
  SKIP_WITHOUT_GPU();
  torch::manual_seed(8);
  PatternBatch batch(sudoku_pattern(3));
  Inputs in = random_qkv(2, 4, 81, 81, 32);
  const torch::Tensor exact =
      sparse_attention(in[0], in[1], in[2], batch, Scaling::inverse_sqrt_dim);
  const auto cuda_float = [](const torch::Tensor& t) { return t.to(torch::kCUDA, torch::kFloat); };
  const torch::Tensor single = sparse_attention(cuda_float(in[0]), cuda_float(in[1]),
                                                cuda_float(in[2]), batch, Scaling::inverse_sqrt_dim);
  EXPECT_TRUE(single.is_cuda());
  EXPECT_EQ(single.scalar_type(), torch::kFloat);
  EXPECT_LT((single.cpu().to(torch::kDouble) - exact).abs().max().item<double>(), 1e-5);
}

TEST(SparseAttentionCuda, HeadDimensionsUpTo256AndStridedInputs) {
  SKIP_WITHOUT_GPU();
  torch::manual_seed(10);
  PatternBatch batch(patterns::random_per_row(24, 24, 5, 4));
  for (int64_t dim : {1, 33, 100, 200, 256}) {
    // (batch, tokens, heads, dim) transposed, as models produce it.
    auto make = [dim] { return torch::randn({2, 24, 3, dim}, torch::kDouble).transpose(1, 2); };
    Inputs in = {make(), make(), make()};
    const auto sparse = [&](const Inputs& x) {
      return sparse_attention(x[0], x[1], x[2], batch, Scaling::inverse_sqrt_dim);
    };
    SCOPED_TRACE("head_dim " + std::to_string(dim));
    expect_same_function([&](const Inputs& x) { return on_gpu(sparse, x); }, sparse, in);
  }
  Inputs wide = random_qkv(1, 1, 24, 24, 257);
  for (auto& t : wide) t = t.to(torch::kCUDA);
  EXPECT_THROW_WITH(sparse_attention(wide[0], wide[1], wide[2], batch, Scaling::none),
                    std::invalid_argument,
                    "sparse attention on CUDA takes head_dim up to 256, got 257");
}

// The backward pass gathers over the transposed pattern instead of scattering with atomics: two
// runs give the same bits.
TEST(SparseAttentionCuda, BackwardIsDeterministic) {
  SKIP_WITHOUT_GPU();
  torch::manual_seed(11);
  PatternBatch batch(patterns::random_per_row(500, 500, 40, 5));
  Inputs in = random_qkv(2, 4, 500, 500, 32, torch::kFloat);
  const torch::Tensor cotangent = torch::randn({2, 4, 500, 32}).to(torch::kCUDA);
  auto gradients = [&] {
    Inputs x;
    for (const auto& t : in) x.push_back(t.to(torch::kCUDA).requires_grad_(true));
    (sparse_attention(x[0], x[1], x[2], batch, Scaling::inverse_sqrt_dim) * cotangent)
        .sum()
        .backward();
    return Inputs{x[0].grad(), x[1].grad(), x[2].grad()};
  };
  const Inputs first = gradients(), second = gradients();
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(torch::equal(first[i], second[i])) << "input " << i;
}

TEST(PatternBatch, FormsOnAGpuAreCopiedOnceAndEqualTheCpuForms) {
  SKIP_WITHOUT_GPU();
  PatternBatch batch({patterns::random_per_row(30, 40, 3, 1), patterns::full(30, 40)});
  const torch::Device gpu(torch::kCUDA, 0);
  const std::vector<std::pair<const torch::Tensor* (*)(const PatternBatch&, torch::Device),
                              const char*>>
      forms = {
          {[](const PatternBatch& b, torch::Device d) { return &b.row_offsets(d); }, "row_offsets"},
          {[](const PatternBatch& b, torch::Device d) { return &b.col_indices(d); }, "col_indices"},
          {[](const PatternBatch& b, torch::Device d) { return &b.dense_mask(d); }, "dense_mask"},
          {[](const PatternBatch& b, torch::Device d) { return &b.padded_indices(d); }, "padded"},
          {[](const PatternBatch& b, torch::Device d) { return &b.key_queries(d); }, "key_queries"},
      };
  for (const auto& [form, name] : forms) {
    const torch::Tensor* first = form(batch, gpu);
    EXPECT_TRUE(first->is_cuda()) << name;
    EXPECT_EQ(first, form(batch, gpu)) << name << " copied twice";
    EXPECT_TRUE(torch::equal(first->cpu(), *form(batch, torch::kCPU))) << name;
  }
}

// The transpose the CUDA backward reads: for every pattern and key, the queries that attend to
// it, ascending, with offsets absolute across the batch's patterns like row_offsets.
TEST(PatternBatch, TransposedPatternListsTheQueriesOfEachKey) {
  const std::vector<AttentionPattern> per_element = {ragged_with_empty_rows(),
                                                     patterns::random_per_row(6, 5, 2, 3)};
  PatternBatch batch(per_element);
  const torch::Tensor offsets = batch.key_offsets(), queries = batch.key_queries();
  ASSERT_EQ(offsets.sizes(), torch::IntArrayRef({2, 6}));
  ASSERT_EQ(queries.numel(), batch.num_entries());
  int64_t base = 0;
  for (size_t p = 0; p < per_element.size(); ++p) {
    const AttentionPattern& pattern = per_element[p];
    for (int64_t key = 0; key < 5; ++key) {
      std::vector<int64_t> expected;
      for (int64_t row = 0; row < 6; ++row) {
        if (pattern.contains(row, key)) expected.push_back(row);
      }
      const int64_t first = offsets[p][key].item<int64_t>(), last = offsets[p][key + 1].item<int64_t>();
      std::vector<int64_t> actual;
      for (int64_t e = first; e < last; ++e) actual.push_back(queries[e].item<int64_t>());
      EXPECT_EQ(actual, expected) << "pattern " << p << " key " << key;
    }
    EXPECT_EQ(offsets[p][0].item<int64_t>(), base);
    base += pattern.num_entries();
    EXPECT_EQ(offsets[p][5].item<int64_t>(), base);
  }
}

// Threads that ask a fresh PatternBatch for its cached forms at the same moment all get the one
// build of each form, equal to a single-threaded build. The pattern is large enough (a 4 MB mask)
// for first uses to overlap: the unlocked cache this replaced fails here, handing threads
// different tensors. (No ThreadSanitizer here, so this cannot prove the absence of races.)
TEST(PatternBatch, ConcurrentFirstUseBuildsEachFormOnce) {
  const AttentionPattern pattern = patterns::random_per_row(2000, 2000, 32, 3);
  const PatternBatch single_threaded(pattern);
  constexpr int kThreads = 8, kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    const PatternBatch shared(pattern);
    std::atomic<int> not_started{kThreads};
    std::vector<const void*> masks(kThreads), indices(kThreads), valid(kThreads);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        not_started.fetch_sub(1);
        while (not_started.load() > 0) std::this_thread::yield();  // start together
        // Half the threads ask in the opposite order, so that every form sees a first use race.
        if (t % 2 == 0) {
          masks[t] = shared.dense_mask().data_ptr();
          indices[t] = shared.padded_indices().data_ptr();
          valid[t] = shared.padded_valid().data_ptr();
        } else {
          valid[t] = shared.padded_valid().data_ptr();
          indices[t] = shared.padded_indices().data_ptr();
          masks[t] = shared.dense_mask().data_ptr();
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    for (int t = 1; t < kThreads; ++t) {
      EXPECT_EQ(masks[t], masks[0]) << "round " << round << ", thread " << t;
      EXPECT_EQ(indices[t], indices[0]) << "round " << round << ", thread " << t;
      EXPECT_EQ(valid[t], valid[0]) << "round " << round << ", thread " << t;
    }
    ASSERT_TRUE(torch::equal(shared.dense_mask(), single_threaded.dense_mask()));
    ASSERT_TRUE(torch::equal(shared.padded_indices(), single_threaded.padded_indices()));
    ASSERT_TRUE(torch::equal(shared.padded_valid(), single_threaded.padded_valid()));
  }
}

TEST(AttentionValidation, RejectsBadInputsByMessage) {
  PatternBatch batch(patterns::causal(4));
  auto d = torch::kDouble;
  torch::Tensor q = torch::randn({1, 2, 4, 8}, d), k = torch::randn({1, 2, 4, 8}, d),
                v = torch::randn({1, 2, 4, 8}, d);
  EXPECT_THROW_WITH(sparse_attention(q[0], k, v, batch, Scaling::none), std::invalid_argument,
                    "Q must be (batch, heads, tokens, head_dim), got shape (2, 4, 8)");
  EXPECT_THROW_WITH(sparse_attention(q.to(torch::kInt), k, v, batch, Scaling::none),
                    std::invalid_argument, "Q must be float32 or float64");
  EXPECT_THROW_WITH(sparse_attention(q, k.to(torch::kFloat), v, batch, Scaling::none),
                    std::invalid_argument, "share one dtype");
  EXPECT_THROW_WITH(sparse_attention(q, torch::randn({1, 3, 4, 8}, d), v, batch, Scaling::none),
                    std::invalid_argument, "must agree in batch and heads");
  EXPECT_THROW_WITH(sparse_attention(q, torch::randn({1, 2, 4, 6}, d), v, batch, Scaling::none),
                    std::invalid_argument, "must have the same head_dim");
  EXPECT_THROW_WITH(sparse_attention(q, k, torch::randn({1, 2, 5, 8}, d), batch, Scaling::none),
                    std::invalid_argument, "must have the same number of keys");
  EXPECT_THROW_WITH(sparse_attention(q, k, torch::randn({1, 2, 4, 3}, d), batch, Scaling::none),
                    std::invalid_argument, "V's head_dim (3) equal to Q's (8)");
  PatternBatch wrong_size(patterns::causal(5));
  EXPECT_THROW_WITH(sparse_attention(q, k, v, wrong_size, Scaling::none), std::invalid_argument,
                    "pattern is 5x5 but the inputs have 4 queries and 4 keys");
  EXPECT_THROW_WITH(gather_attention(q, k, v, wrong_size, Scaling::none), std::invalid_argument,
                    "pattern is 5x5");
  EXPECT_THROW_WITH(dense_attention(q, k, v, Scaling::none, &wrong_size), std::invalid_argument,
                    "pattern is 5x5");
  PatternBatch two({patterns::causal(4), patterns::full(4, 4)});
  EXPECT_THROW_WITH(sparse_attention(q, k, v, two, Scaling::none), std::invalid_argument,
                    "pattern batch holds 2 patterns but the inputs have batch size 1");
  EXPECT_THROW_WITH(PatternBatch({patterns::causal(4), patterns::causal(3)}),
                    std::invalid_argument, "pattern 1 is 3x3 but pattern 0 is 4x4");
  EXPECT_THROW_WITH(PatternBatch(std::vector<AttentionPattern>{}), std::invalid_argument,
                    "no patterns given");
}

}  // namespace
}  // namespace structdiff
