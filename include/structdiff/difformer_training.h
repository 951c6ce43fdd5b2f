// Semi-supervised node classification with DIFFormer or a baseline, on the one training loop:
// NLL on the labelled nodes plus the L2 penalty of Adam's weight decay, full-graph or
// random-partition mini-batch steps, evaluation on the full graph every epoch and selection of
// the epoch with the best validation accuracy.
#pragma once

#include <cstdint>
#include <string>

#include "structdiff/datasets.h"
#include "structdiff/difformer.h"

namespace structdiff::difformer {

struct TrainingOptions {
  int64_t epochs = 200;
  double learning_rate = 0.01;
  // As the paper's Adam(weight_decay): an L2 penalty (weight_decay / 2) |w|^2 on every parameter,
  // added to the loss (coupled, unlike the loop's AdamW decay, which stays off here).
  double weight_decay = 5e-4;
  // 0: the full graph each step. Otherwise each epoch partitions the nodes at random into chunks
  // of this size; a step sees one chunk and its induced subgraph (attention within the chunk).
  // A chunk without labelled nodes still takes a step: on the penalty and Adam's momentum.
  int64_t batch_size = 0;
  bool show_progress = true;
  std::string label = "train";  // progress bar label
  std::string log_path;         // the loop's JSONL log: every step, and every epoch's accuracies
  // The loop's checkpoint (every epoch when given) and exact resume; stop_after_steps > 0 stops
  // (checkpointed) after that many steps in all, as an interruption would.
  std::string checkpoint_path;
  bool resume = false;
  int64_t stop_after_steps = 0;
};

struct RunResult {
  int64_t best_epoch = 0;  // 1-based
  double best_valid_accuracy = 0;
  double test_accuracy = 0;  // at best_epoch
  double final_loss = 0;     // mean training loss (with the penalty) of the last 100 steps
  double seconds = 0;
};

// Fraction of `nodes` whose arg-max logit is their label.
double accuracy(const torch::Tensor& logits, const torch::Tensor& labels,
                const torch::Tensor& nodes);

// Trains `model` in place and leaves it with the weights of the best validation epoch. `seed`
// seeds the mini-batch partitions and the loop's generator, which dropout draws from.
RunResult train_node_classifier(DIFFormer& model, const data::NodeDataset& dataset,
                                const data::Split& split, const TrainingOptions& options,
                                uint64_t seed);

}  // namespace structdiff::difformer
