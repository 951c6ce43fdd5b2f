#include "structdiff/difformer_training.h"

#include <limits>
#include <optional>
#include <stdexcept>
#include <vector>

#include <torch/torch.h>

#include "structdiff/best_weights.h"
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

namespace {

void check_training_inputs(const data::NodeDataset& dataset, const data::Split& split,
                           const TrainingOptions& options) {
  if (options.epochs < 1 || options.batch_size < 0) {
    throw std::invalid_argument("train_node_classifier: need epochs >= 1 and batch_size >= 0");
  }
  if (split.valid.numel() == 0) {
    throw std::invalid_argument("train_node_classifier: no validation nodes to choose the best epoch on");
  }
  if (!torch::isfinite(dataset.features).all().item<bool>()) {
    throw std::invalid_argument(dataset.name + ": the features hold NaN or infinite values");
  }
}

// The nodes a step trains on, and the rows among them that are labelled for training: the whole
// graph and its training nodes, or the step's chunk of its epoch's shuffled order.
struct StepNodes {
  torch::Tensor nodes, labelled;
  bool whole_graph = false;
};
StepNodes step_nodes(int64_t step, int64_t n, int64_t batch_size, int64_t steps_per_epoch,
                     const data::Split& split, const torch::Tensor& is_train, uint64_t seed) {
  if (batch_size == 0) return {torch::arange(n), split.train, true};
  const int64_t chunk = step % steps_per_epoch;
  const torch::Tensor nodes = train::epoch_order(n, seed, step / steps_per_epoch)
                                  .narrow(0, chunk * batch_size, std::min(batch_size, n - chunk * batch_size));
  return {nodes, is_train.index_select(0, nodes).nonzero().squeeze(1), false};
}

// The negative log-likelihood of the step's labelled nodes, on the whole graph or on the subgraph
// its chunk induces, plus the paper's L2 penalty. A chunk without labelled nodes contributes a
// zero (still differentiable) likelihood term.
torch::Tensor step_loss(DIFFormer& model, const data::NodeDataset& dataset, const StepNodes& step,
                        const GraphInput* full_graph, double weight_decay, at::Generator& noise) {
  std::optional<GraphInput> subgraph;
  if (model->needs_graph() && !step.whole_graph) {
    const std::vector<int64_t> ids(step.nodes.data_ptr<int64_t>(),
                                   step.nodes.data_ptr<int64_t>() + step.nodes.numel());
    subgraph.emplace(data::induced_subgraph(dataset.graph, ids));
  }
  const torch::Tensor logits =
      step.whole_graph ? model->forward(dataset.features, full_graph, &noise)
            : model->forward(dataset.features.index_select(0, step.nodes), subgraph ? &*subgraph : nullptr,
                             &noise);
  torch::Tensor loss =
      step.labelled.numel() == 0
          ? logits.sum() * 0.0
          : torch::nll_loss(torch::log_softmax(logits.index_select(0, step.labelled), 1),
                            dataset.labels.index_select(0, step.nodes).index_select(0, step.labelled));
  if (weight_decay > 0) {
    for (const torch::Tensor& parameter : model->parameters()) {
      loss = loss + 0.5 * weight_decay * parameter.square().sum();
    }
  }
  return loss;
}

// The paper's optimisation: its L2 penalty in the loss rather than decoupled decay, no clipping,
// no weight averaging, one validation (and checkpoint) per epoch.
train::LoopOptions loop_options(const TrainingOptions& options, int64_t steps_per_epoch) {
  train::LoopOptions loop;
  loop.steps = options.epochs * steps_per_epoch;
  loop.learning_rate = options.learning_rate;
  loop.weight_decay = 0;
  loop.clip_norm = std::numeric_limits<double>::infinity();
  loop.ema_decay = 0;
  loop.validate_every = steps_per_epoch;
  loop.checkpoint_path = options.checkpoint_path;
  if (!options.checkpoint_path.empty()) loop.checkpoint_every = steps_per_epoch;
  loop.resume = options.resume;
  loop.log_path = options.log_path;
  loop.show_progress = options.show_progress;
  loop.progress_label = options.label;
  return loop;
}

}  // namespace

RunResult train_node_classifier(DIFFormer& model, const data::NodeDataset& dataset,
                                const data::Split& split, const TrainingOptions& options,
                                uint64_t seed) {
  check_training_inputs(dataset, split, options);
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
    return step_loss(model, dataset,
                     step_nodes(step, n, options.batch_size, steps_per_epoch, split, is_train, seed),
                     full_graph_input, options.weight_decay, noise);
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
  const train::LoopOptions loop = loop_options(options, steps_per_epoch);
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
