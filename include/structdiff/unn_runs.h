// The UNN's three runs as library calls: train on one of four tasks, evaluate a model file
// (accuracy and float64 energy traces), draw a conv model's class prototypes. Each takes a plain
// request and returns a report; `structdiff unn` binds options to the requests and prints the
// reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "structdiff/attention_unn.h"
#include "structdiff/conv_unn.h"
#include "structdiff/loop_options.h"

namespace structdiff::unn {

// What a UNN trains on: MNIST or Fashion-MNIST images (conv), number sequences (attention) or a
// treebank (parse).
enum class Task { mnist_conv, fashion_conv, attention, parse };
Task parse_task(const std::string& name);  // "mnist-conv", "fashion-conv", "attention", "parse"
std::string task_name(Task task);
const std::vector<std::string>& task_names();

// The update orders a request can name ("explicit" is a network's own order, not a choice).
const std::vector<std::string>& schedule_choices();
// The update order of conv classification and attention filling when a request names none.
constexpr Schedule kDefaultSchedule = Schedule::forward;

struct TrainRequest {
  Task task = Task::mnist_conv;
  std::string out_path;  // the model file it writes
  int64_t iterations = 1;  // k
  // The update order: a conv model's when classifying, the attention model's; default
  // kDefaultSchedule.
  // The parse task's order is fixed (H, M, then Y), so it refuses one.
  std::optional<Schedule> schedule;
  // The loop; the settings left empty here take the task's defaults: conv, the paper's 2,750
  // steps of 128 images (50 epochs of the subset) at 5e-4, no clipping, validating each epoch;
  // attention, the authors' 150,000 steps of 256 at 1e-4, clip 10, validating every 1,000;
  // parse, 30 epochs (20 on a UD treebank) of 32 sentences at 2e-3, clip 5.
  train::LoopOptions loop = default_loop();
  train::LoopChoices loop_choices;
  std::optional<int64_t> batch;
  // Training rows held out for model selection: 1,000 MNIST images, else 10,000.
  std::optional<int64_t> dev_size;

  // Conv tasks: the schedule when generating, tying, the generation loss's weight and dropout
  // (the dataset, k, classify schedule and seed come from the fields above).
  ConvUnnConfig conv;
  std::string data_dir;  // IDX directory; "": the dataset's
  // Attention task: width and random k (k, schedule and seed from the fields above).
  AttentionUnnConfig attention;
  // Parse task: a committed UD treebank (data/ud/NAME), or "" for the synthetic one of
  // treebank_seed (control: heads independent of the words); jacobi updates H and M together.
  std::string treebank;
  uint64_t treebank_seed = 1;
  bool control = false;
  bool jacobi = false;

  uint64_t seed = 0;

  static train::LoopOptions default_loop();
};

struct TrainReport {
  std::string summary;     // one line: the best development score, the test score, the time
  nlohmann::json metadata;  // what the model file keeps beside the weights
};

// Checks the request, builds the data, says on stdout what it trains, trains it, scores the best
// development weights on the test split and writes them to out_path. Throws
// std::invalid_argument naming the option for a request it cannot run.
TrainReport train_task(const TrainRequest& request);

struct EvalRequest {
  std::string model_path;
  std::string data_dir;               // conv: IDX directory; parse: the treebank's directory
  std::optional<int64_t> iterations;  // default: the model's
  std::optional<Schedule> schedule;   // default: the model's (a parser refuses one)
  int64_t energy_examples = 16;       // test rows whose energy traces are taken
};

struct EvalReport {
  std::vector<std::string> lines;  // the score, then one line per energy trace
  nlohmann::json record;          // as `unn eval --json` writes it
};

// Test-split score of any UNN model file and its energy traces in float64 (both directions for a
// conv model; none for a Jacobi parser, whose updates carry no descent guarantee).
EvalReport evaluate(const EvalRequest& request);

struct GenerateRequest {
  std::string model_path;
  std::string classifier_path;        // "": the prototypes are not labelled
  std::optional<int64_t> label;       // default: every class
  std::optional<int64_t> iterations;  // default: the model's
  std::optional<Schedule> schedule;   // default: the model's generate schedule
};

struct GenerateReport {
  torch::Tensor tiles;  // (classes * k, 1, 28, 28) in [0, 1]: a row per class, X after each iteration
  int64_t columns = 0;  // k
  std::vector<std::string> lines;
  nlohmann::json record;  // as `unn generate --json` writes it, less the grid's path
};

// Clamps the label and runs a conv model backwards. The classifier, when given, is loaded and
// checked against the model's dataset before any sampling.
GenerateReport generate(const GenerateRequest& request);

}  // namespace structdiff::unn
