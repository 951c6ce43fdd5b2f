// Number-sequence completion, the data of the UNN paper's undirected-attention experiment
// (Sec. 4, App. B): runs of consecutive numbers, ascending or descending, with a few positions
// masked, generated exactly as the authors' attn/generate_sequences.py does, including its
// train / test split (UNN spec, section 3.5; the authors' code is deep-spin/unn).
//
// Storage: tokens and targets are int64, so batches go straight into embedding and cross-entropy
// without conversion. The full set is about 307 MB (two 785,142 x 24 int64 tensors plus
// lengths); generate_number_sequence_split writes straight into the two parts so that its peak
// stays there, while generate_number_sequences followed by split_number_sequences holds the set
// and both parts at once (about 620 MB) until the caller drops the full set.
#pragma once

#include <cstdint>

#include <torch/types.h>

namespace structdiff::data {

constexpr int64_t kSequencePad = 0;
constexpr int64_t kSequenceMask = 1;
constexpr int64_t kSequenceVocabulary = 66;  // PAD, MASK and the numbers 1..64 as ids 2..65
constexpr int64_t kSequenceLength = 24;      // every row is right-padded to this
constexpr int64_t kSequenceNoTarget = -1;    // target at unmasked positions (ignore index)
constexpr int64_t kSequenceMinRun = 8;       // run lengths n = 8..24
constexpr int64_t kSequenceMaxRun = 24;
constexpr int64_t kSequenceLargestNumber = 64;
constexpr int64_t kSequenceExamples = 785142;
constexpr int64_t kSequenceMaskedTokens = 2108656;

// The id of the number `number` (1..64).
constexpr int64_t sequence_token(int64_t number) { return number + 1; }

// Row i of every tensor is one example.
struct NumberSequences {
  torch::Tensor tokens;   // (N, 24) int64: the run with MASK at masked positions, PAD after it
  torch::Tensor targets;  // (N, 24) int64: the original id at masked positions, -1 elsewhere
  torch::Tensor lengths;  // (N) int64: the run length n
  int64_t size() const { return tokens.defined() ? tokens.size(0) : 0; }
};

// All 785,142 examples in the authors' order: run length n = 8..24; start number 1..65-n;
// number of masks k = 1..ceil(0.1 n); the k-subsets of positions in lexicographic order; for
// each subset the ascending run, then the descending one (the same positions masked). Row i is
// the authors' example i, which is what lets the split below match theirs.
NumberSequences generate_number_sequences();

// The rows `index` (1-D integer tensor) of `all`, in that order. Throws std::invalid_argument
// for an index that is not a 1-D integer tensor or is out of range.
NumberSequences select_number_sequences(const NumberSequences& all, const torch::Tensor& index);

struct NumberSequenceSplit {
  NumberSequences train, test;
  torch::Tensor train_index;  // (train size) int64: the rows of the full set, in order
  torch::Tensor test_index;   // (test size) int64
};

// The authors' split (torch.utils.data.random_split with generator seeded `seed`): test size
// floor(test_fraction * N) as Python's int() gives it, train the rest; the rows are a torch
// randperm(N) from a CPU generator seeded `seed`, the first train-size entries for train and the
// others for test. libtorch's CPU generator and randperm are PyTorch's, so seed 42 on the full
// set reproduces the authors' 706,628 / 78,514 membership and order exactly (checked against
// their script's output). Throws std::invalid_argument naming test_fraction unless it is in
// (0, 1) and leaves both parts non-empty.
NumberSequenceSplit split_number_sequences(const NumberSequences& all, uint64_t seed = 42,
                                           double test_fraction = 0.1);

// generate_number_sequences() then split_number_sequences(all, seed, test_fraction), with the
// same result, but every example is written straight into its part: half the peak memory.
NumberSequenceSplit generate_number_sequence_split(uint64_t seed = 42, double test_fraction = 0.1);

}  // namespace structdiff::data
