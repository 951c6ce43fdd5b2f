// Google Benchmark micro-benchmarks: forward + backward of each pattern-restricted mechanism on
// random patterns of growing size (tokens, keys per row), and of the unrestricted mechanisms a
// DDPM U-Net uses at its image sizes (tokens = 7x7, 14x14, 28x28). `structdiff bench attention`
// holds the named workloads and the side-by-side table.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "structdiff/attention.h"

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
  const double pairs = static_cast<double>(batch * heads * tokens * degree);
  state.counters["GFLOP/s"] = benchmark::Counter(pairs * 12 * dim * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
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
}

void image_sizes(benchmark::internal::Benchmark* b) {
  for (int64_t side : {7, 14, 28}) b->Args({side * side});
  b->Unit(benchmark::kMillisecond);
}

BENCHMARK_TEMPLATE(global_forward_backward, structdiff::Mechanism::dense)->Apply(image_sizes);
BENCHMARK_TEMPLATE(global_forward_backward, structdiff::Mechanism::favor_softmax)->Apply(image_sizes);
BENCHMARK_TEMPLATE(global_forward_backward, structdiff::Mechanism::favor_relu)->Apply(image_sizes);
BENCHMARK_TEMPLATE(global_forward_backward, structdiff::Mechanism::linear)->Apply(image_sizes);

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
