// A node-classification study as one library call: a dataset, DIFFormer or a baseline, several
// runs (splits and initialisations), a report. `structdiff difformer train` binds options to the
// request and writes the report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "structdiff/datasets.h"
#include "structdiff/difformer.h"
#include "structdiff/difformer_training.h"

namespace structdiff::difformer {

struct StudyRequest {
  std::string dataset = "csbm";            // csbm | fashion-mnist | cora | citeseer | planetoid:DIR
  std::string architecture = "difformer";  // difformer | mlp | gcn | gat | transformer
  std::string kernel = "simple";           // DIFFormer's diffusivity: simple (-s) | sigmoid (-a)
  // What the request names; the dataset decides the fields left empty below.
  DIFFormerOptions network;
  TrainingOptions training;
  // Defaults by dataset: the general ones (hidden 64, lr 0.01, weight decay 5e-4, 2 layers, no
  // value projection, no graph branch, per-node norm, test = the rest); fashion-mnist: the
  // authors' image setting (hidden 300, lr 5e-4, weight decay 0.1, value projection); cora and
  // citeseer: the authors' released settings per kernel for DIFFormer (500 epochs, lr 1e-3, the
  // graph branch, global norm, and their depth, width, decay and dropout), 1,000 test nodes and
  // row-normalised features and the authors' split for every model.
  std::optional<std::string> split;  // per-run (seeded by the run) | authors (one, seed 123)
  std::optional<int64_t> layers, hidden, epochs, test;
  std::optional<double> dropout, learning_rate, weight_decay;
  std::optional<bool> use_graph, value_projection, normalize_features;
  std::optional<DiffusivityNorm> simple_norm;
  int64_t labels_per_class = 20;
  int64_t validation = 500;
  int64_t runs = 5;
  std::string data_dir = data::kFashionMnistDirectory;  // fashion-mnist only
  int64_t pool = 15000, knn = 10;                       // fashion-mnist: images, k of the kNN graph
  data::CsbmOptions csbm;
  // Per run (PATH-runK for K > 1 when runs > 1; "" none): the model of its best validation epoch,
  // its JSONL log; training.checkpoint_path likewise.
  std::string out_path, log_path;
  uint64_t seed = 0;  // the data's and the first run's; run K has seed + K - 1
};

struct StudyReport {
  double test_accuracy_mean = 0;
  double test_accuracy_std = 0;  // sample standard deviation over the runs; 0 for one run
  nlohmann::json record;         // dataset, model, resolved configuration, every run
};

// Throws std::invalid_argument unless run_study reads a dataset of this name: csbm,
// fashion-mnist, a committed citation graph (cora, citeseer) or planetoid:DIR.
void check_dataset_name(const std::string& name);
// The splits StudyRequest::split names: per-run, authors.
std::vector<std::string> split_names();

// Resolves the request's defaults, loads the data, trains and tests every run (one line each on
// stdout) and saves each run's model. Throws std::invalid_argument naming the option for a request
// it cannot run.
StudyReport run_study(const StudyRequest& request);

}  // namespace structdiff::difformer
