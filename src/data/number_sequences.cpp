// Number-sequence completion data of the UNN paper's undirected-attention experiment: the
// authors' enumeration of masked runs and their random_split, reproduced row for row.
#include <cmath>
#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "structdiff/number_sequences.h"

namespace structdiff::data {
namespace {

// The k-subsets of {0..n-1} in lexicographic order, as itertools.combinations yields them.
std::vector<std::vector<int>> combinations(int n, int k) {
  std::vector<std::vector<int>> all;
  std::vector<int> pick(k);
  for (int i = 0; i < k; ++i) pick[i] = i;
  while (true) {
    all.push_back(pick);
    int i = k - 1;
    while (i >= 0 && pick[i] == n - k + i) --i;
    if (i < 0) return all;
    ++pick[i];
    for (int j = i + 1; j < k; ++j) pick[j] = pick[j - 1] + 1;
  }
}

// The authors' np.ceil(.1 * n), in the same double arithmetic.
int max_masks(int n) { return static_cast<int>(std::ceil(0.1 * static_cast<double>(n))); }

NumberSequences allocate(int64_t rows) {
  const auto options = torch::TensorOptions().dtype(torch::kLong);
  return {torch::empty({rows, kSequenceLength}, options),
          torch::empty({rows, kSequenceLength}, options), torch::empty({rows}, options)};
}

// Writes every example, in the authors' order, to the row that `destination(i)` names for
// example i: (part, row) with part indexing `parts`.
template <typename Destination>
void generate_into(const std::vector<NumberSequences*>& parts, Destination destination) {
  std::vector<int64_t*> tokens, targets, lengths;
  for (NumberSequences* part : parts) {
    tokens.push_back(part->tokens.data_ptr<int64_t>());
    targets.push_back(part->targets.data_ptr<int64_t>());
    lengths.push_back(part->lengths.data_ptr<int64_t>());
  }
  int64_t index = 0;
  int64_t run[kSequenceLength];
  for (int n = kSequenceMinRun; n <= kSequenceMaxRun; ++n) {
    std::vector<std::vector<int>> subsets;
    for (int k = 1; k <= max_masks(n); ++k)
      for (auto& subset : combinations(n, k)) subsets.push_back(std::move(subset));
    for (int start = 1; start + n - 1 <= kSequenceLargestNumber; ++start) {
      for (const std::vector<int>& subset : subsets) {
        for (int descending = 0; descending < 2; ++descending) {
          for (int p = 0; p < n; ++p)
            run[p] = sequence_token(descending ? start + n - 1 - p : start + p);
          // The destinations are sized for kSequenceExamples rows.
          if (index == kSequenceExamples)
            throw std::logic_error("number sequences: more than " +
                                   std::to_string(kSequenceExamples) + " examples");
          const auto [part, row] = destination(index++);
          int64_t* token = tokens[part] + row * kSequenceLength;
          int64_t* target = targets[part] + row * kSequenceLength;
          for (int p = 0; p < kSequenceLength; ++p) {
            token[p] = p < n ? run[p] : kSequencePad;
            target[p] = kSequenceNoTarget;
          }
          for (int p : subset) {
            token[p] = kSequenceMask;
            target[p] = run[p];
          }
          lengths[part][row] = n;
        }
      }
    }
  }
  if (index != kSequenceExamples)
    throw std::logic_error("number sequences: generated " + std::to_string(index) +
                           " examples, expected " + std::to_string(kSequenceExamples));
}

// Test size as the authors' int(.1 * N); throws unless both parts are non-empty.
int64_t test_size(int64_t examples, double test_fraction) {
  if (!(test_fraction > 0.0 && test_fraction < 1.0)) {
    std::ostringstream message;
    message << "test_fraction must be in (0, 1), got " << test_fraction;
    throw std::invalid_argument(message.str());
  }
  const auto test = static_cast<int64_t>(test_fraction * static_cast<double>(examples));
  if (test == 0 || test >= examples) {  // the latter only through rounding of a huge N
    std::ostringstream message;
    message << "test_fraction " << test_fraction << " of " << examples
            << " examples leaves an empty " << (test == 0 ? "test" : "train") << " split";
    throw std::invalid_argument(message.str());
  }
  return test;
}

// torch.utils.data.random_split's permutation: randperm(N) from a fresh CPU generator.
torch::Tensor split_permutation(int64_t examples, uint64_t seed) {
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  return torch::randperm(examples, generator, torch::TensorOptions().dtype(torch::kLong));
}

}  // namespace

NumberSequences generate_number_sequences() {
  NumberSequences all = allocate(kSequenceExamples);
  generate_into({&all}, [](int64_t index) { return std::pair<int, int64_t>(0, index); });
  return all;
}

NumberSequences select_number_sequences(const NumberSequences& all, const torch::Tensor& index) {
  if (!index.defined() || index.dim() != 1 ||
      !at::isIntegralType(index.scalar_type(), /*includeBool=*/false))
    throw std::invalid_argument("select_number_sequences: index must be a 1-D integer tensor");
  const torch::Tensor rows = index.to(torch::kLong);
  if (rows.numel() > 0 &&
      (rows.min().item<int64_t>() < 0 || rows.max().item<int64_t>() >= all.size()))
    throw std::invalid_argument("select_number_sequences: index out of range for " +
                                std::to_string(all.size()) + " examples");
  return {all.tokens.index_select(0, rows), all.targets.index_select(0, rows),
          all.lengths.index_select(0, rows)};
}

NumberSequenceSplit split_number_sequences(const NumberSequences& all, uint64_t seed,
                                           double test_fraction) {
  const int64_t test = test_size(all.size(), test_fraction);
  const torch::Tensor permutation = split_permutation(all.size(), seed);
  NumberSequenceSplit split;
  split.train_index = permutation.slice(0, 0, all.size() - test).clone();
  split.test_index = permutation.slice(0, all.size() - test).clone();
  split.train = select_number_sequences(all, split.train_index);
  split.test = select_number_sequences(all, split.test_index);
  return split;
}

NumberSequenceSplit generate_number_sequence_split(uint64_t seed, double test_fraction) {
  const int64_t test = test_size(kSequenceExamples, test_fraction);
  const int64_t train = kSequenceExamples - test;
  NumberSequenceSplit split;
  const torch::Tensor permutation = split_permutation(kSequenceExamples, seed);
  split.train_index = permutation.slice(0, 0, train).clone();
  split.test_index = permutation.slice(0, train).clone();
  split.train = allocate(train);
  split.test = allocate(test);
  // Where example i goes: its position in the permutation.
  std::vector<int64_t> position(kSequenceExamples);
  const int64_t* order = permutation.data_ptr<int64_t>();
  for (int64_t j = 0; j < kSequenceExamples; ++j) position[order[j]] = j;
  generate_into({&split.train, &split.test}, [&](int64_t index) {
    const int64_t j = position[index];
    return j < train ? std::pair<int, int64_t>(0, j) : std::pair<int, int64_t>(1, j - train);
  });
  return split;
}

}  // namespace structdiff::data
