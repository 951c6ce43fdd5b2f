// Google Benchmark micro-benchmarks: forward + backward of each pattern-restricted mechanism on
// random patterns of growing size (tokens, keys per row), and of the unrestricted mechanisms a
// DDPM U-Net uses at its image sizes (tokens = 7x7, 14x14, 28x28). `structdiff bench attention`
// holds the named workloads and the side-by-side table.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "structdiff/attention.h"
#include "structdiff/mechanism_registry.h"
#include "structdiff/sudoku_model.h"

namespace {

using structdiff::PatternBatch;

structdiff::Attention make_attention(structdiff::Mechanism mechanism, int64_t head_dim) {
  structdiff::AttentionConfig config;
  config.mechanism = mechanism;
  config.head_dim = head_dim;
  return structdiff::Attention(config);
}

torch::Tensor random_input(int64_t batch, int64_t heads, int64_t tokens, int64_t dim) {
  return torch::randn({batch, heads, tokens, dim}).requires_grad_(true);
}

// The mechanism registry's FLOPs of one float32 forward + backward, as a rate counter.
benchmark::Counter flops_rate(const structdiff::Attention& attention,
                              structdiff::AttentionSize size) {
  size.features = attention->config().num_features;
  const auto& mechanism = structdiff::mechanism_info(attention->config().mechanism);
  return benchmark::Counter(mechanism.cost(size).flops() * 1e-9,
                            benchmark::Counter::kIsIterationInvariantRate);
}

structdiff::AttentionSize size_of(int64_t batch, int64_t heads, int64_t tokens, int64_t dim) {
  structdiff::AttentionSize size;
  size.batch = batch;
  size.heads = heads;
  size.queries = size.keys = tokens;
  size.head_dim = dim;
  return size;
}

template <structdiff::Mechanism kMechanism>
void forward_backward(benchmark::State& state) {
  const int64_t tokens = state.range(0), degree = state.range(1), batch = 4, heads = 4, dim = 32;
  PatternBatch pattern(structdiff::patterns::random_per_row(tokens, tokens, degree, 1));
  pattern.dense_mask();
  pattern.padded_indices();
  structdiff::Attention attention = make_attention(kMechanism, dim);
  torch::Tensor q = random_input(batch, heads, tokens, dim), k = random_input(batch, heads, tokens, dim),
                v = random_input(batch, heads, tokens, dim);
  for (auto _ : state) {
    attention->forward(q, k, v, &pattern).sum().backward();
  }
  structdiff::AttentionSize size = size_of(batch, heads, tokens, dim);
  size.pattern_entries = batch * tokens * degree;
  state.counters["GFLOP/s"] = flops_rate(attention, size);
}

void sizes(benchmark::internal::Benchmark* b) {
  for (int64_t tokens : {256, 1024, 4096}) b->Args({tokens, 32});
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK_TEMPLATE(forward_backward, structdiff::Mechanism::sparse)->Apply(sizes);
BENCHMARK_TEMPLATE(forward_backward, structdiff::Mechanism::gather)->Apply(sizes);
BENCHMARK_TEMPLATE(forward_backward, structdiff::Mechanism::dense)->Apply(sizes);

// Full attention over every token, as in a U-Net attention block: batch 32, 4 heads of 32.
template <structdiff::Mechanism kMechanism>
void global_forward_backward(benchmark::State& state) {
  const int64_t tokens = state.range(0), batch = 32, heads = 4, dim = 32;
  structdiff::Attention attention = make_attention(kMechanism, dim);
  torch::Tensor q = random_input(batch, heads, tokens, dim), k = random_input(batch, heads, tokens, dim),
                v = random_input(batch, heads, tokens, dim);
  for (auto _ : state) {
    attention->forward(q, k, v).sum().backward();
  }
  state.counters["GFLOP/s"] = flops_rate(attention, size_of(batch, heads, tokens, dim));
}

void image_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t side : {7, 14, 28}) b->Args({side * side});
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK_TEMPLATE(global_forward_backward, structdiff::Mechanism::dense)->Apply(image_sizes);
BENCHMARK_TEMPLATE(global_forward_backward, structdiff::Mechanism::favor_softmax)->Apply(image_sizes);
BENCHMARK_TEMPLATE(global_forward_backward, structdiff::Mechanism::favor_relu)->Apply(image_sizes);
BENCHMARK_TEMPLATE(global_forward_backward, structdiff::Mechanism::linear)->Apply(image_sizes);

// The sparse kernel on Sudoku n^2 x n^2 (batch 16, 4 heads of 32), forward + backward through the
// same module: with one shared pattern, which gets dense clique tiles, and with the same pattern
// given once per batch element, which gets none (neighbour lists only). state.range(0) is n.
void sudoku_kernel(benchmark::State& state, bool tiles) {
  const int64_t n = state.range(0), batch = 16, heads = 4, dim = 32, tokens = n * n * n * n;
  const structdiff::AttentionPattern sudoku = structdiff::sudoku::graphical_model(n).compile();
  PatternBatch pattern = tiles ? PatternBatch(sudoku)
                               : PatternBatch(std::vector<structdiff::AttentionPattern>(batch, sudoku));
  structdiff::Attention attention = make_attention(structdiff::Mechanism::sparse, dim);
  torch::Tensor q = random_input(batch, heads, tokens, dim), k = random_input(batch, heads, tokens, dim),
                v = random_input(batch, heads, tokens, dim);
  for (auto _ : state) {
    attention->forward(q, k, v, &pattern).sum().backward();
  }
  state.counters["tiled share"] =
      static_cast<double>(pattern.tiled_entries()) / static_cast<double>(pattern.num_entries());
}

void sudoku_tiles(benchmark::State& state) { sudoku_kernel(state, true); }
void sudoku_lists(benchmark::State& state) { sudoku_kernel(state, false); }

void sudoku_sides(benchmark::internal::Benchmark* b) {
  for (int64_t n : {3, 4, 5}) b->Args({n});
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK(sudoku_tiles)->Apply(sudoku_sides);
BENCHMARK(sudoku_lists)->Apply(sudoku_sides);

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
