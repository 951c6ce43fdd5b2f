// The structured UNN dependency parser of the UNN paper (Sec. 5) on the engine of unn.h: a directed
// encoder (word embeddings, optionally beside a character CNN over each form's UTF-8 bytes, and a
// bidirectional LSTM, standing in for the paper's BERT, with a learned root row) gives observed rows Xh (n + 1, r) and Xm (n, r); the undirected part holds
// heads H (n + 1, d) and modifiers M (n, d) with relu regularisers and arcs Y (n + 1, n) on the
// marginal polytope of dependency trees, joined by E = -<H, Xh Wh^T> - <M, Xm Wm^T> - <Y, H V M^T>.
// One iteration is the plain biaffine parser; later iterations feed the arc marginals back into H
// and M. The loss is the tree-CRF likelihood of the gold tree under the last arc scores, decoding
// the single-root maximum spanning tree of those scores.
#pragma once

#include <cstdint>
#include <string>

#include <ATen/core/Generator.h>
#include <nlohmann/json_fwd.hpp>
#include <torch/nn/module.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/rnn.h>
#include <torch/nn/pimpl.h>
#include <torch/types.h>

#include "structdiff/dependency_tree.h"
#include "structdiff/loop_options.h"
#include "structdiff/treebank.h"
#include "structdiff/unn.h"

namespace structdiff::unn {

struct ParserConfig {
  int64_t vocabulary = 0;     // word ids, pad (0) and root (1) included
  int64_t max_words = 40;     // sentences are padded to this many words
  int64_t embedding = 100;    // word embedding size
  // Character CNN (0: none): byte embeddings of this size, one convolution of width 3 with
  // character_filters outputs, max-pooled over the word; needs batches with forms.
  int64_t character_embedding = 0;
  int64_t character_filters = 100;
  int64_t lstm_hidden = 128;  // per direction; r = 2 * lstm_hidden
  int64_t lstm_layers = 2;
  int64_t arc_features = 128;  // d
  int64_t iterations = 1;      // k: arc computations (1: the biaffine parser)
  bool jacobi = false;   // update H and M together from the previous state (the authors' code)
  double dropout = 0.3;  // on H and M, one mask per sentence for all iterations
  double encoder_dropout = 0;  // on the LSTM's input and output rows while training
  uint64_t init_seed = 0;
};
void check_config(const ParserConfig& config);
void to_json(nlohmann::json& out, const ParserConfig& config);
void from_json(const nlohmann::json& in, ParserConfig& config);

class UnnParserImpl : public torch::nn::Module {
 public:
  explicit UnnParserImpl(ParserConfig config);
  const ParserConfig& config() const { return config_; }
  Network& network() { return network_; }
  // The batch's words (B, n <= max_words) int64 (0 = padding), lengths (B) and, with a character
  // CNN, characters -> the inference; its preactivation["Y"] holds the last arc scores
  // (B, n_max + 1, n_max), state["Y"] the marginals. `dropout` (training) draws the encoder's and
  // H / M's dropout masks.
  InferenceResult parse(const data::TreebankBatch& batch, int64_t iterations,
                        at::Generator* dropout = nullptr, bool record_energy = false);

 private:
  ParserConfig config_;
  torch::nn::Embedding embedding_{nullptr};
  torch::nn::Embedding character_embedding_{nullptr};
  torch::nn::Conv1d character_filters_{nullptr};
  torch::nn::LSTM lstm_{nullptr};
  torch::Tensor root_;
  Network network_{nullptr};
};
TORCH_MODULE(UnnParser);

// Parses `sentences` in batches without gradients (single-root decoding) and scores them.
ParseScores evaluate_parser(UnnParser& model, const std::vector<data::Sentence>& sentences,
                            int64_t iterations);

struct ParserTraining {
  int64_t batch_size = 32;
  // Training sentences shorter than this are skipped (the paper keeps >= 5 words), as are those
  // longer than the model's max_words.
  int64_t min_words = 1;
  // Share of training words read as kTreebankUnknown, so that its embedding learns what an
  // unseen word looks like (only meaningful for read_ud_treebank's banks).
  double word_dropout = 0;
  train::LoopOptions loop;  // validation (dev UAS) every epoch unless set
  uint64_t seed = 0;
};
struct ParserTrainingResult {
  int64_t steps = 0;
  double seconds = 0;
  int64_t best_step = 0;
  double best_dev_uas = 0;
};
// Trains on bank.train with the tree-CRF loss, keeping the weights of the best dev UAS.
ParserTrainingResult train_parser(UnnParser& model, const data::Treebank& bank,
                                  const ParserTraining& options);

void save_parser(const std::string& path, UnnParser& model, nlohmann::json metadata);
UnnParser load_parser(const std::string& path, nlohmann::json* metadata = nullptr);

}  // namespace structdiff::unn
