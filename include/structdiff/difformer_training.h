// Semi-supervised node classification with DIFFormer or a baseline: Adam with weight decay, NLL on
// the labelled nodes, full-graph or random-partition mini-batch training, evaluation on the full
// graph every epoch and selection of the epoch with the best validation accuracy.
#pragma once

#include <cstdint>
#include <string>

#include "structdiff/datasets.h"
#include "structdiff/difformer.h"
#include "structdiff/train.h"

namespace structdiff::difformer {

struct TrainingOptions {
  int64_t epochs = 200;
  double learning_rate = 0.01;
  double weight_decay = 5e-4;
  // 0: the full graph each step. Otherwise each epoch partitions the nodes at random into chunks
  // of this size; a step sees one chunk and its induced subgraph (attention within the chunk).
  int64_t batch_size = 0;
  bool show_progress = true;
  std::string label = "train";        // progress bar label
  train::JsonlLog* log = nullptr;     // one record per epoch when given
};

struct RunResult {
  int64_t best_epoch = 0;  // 1-based
  double best_valid_accuracy = 0;
  double test_accuracy = 0;  // at best_epoch
  double final_loss = 0;     // mean training loss of the last epoch
  double seconds = 0;
};

// Fraction of `nodes` whose arg-max logit is their label.
double accuracy(const torch::Tensor& logits, const torch::Tensor& labels,
                const torch::Tensor& nodes);

// Trains `model` in place and leaves it with the weights of the best validation epoch. `seed`
// draws the mini-batch partitions; dropout draws from torch's default generator.
RunResult train_node_classifier(DIFFormer& model, const data::NodeDataset& dataset,
                                const data::Split& split, const TrainingOptions& options,
                                uint64_t seed);

}  // namespace structdiff::difformer
