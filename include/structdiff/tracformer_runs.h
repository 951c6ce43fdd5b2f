// The Tracformer's three runs on a text as library calls: train on a UTF-8 file, score a model
// on fixed crops of one, fill the hidden characters of a string. Each takes a plain request and
// returns a report; `structdiff tracformer` binds options to the requests and prints the reports.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "structdiff/loop_options.h"
#include "structdiff/tracformer_training.h"

namespace structdiff::tracformer {

struct TrainRequest {
  std::string text_path;  // split into train / validation / test blocks by data::split_text
  // The architecture, width, depth, mechanism and crop length; its characters come from the
  // training split and its seed from `seed`, its objective from `objective`.
  Config config;
  std::optional<Mode> objective;  // default: ac for bert, car otherwise
  TrainingOptions training;
  std::optional<Masking> masking;  // in place of training.masking; default: all for ar, else spans
  uint64_t seed = 0;
  torch::Device device = torch::kCPU;
};

struct TrainReport {
  train::LoopResult result;
  Tracformer averaged{nullptr};
  nlohmann::json metadata;  // what the model file keeps beside the weights: the run's settings
};

// Checks the request, reads and splits the text, says on stdout what it trains and trains it.
// Throws std::invalid_argument naming the option for a request it cannot run.
TrainReport train_on_text(const TrainRequest& request);

struct TextEvalRequest {
  std::string model_path, text_path;
  std::string split = "all";  // all | train | validation | test (the blocks training used)
  std::optional<Mode> mode;   // default: the model's objective
  data::SpanMasking spans;
  std::string ranges;     // "A:B,..." fractions hidden in every crop instead of spans
  std::string query_set;  // "CONTEXT/TARGETS" fraction ranges instead of hidden positions
  int64_t length = 0;     // 0: the model's block size
  int64_t crops = 256;
  int64_t batch = 32;
  uint64_t seed = 0;
  torch::Device device = torch::kCPU;
};

struct TextEvalReport {
  EvalResult result;
  EvalMasking masking;
  int64_t length = 0;
  std::string scored_as;  // "car", "ac" or "query-set"
};

// Bits per hidden character on fixed crops and masks (drawn from `seed` alone, so every model is
// scored on the same positions). Throws when the split is empty or nothing hidden is scorable.
TextEvalReport evaluate_text(const TextEvalRequest& request);
// The report as `tracformer eval --json` writes it: the request, the masks and the scores, per crop
// too (for paired comparisons).
nlohmann::json eval_record(const TextEvalRequest& request, const TextEvalReport& report);

struct InfillRequest {
  std::string model_path;
  std::string text;  // UTF-8; its '_' characters are hidden unless `mask` is given
  std::string mask;  // "A:B,C:D" character ranges to fill instead
  int64_t samples = 1;
  SamplingOptions sampling;
  uint64_t seed = 0;
  torch::Device device = torch::kCPU;
};

struct Infilled {
  std::string text;  // UTF-8; context characters outside the vocabulary as given
  double log_likelihood = 0;  // nats, of the filled characters given the context
};

struct InfillReport {
  std::vector<Infilled> samples;
  int64_t hidden = 0;  // characters filled in each sample
  // Context characters outside the model's vocabulary, which it reads as unknown (as a hidden
  // one): how many, and each distinct one once, in order of appearance (UTF-8).
  int64_t unknown_context = 0;
  std::string unknown_characters;
};

InfillReport infill_text(const InfillRequest& request);

}  // namespace structdiff::tracformer
