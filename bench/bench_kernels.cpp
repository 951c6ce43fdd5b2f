// Google Benchmark micro-benchmarks: forward + backward of each pattern-restricted mechanism on
// random patterns of growing size (tokens, keys per row). `structdiff bench attention` holds the
// named workloads and the side-by-side table.
#include <benchmark/benchmark.h>
#include <torch/torch.h>

#include "structdiff/attention.h"

namespace {

using structdiff::PatternBatch;

template <structdiff::Mechanism kMechanism>
void forward_backward(benchmark::State& state) {
  const int64_t tokens = state.range(0), degree = state.range(1), batch = 4, heads = 4, dim = 32;
  PatternBatch pattern(structdiff::patterns::random_per_row(tokens, tokens, degree, 1));
  pattern.dense_mask();
  pattern.padded_indices();
  structdiff::AttentionConfig config;
  config.mechanism = kMechanism;
  config.head_dim = dim;
  structdiff::Attention attention(config);
  auto make = [&] { return torch::randn({batch, heads, tokens, dim}).requires_grad_(true); };
  torch::Tensor q = make(), k = make(), v = make();
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

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(static_cast<int>(std::thread::hardware_concurrency()));
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
