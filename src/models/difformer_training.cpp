#include "structdiff/difformer_training.h"

#include <chrono>
#include <optional>
#include <stdexcept>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

namespace structdiff::difformer {
namespace {

// One optimiser step on the NLL of the labelled nodes at `positions` (rows of `features`).
double train_step(DIFFormer& model, torch::optim::Optimizer& optimizer,
                  const torch::Tensor& features, const GraphInput* graph,
                  const torch::Tensor& labels, const torch::Tensor& positions) {
  optimizer.zero_grad();
  const torch::Tensor logits = model->forward(features, graph).index_select(0, positions);
  const torch::Tensor loss =
      torch::nll_loss(torch::log_softmax(logits, 1), labels.index_select(0, positions));
  loss.backward();
  optimizer.step();
  return loss.item<double>();
}

}  // namespace

double accuracy(const torch::Tensor& logits, const torch::Tensor& labels,
                const torch::Tensor& nodes) {
  return logits.index_select(0, nodes)
      .argmax(1)
      .eq(labels.index_select(0, nodes))
      .to(torch::kDouble)
      .mean()
      .item<double>();
}

RunResult train_node_classifier(DIFFormer& model, const data::NodeDataset& dataset,
                                const data::Split& split, const TrainingOptions& options,
                                uint64_t seed) {
  if (options.epochs < 1 || options.batch_size < 0) {
    throw std::invalid_argument("train_node_classifier: need epochs >= 1 and batch_size >= 0");
  }
  if (split.valid.numel() == 0) {
    throw std::invalid_argument("train_node_classifier: no validation nodes to choose the best epoch on");
  }
  if (!torch::isfinite(dataset.features).all().item<bool>()) {
    throw std::invalid_argument(dataset.name + ": the features hold NaN or infinite values");
  }
  const auto started = std::chrono::steady_clock::now();
  const int64_t n = dataset.num_nodes();
  const bool uses_graph = model->needs_graph();
  const std::optional<GraphInput> full_graph =
      uses_graph ? std::optional<GraphInput>(GraphInput(dataset.graph)) : std::nullopt;
  const GraphInput* full_graph_input = full_graph ? &*full_graph : nullptr;
  const torch::Tensor is_train = torch::zeros({n}, torch::kBool).index_fill_(0, split.train, true);

  torch::optim::Adam optimizer(
      model->parameters(),
      torch::optim::AdamOptions(options.learning_rate).weight_decay(options.weight_decay));
  at::Generator partition_generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  std::optional<train::ProgressBar> progress;
  if (options.show_progress) progress.emplace(options.label, options.epochs);

  RunResult result;
  result.best_valid_accuracy = -1.0;
  std::vector<torch::Tensor> best_weights;
  for (int64_t epoch = 1; epoch <= options.epochs; ++epoch) {
    model->train();
    double loss_sum = 0.0;
    int64_t steps = 0;
    if (options.batch_size == 0) {
      loss_sum += train_step(model, optimizer, dataset.features, full_graph_input, dataset.labels,
                             split.train);
      ++steps;
    } else {
      const torch::Tensor order = torch::randperm(n, partition_generator, torch::kLong);
      for (const torch::Tensor& chunk : order.split(options.batch_size)) {
        const torch::Tensor positions = is_train.index_select(0, chunk).nonzero().squeeze(1);
        if (positions.numel() == 0) continue;  // nothing to learn from in this chunk
        std::optional<GraphInput> subgraph;
        if (uses_graph) {
          const std::vector<int64_t> nodes(chunk.data_ptr<int64_t>(),
                                           chunk.data_ptr<int64_t>() + chunk.numel());
          subgraph.emplace(data::induced_subgraph(dataset.graph, nodes));
        }
        loss_sum += train_step(model, optimizer, dataset.features.index_select(0, chunk),
                               subgraph ? &*subgraph : nullptr,
                               dataset.labels.index_select(0, chunk), positions);
        ++steps;
      }
    }
    result.final_loss = loss_sum / std::max<int64_t>(1, steps);

    model->eval();
    torch::NoGradGuard no_grad;
    const torch::Tensor logits = model->forward(dataset.features, full_graph_input);
    const double valid_accuracy = accuracy(logits, dataset.labels, split.valid);
    const double test_accuracy = accuracy(logits, dataset.labels, split.test);
    if (valid_accuracy > result.best_valid_accuracy) {
      result.best_epoch = epoch;
      result.best_valid_accuracy = valid_accuracy;
      result.test_accuracy = test_accuracy;
      best_weights.clear();
      for (const auto& parameter : model->parameters()) best_weights.push_back(parameter.clone());
    }
    if (progress) {
      progress->update(epoch, {{"loss", result.final_loss},
                               {"valid", valid_accuracy},
                               {"best_valid", result.best_valid_accuracy}});
    }
    if (options.log != nullptr) {
      options.log->write({{"label", options.label},
                          {"epoch", epoch},
                          {"loss", result.final_loss},
                          {"train_accuracy", accuracy(logits, dataset.labels, split.train)},
                          {"valid_accuracy", valid_accuracy},
                          {"test_accuracy", test_accuracy}});
    }
  }
  if (progress) progress->finish();

  torch::NoGradGuard no_grad;
  const std::vector<torch::Tensor> parameters = model->parameters();
  for (size_t i = 0; i < parameters.size(); ++i) parameters[i].copy_(best_weights[i]);
  result.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return result;
}

}  // namespace structdiff::difformer
