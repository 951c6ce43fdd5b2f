#include "train/step_parts.h"

#include <mutex>
#include <numeric>

#include <ATen/CPUGeneratorImpl.h>

#include <ATen/Parallel.h>
#include <ATen/ThreadLocalState.h>
#include <torch/csrc/autograd/autograd.h>

#include "structdiff/training_loop.h"

namespace structdiff::train {

std::vector<at::Generator> part_generators(at::Generator& noise, size_t parts) {
  if (parts == 1) return {noise};
  std::vector<at::Generator> generators;
  const std::lock_guard<std::mutex> lock(noise.mutex());
  auto* source = at::check_generator<at::CPUGeneratorImpl>(noise);
  for (size_t part = 0; part < parts; ++part) {
    generators.push_back(at::make_generator<at::CPUGeneratorImpl>(source->random64()));
  }
  return generators;
}

std::vector<Shard> step_parts(torch::nn::Module& model, Shard shard) {
  const std::vector<torch::Tensor> parameters = model.parameters();
  const bool on_cpu = parameters.empty() || parameters.front().device().is_cpu();
  const int64_t count = on_cpu ? at::get_num_threads() : 1;
  std::vector<Shard> parts;
  for (int64_t part = 0; part < count; ++part) {
    parts.push_back({shard.index * count + part, shard.count * count});
  }
  return parts;
}

double forward_backward(const std::vector<LossPart>& parts, torch::nn::Module& model) {
  if (parts.size() == 1) {
    const torch::Tensor loss = parts.front().mean_loss();
    loss.backward();
    return loss.item<double>();
  }
  std::vector<torch::Tensor> parameters;
  for (const torch::Tensor& parameter : model.parameters()) {
    if (parameter.requires_grad()) parameters.push_back(parameter);
  }
  double total = 0;
  for (const LossPart& part : parts) total += part.weight;
  std::vector<double> values(parts.size(), 0.0);
  std::vector<std::vector<torch::Tensor>> gradients(parts.size());
  const at::ThreadLocalState caller_state;  // grad mode and the like, for the pool's threads
  at::parallel_for(0, static_cast<int64_t>(parts.size()), 1, [&](int64_t begin, int64_t end) {
    const at::ThreadLocalStateGuard guard(caller_state);
    for (int64_t i = begin; i < end; ++i) {
      if (parts[i].weight == 0) continue;
      const torch::Tensor loss =
          parts[i].mean_loss() * (parts[i].weight / total);
      values[i] = loss.item<double>();
      gradients[i] = torch::autograd::grad({loss}, parameters, /*grad_outputs=*/{},
                                           /*retain_graph=*/false, /*create_graph=*/false,
                                           /*allow_unused=*/true);
    }
  });
  for (size_t p = 0; p < parameters.size(); ++p) {
    torch::Tensor& gradient = parameters[p].mutable_grad();
    for (const std::vector<torch::Tensor>& part : gradients) {
      if (part.empty() || !part[p].defined()) continue;
      if (!gradient.defined()) gradient = torch::zeros_like(parameters[p]);
      gradient.add_(part[p]);
    }
  }
  return std::accumulate(values.begin(), values.end(), 0.0);
}

}  // namespace structdiff::train
