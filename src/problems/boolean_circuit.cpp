// A Boolean circuit as a GSDM problem (paper §3.3, Fig. 8b): a balanced tree of AND/OR gates of
// depth n over 2^n observed input bits; the gate outputs of the inner layers are the intermediate
// variables and the last gate's output y is the answer.
#include <random>
#include <string>

#include <torch/torch.h>

#include "problems/entries.h"

namespace structdiff::gsdm::entries {
namespace {

using graph::VariableType;

// The circuit of every run of depth n (the authors' code fixes seed 1 too).
constexpr uint64_t kCircuitSeed = 1;
constexpr int64_t kBalanceInputs = 1000;

// Array names from the inputs to the output: x, h1, ..., h{n-1}, y.
std::string layer_name(int64_t layer, int64_t depth) {
  if (layer == 0) return "x";
  return layer == depth ? "y" : "h" + std::to_string(layer);
}

// Gate layer `layer` (1-based) of `bits` (count, 2^(n - layer + 1)) as 0/1 floats.
torch::Tensor apply_layer(const torch::Tensor& bits, const std::vector<bool>& is_and) {
  const torch::Tensor pairs = bits.view({bits.size(0), -1, 2});
  const torch::Tensor both = pairs.select(2, 0) * pairs.select(2, 1);
  const torch::Tensor either = torch::maximum(pairs.select(2, 0), pairs.select(2, 1));
  std::vector<float> mask(is_and.begin(), is_and.end());
  return torch::where(torch::tensor(mask).gt(0), both, either);
}

// One AND/OR per gate, drawn with probability 1/2 each, then rebalanced layer by layer from the
// second towards the output: an OR whose output is 1 on more than 80% of random inputs becomes
// an AND, an AND below 20% an OR (estimated on 1000 random inputs, after the layers below).
std::vector<std::vector<bool>> circuit(int64_t depth) {
  std::mt19937_64 rng(kCircuitSeed);
  std::vector<std::vector<bool>> gates;
  for (int64_t layer = 1; layer <= depth; ++layer) {
    std::vector<bool> is_and(int64_t{1} << (depth - layer));
    for (size_t g = 0; g < is_and.size(); ++g) is_and[g] = (rng() & 1) == 1;
    gates.push_back(is_and);
  }
  torch::Tensor inputs = torch::empty({kBalanceInputs, int64_t{1} << depth});
  for (float* p = inputs.data_ptr<float>(); p != inputs.data_ptr<float>() + inputs.numel(); ++p) {
    *p = static_cast<float>(rng() & 1);
  }
  torch::Tensor bits = apply_layer(inputs, gates[0]);
  for (int64_t layer = 2; layer <= depth; ++layer) {
    std::vector<bool>& is_and = gates[layer - 1];
    const torch::Tensor ones = apply_layer(bits, is_and).mean(0);
    for (size_t g = 0; g < is_and.size(); ++g) {
      const double p = ones[static_cast<int64_t>(g)].item<double>();
      if (!is_and[g] && p > 0.8) is_and[g] = true;
      if (is_and[g] && p < 0.2) is_and[g] = false;
    }
    bits = apply_layer(bits, is_and);
  }
  return gates;
}

graph::GraphicalModel circuit_graph(const ProblemOptions& options) {
  const int64_t depth = options.size.at(0);
  graph::GraphicalModel model;
  model.add_array("x", {int64_t{1} << depth}, VariableType::discrete, 2);
  if (options.intermediates) {
    for (int64_t layer = 1; layer < depth; ++layer) {
      model.add_array(layer_name(layer, depth), {int64_t{1} << (depth - layer)},
                      VariableType::discrete, 2);
    }
  }
  model.add_array("y", {}, VariableType::discrete, 2);
  if (!options.intermediates) {
    for (int64_t i = 0; i < (int64_t{1} << depth); ++i) model.add_edge({"x", {i}}, {"y", {}});
    return model;
  }
  for (int64_t layer = 1; layer <= depth; ++layer) {
    const std::string below = layer_name(layer - 1, depth), name = layer_name(layer, depth);
    for (int64_t g = 0; g < (int64_t{1} << (depth - layer)); ++g) {
      const graph::Element gate =
          layer == depth ? graph::Element{name, {}} : graph::Element{name, {g}};
      model.add_edge({below, {2 * g}}, gate);
      model.add_edge({below, {2 * g + 1}}, gate);
    }
  }
  return model;
}

TrainingBatch circuit_examples(const graph::GraphicalModel& model, const ProblemOptions& options,
                               int64_t count, std::mt19937_64& rng) {
  const int64_t depth = options.size.at(0);
  const std::vector<std::vector<bool>> gates = circuit(depth);
  torch::Tensor bits = torch::empty({count, int64_t{1} << depth});
  for (float* p = bits.data_ptr<float>(); p != bits.data_ptr<float>() + bits.numel(); ++p) {
    *p = static_cast<float>(rng() & 1);
  }
  std::vector<torch::Tensor> values = {bits};
  for (int64_t layer = 1; layer <= depth; ++layer) {
    bits = apply_layer(bits, gates[layer - 1]);
    if (options.intermediates || layer == depth) values.push_back(bits);
  }
  torch::Tensor observed = torch::zeros({count, model.num_nodes()}, torch::kBool);
  observed.narrow(1, 0, int64_t{1} << depth).fill_(true);
  return {encode_state(StateLayout(model), model, torch::cat(values, 1)), observed};
}

nlohmann::json circuit_score(const graph::GraphicalModel& model, const ProblemOptions& options,
                             const TrainingBatch& examples, const torch::Tensor& samples) {
  const StateLayout layout(model);
  const torch::Tensor truth = decode_state(layout, model, examples.x0);
  const torch::Tensor sampled = decode_state(layout, model, samples);
  const int64_t inputs = int64_t{1} << options.size.at(0);
  const int64_t y = model.array("y").first_node;
  nlohmann::json metrics = {
      {"accuracy",
       sampled.select(1, y).eq(truth.select(1, y)).to(torch::kDouble).mean().item<double>()},
      {"baseline_majority_accuracy", std::max(truth.select(1, y).mean().item<double>(),
                                              1.0 - truth.select(1, y).mean().item<double>())}};
  if (options.intermediates && y > inputs) {
    metrics["intermediate_accuracy"] = sampled.narrow(1, inputs, y - inputs)
                                           .eq(truth.narrow(1, inputs, y - inputs))
                                           .to(torch::kDouble)
                                           .mean()
                                           .item<double>();
  }
  return metrics;
}

}  // namespace

Problem boolean_circuit() {
  Problem p;
  p.name = "boolean";
  p.summary = "evaluate a fixed depth-n tree of AND/OR gates on 2^n observed input bits";
  p.size_help = "n: circuit depth, 2^n inputs";
  p.default_size = {4};
  p.min_size = {1};
  p.max_size = {8};
  p.has_intermediates = true;
  // The spec note's CPU row (Table 2): D 64, 12 blocks, 2 heads, IE, batch 16, lr 2e-5.
  p.config.dim = 64;
  p.config.blocks = 12;
  p.config.heads = 2;
  p.config.embedding = EmbeddingKind::independent;
  p.learning_rate = 2e-5;
  p.batch = 16;
  p.graph = circuit_graph;
  p.make_examples = circuit_examples;
  p.score = circuit_score;
  return p;
}

}  // namespace structdiff::gsdm::entries
