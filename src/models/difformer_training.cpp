#include "structdiff/difformer_training.h"

#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include <torch/torch.h>

#include "structdiff/runtime.h"

namespace structdiff::difformer {

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
  const int64_t n = dataset.num_nodes();
  const int64_t chunk_size = options.batch_size == 0 ? n : options.batch_size;
  const int64_t steps_per_epoch = (n + chunk_size - 1) / chunk_size;
  const bool uses_graph = model->needs_graph();
  const std::optional<GraphInput> full_graph =
      uses_graph ? std::optional<GraphInput>(GraphInput(dataset.graph)) : std::nullopt;
  const GraphInput* full_graph_input = full_graph ? &*full_graph : nullptr;
  const torch::Tensor is_train = torch::zeros({n}, torch::kBool).index_fill_(0, split.train, true);

  // Models built only to be overwritten: their initial weights draw on nobody's stream.
  auto copy_of_model = [&] {
    DefaultGeneratorGuard guard;
    return DIFFormer(model->options());
  };
  // The loop evaluates its EMA copy; with decay 0 that copy is the trained weights themselves.
  DIFFormer evaluated = copy_of_model();
  train::BestWeights best(copy_of_model().ptr());

  train::LoopTask task;
  task.model = model.ptr().get();
  task.ema_model = evaluated.ptr().get();
  task.loss = [&](int64_t step, std::mt19937_64&, at::Generator& noise) {
    torch::Tensor nodes, positions;  // the step's nodes, and the rows among them that are labelled
    if (options.batch_size == 0) {
      nodes = torch::arange(n);
      positions = split.train;
    } else {
      const int64_t chunk = step % steps_per_epoch;
      nodes = train::epoch_order(n, seed, step / steps_per_epoch)
                  .narrow(0, chunk * chunk_size, std::min(chunk_size, n - chunk * chunk_size));
      positions = is_train.index_select(0, nodes).nonzero().squeeze(1);
    }
    std::optional<GraphInput> subgraph;
    if (uses_graph && options.batch_size != 0) {
      const std::vector<int64_t> ids(nodes.data_ptr<int64_t>(), nodes.data_ptr<int64_t>() + nodes.numel());
      subgraph.emplace(data::induced_subgraph(dataset.graph, ids));
    }
    const torch::Tensor logits =
        options.batch_size == 0
            ? model->forward(dataset.features, full_graph_input, &noise)
            : model->forward(dataset.features.index_select(0, nodes),
                             subgraph ? &*subgraph : nullptr, &noise);
    // A chunk without labelled nodes contributes a zero (still differentiable) likelihood term.
    torch::Tensor loss =
        positions.numel() == 0
            ? logits.sum() * 0.0
            : torch::nll_loss(torch::log_softmax(logits.index_select(0, positions), 1),
                              dataset.labels.index_select(0, nodes).index_select(0, positions));
    if (options.weight_decay > 0) {
      for (const torch::Tensor& parameter : model->parameters()) {
        loss = loss + 0.5 * options.weight_decay * parameter.square().sum();
      }
    }
    return loss;
  };

  // One full-graph evaluation per epoch: its validation accuracy selects the epoch, and the log
  // also gets its training and test accuracies.
  torch::Tensor logits;
  const auto valid_accuracy = [&] {
    torch::NoGradGuard no_grad;
    logits = evaluated->forward(dataset.features, full_graph_input);
    return accuracy(logits, dataset.labels, split.valid);
  };
  int64_t steps_done = 0;
  task.on_step = [&](int64_t step, double) {
    steps_done = step;
    return options.stop_after_steps <= 0 || step < options.stop_after_steps;
  };
  task.validate = [&]() -> nlohmann::json {
    return {{"epoch", (steps_done + steps_per_epoch - 1) / steps_per_epoch},
            {"train_accuracy", accuracy(logits, dataset.labels, split.train)},
            {"test_accuracy", accuracy(logits, dataset.labels, split.test)}};
  };
  train::LoopOptions loop;
  loop.steps = options.epochs * steps_per_epoch;
  loop.learning_rate = options.learning_rate;
  loop.weight_decay = 0;  // the penalty above is the paper's decay
  loop.clip_norm = std::numeric_limits<double>::infinity();  // the paper does not clip
  loop.ema_decay = 0;
  loop.validate_every = steps_per_epoch;
  loop.checkpoint_path = options.checkpoint_path;
  if (!options.checkpoint_path.empty()) loop.checkpoint_every = steps_per_epoch;
  loop.resume = options.resume;
  loop.log_path = options.log_path;
  loop.show_progress = options.show_progress;
  loop.progress_label = options.label;
  task.metadata = {{"kind", "difformer-run"},
                   {"epochs", options.epochs},
                   {"batch_size", options.batch_size},
                   {"learning_rate", options.learning_rate},
                   {"weight_decay", options.weight_decay}};
  const train::LoopResult trained =
      train::run_training_keeping_best(task, loop, seed, valid_accuracy, "valid_accuracy", best);

  RunResult result;
  result.best_epoch = (best->step() + steps_per_epoch - 1) / steps_per_epoch;
  result.best_valid_accuracy = best->score();
  {
    torch::NoGradGuard no_grad;
    result.test_accuracy =
        accuracy(model->forward(dataset.features, full_graph_input), dataset.labels, split.test);
  }
  result.final_loss = trained.final_loss;
  result.seconds = trained.seconds;
  return result;
}

}  // namespace structdiff::difformer
