// Tests of the number-sequence completion data (UNN undirected-attention experiment): totals, row
// for row agreement with the authors' generator and split, the structure of every example, and
// argument checks.
#include "structdiff/number_sequences.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <stdexcept>
#include <vector>

#include <torch/torch.h>

#include "support/expect_throw.h"

namespace structdiff::data {
namespace {

// Generated once: each generation writes about 300 MB.
const NumberSequences& all_sequences() {
  static const NumberSequences all = generate_number_sequences();
  return all;
}
const NumberSequenceSplit& authors_split() {
  static const NumberSequenceSplit split = generate_number_sequence_split();
  return split;
}

// A position-weighted sum of `values` (flattened, as uint64) modulo 2^64. The expected digests
// below were computed with the same formula from the tensors that the authors'
// attn/generate_sequences.py (deep-spin/unn) produces under PyTorch 1.13.
uint64_t digest(const torch::Tensor& values) {
  const torch::Tensor flat = values.to(torch::kLong).contiguous().view(-1);
  const int64_t* v = flat.data_ptr<int64_t>();
  uint64_t sum = 0;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    uint64_t w = static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ULL + 0x632BE59BD9B4E019ULL;
    w ^= w >> 31;
    w *= 0xBF58476D1CE4E5B9ULL;
    w ^= w >> 29;
    sum += static_cast<uint64_t>(v[i]) * w;
  }
  return sum;
}

// The authors' target layout: (N, 3), the masked originals in position order, then PAD.
torch::Tensor compact_targets(const NumberSequences& data) {
  torch::Tensor compact = torch::zeros({data.size(), 3}, torch::kLong);
  const int64_t* target = data.targets.data_ptr<int64_t>();
  int64_t* out = compact.data_ptr<int64_t>();
  for (int64_t row = 0; row < data.size(); ++row) {
    int64_t k = 0;
    for (int64_t p = 0; p < kSequenceLength; ++p) {
      const int64_t t = target[row * kSequenceLength + p];
      if (t != kSequenceNoTarget && k < 3) out[row * 3 + k++] = t;
    }
  }
  return compact;
}

std::vector<int64_t> row(const torch::Tensor& tensor, int64_t index) {
  const torch::Tensor r = tensor[index].contiguous();
  return std::vector<int64_t>(r.data_ptr<int64_t>(), r.data_ptr<int64_t>() + r.numel());
}

std::vector<int64_t> values(const torch::Tensor& tensor) {
  const torch::Tensor t = tensor.to(torch::kLong).contiguous();
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

// `front` followed by PAD up to the row length.
std::vector<int64_t> padded(std::vector<int64_t> front, int64_t fill = kSequencePad) {
  front.resize(kSequenceLength, fill);
  return front;
}

int64_t binomial(int64_t n, int64_t k) {
  int64_t result = 1;
  for (int64_t i = 1; i <= k; ++i) result = result * (n - k + i) / i;
  return result;
}

bool equal(const NumberSequences& a, const NumberSequences& b) {
  return torch::equal(a.tokens, b.tokens) && torch::equal(a.targets, b.targets) &&
         torch::equal(a.lengths, b.lengths);
}

TEST(NumberSequences, TotalsMatchThePaper) {
  const NumberSequences& all = all_sequences();
  EXPECT_EQ(all.size(), 785142);
  EXPECT_EQ(all.tokens.sizes(), (std::vector<int64_t>{785142, kSequenceLength}));
  EXPECT_EQ(all.targets.sizes(), all.tokens.sizes());
  EXPECT_EQ(all.lengths.sizes(), (std::vector<int64_t>{785142}));
  EXPECT_EQ(all.tokens.scalar_type(), torch::kLong);
  EXPECT_EQ(all.targets.scalar_type(), torch::kLong);
  EXPECT_EQ(all.lengths.scalar_type(), torch::kLong);
  const torch::Tensor masked = all.tokens == kSequenceMask;
  EXPECT_EQ(masked.sum().item<int64_t>(), 2108656);
  // A target exactly where a MASK is.
  EXPECT_TRUE(torch::equal(masked, all.targets != kSequenceNoTarget));
  EXPECT_EQ(kSequenceExamples, 785142);
  EXPECT_EQ(kSequenceMaskedTokens, 2108656);
}

TEST(NumberSequences, MatchesTheAuthorsGeneratorRowForRow) {
  const NumberSequences& all = all_sequences();
  EXPECT_EQ(digest(all.tokens), 0xd83728807af22100ULL);
  EXPECT_EQ(digest(compact_targets(all)), 0xa137eb4e7aad2ab4ULL);
  // Rows checked by hand against the authors' output: n = 8 starts with 1..8 masked at
  // position 0 ascending, then descending, then position 1 ascending; its last row (912 = 57
  // starts x 8 positions x 2 directions) is 64..57 descending, masked at position 7.
  EXPECT_EQ(row(all.tokens, 0), padded({1, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(row(all.targets, 0), padded({2}, kSequenceNoTarget));
  EXPECT_EQ(row(all.tokens, 1), padded({1, 8, 7, 6, 5, 4, 3, 2}));
  EXPECT_EQ(row(all.targets, 1), padded({9}, kSequenceNoTarget));
  EXPECT_EQ(row(all.tokens, 2), padded({2, 1, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(row(all.targets, 2), padded({-1, 3}, kSequenceNoTarget));
  EXPECT_EQ(row(all.tokens, 911), padded({65, 64, 63, 62, 61, 60, 59, 1}));
  EXPECT_EQ(row(all.targets, 911), padded({-1, -1, -1, -1, -1, -1, -1, 58}, kSequenceNoTarget));
  EXPECT_EQ(row(all.tokens, 912), padded({1, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(all.lengths[911].item<int64_t>(), 8);
  EXPECT_EQ(all.lengths[912].item<int64_t>(), 9);
  // The very last: n = 24, 41..64 descending, the last three positions masked.
  std::vector<int64_t> last;
  for (int64_t id = 65; id >= 45; --id) last.push_back(id);
  last.insert(last.end(), {1, 1, 1});
  EXPECT_EQ(row(all.tokens, 785141), last);
  EXPECT_EQ(row(compact_targets(all), 785141), (std::vector<int64_t>{44, 43, 42}));
}

TEST(NumberSequences, EveryExampleIsAMaskedRunOfConsecutiveNumbers) {
  const NumberSequences& all = all_sequences();
  const int64_t* tokens = all.tokens.data_ptr<int64_t>();
  const int64_t* targets = all.targets.data_ptr<int64_t>();
  const int64_t* lengths = all.lengths.data_ptr<int64_t>();
  int64_t bad = 0;
  for (int64_t i = 0; i < all.size() && bad < 5; ++i) {
    const int64_t n = lengths[i];
    const int64_t* token = tokens + i * kSequenceLength;
    const int64_t* target = targets + i * kSequenceLength;
    bool ok = n >= kSequenceMinRun && n <= kSequenceMaxRun;
    int64_t masks = 0;
    std::array<int64_t, kSequenceLength> original{};
    for (int64_t p = 0; ok && p < kSequenceLength; ++p) {
      if (p >= n) {
        ok = token[p] == kSequencePad && target[p] == kSequenceNoTarget;
      } else if (token[p] == kSequenceMask) {
        ++masks;
        original[p] = target[p];
      } else {
        ok = target[p] == kSequenceNoTarget;
        original[p] = token[p];
      }
      if (p < n) ok = ok && original[p] >= 2 && original[p] < kSequenceVocabulary;
    }
    // ceil(0.1 n) without floating point: 1 up to n = 10, 2 up to 20, then 3.
    ok = ok && masks >= 1 && masks <= (n + 9) / 10;
    const int64_t step = original[1] - original[0];
    ok = ok && (step == 1 || step == -1);
    for (int64_t p = 1; ok && p < n; ++p) ok = original[p] - original[p - 1] == step;
    if (!ok) {
      ++bad;
      ADD_FAILURE() << "example " << i << " (n = " << n << "): tokens " << all.tokens[i]
                    << " targets " << all.targets[i];
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GE(all.tokens.min().item<int64_t>(), 0);
  EXPECT_LT(all.tokens.max().item<int64_t>(), kSequenceVocabulary);
  EXPECT_EQ(all.targets.max().item<int64_t>(), kSequenceVocabulary - 1);
}

// With every example valid (above), distinct examples in the right number per length mean every
// (start, direction, masked subset) occurs exactly once.
TEST(NumberSequences, EveryMaskingOfEveryRunOccursExactlyOnce) {
  const NumberSequences& all = all_sequences();
  // Ids are below 128: 7 bits each, 8 per word.
  std::vector<std::array<uint64_t, 3>> keys(all.size());
  const int64_t* tokens = all.tokens.data_ptr<int64_t>();
  for (int64_t i = 0; i < all.size(); ++i)
    for (int64_t p = 0; p < kSequenceLength; ++p)
      keys[i][p / 8] |= static_cast<uint64_t>(tokens[i * kSequenceLength + p]) << (7 * (p % 8));
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());

  std::map<int64_t, int64_t> per_length;
  for (int64_t n : values(all.lengths)) ++per_length[n];
  ASSERT_EQ(per_length.size(), 17u);
  for (int64_t n = 8; n <= 24; ++n) {
    int64_t subsets = 0;
    for (int64_t k = 1; k <= (n + 9) / 10; ++k) subsets += binomial(n, k);
    EXPECT_EQ(per_length[n], (65 - n) * 2 * subsets) << "n = " << n;
  }
  // By hand: n = 8 has starts 1..57, 2 directions and 8 single masks; n = 24 has starts 1..41
  // and 24 + 276 + 2024 subsets of up to 3 positions.
  EXPECT_EQ(per_length[8], 912);
  EXPECT_EQ(per_length[11], 54 * 2 * (11 + 55));
  EXPECT_EQ(per_length[24], 190568);
}

TEST(NumberSequences, SplitIsTheAuthors) {
  const NumberSequenceSplit& split = authors_split();
  EXPECT_EQ(split.train.size(), 706628);
  EXPECT_EQ(split.test.size(), 78514);
  EXPECT_EQ(split.train_index.sizes(), (std::vector<int64_t>{706628}));
  EXPECT_EQ(split.test_index.sizes(), (std::vector<int64_t>{78514}));
  // Membership and order of torch.utils.data.random_split(..., generator seeded 42) in the
  // authors' script.
  EXPECT_EQ(values(split.train_index.slice(0, 0, 6)),
            (std::vector<int64_t>{666726, 266731, 558878, 352000, 197478, 138035}));
  EXPECT_EQ(values(split.test_index.slice(0, 0, 6)),
            (std::vector<int64_t>{510988, 231391, 591170, 454195, 206508, 75645}));
  EXPECT_EQ(values(split.test_index.slice(0, -3)), (std::vector<int64_t>{270451, 77092, 11262}));
  EXPECT_EQ(digest(split.train_index), 0xd35c012245ed8249ULL);
  EXPECT_EQ(digest(split.test_index), 0xf8d387ef4f8133bULL);

  // Disjoint and covering.
  const torch::Tensor both = std::get<0>(torch::cat({split.train_index, split.test_index}).sort());
  EXPECT_TRUE(torch::equal(both, torch::arange(kSequenceExamples, torch::kLong)));

  // Each part holds the rows its index names.
  const NumberSequences& all = all_sequences();
  EXPECT_TRUE(equal(split.train, select_number_sequences(all, split.train_index)));
  EXPECT_TRUE(equal(split.test, select_number_sequences(all, split.test_index)));
}

TEST(NumberSequences, SplittingTheFullSetEqualsGeneratingTheSplit) {
  const NumberSequenceSplit split = split_number_sequences(all_sequences());
  const NumberSequenceSplit& direct = authors_split();
  EXPECT_TRUE(torch::equal(split.train_index, direct.train_index));
  EXPECT_TRUE(torch::equal(split.test_index, direct.test_index));
  EXPECT_TRUE(equal(split.train, direct.train));
  EXPECT_TRUE(equal(split.test, direct.test));
}

TEST(NumberSequences, SplitIsDeterministicGivenTheSeed) {
  const NumberSequences some = select_number_sequences(all_sequences(), torch::arange(0, 5000));
  const NumberSequenceSplit a = split_number_sequences(some, 3, 0.2);
  const NumberSequenceSplit b = split_number_sequences(some, 3, 0.2);
  const NumberSequenceSplit c = split_number_sequences(some, 4, 0.2);
  EXPECT_TRUE(torch::equal(a.test_index, b.test_index));
  EXPECT_TRUE(equal(a.test, b.test));
  EXPECT_TRUE(equal(a.train, b.train));
  EXPECT_EQ(a.test.size(), c.test.size());
  EXPECT_FALSE(torch::equal(a.test_index, c.test_index));
  // Different seed, different membership (not only a different order).
  EXPECT_FALSE(torch::equal(std::get<0>(a.test_index.sort()), std::get<0>(c.test_index.sort())));
}

TEST(NumberSequences, TestSizeRoundsDownLikeTheAuthors) {
  // int(.29 * 100) is 28 in Python: the product is 28.999999999999996.
  const NumberSequences hundred = select_number_sequences(all_sequences(), torch::arange(100));
  const NumberSequenceSplit split = split_number_sequences(hundred, 1, 0.29);
  EXPECT_EQ(split.test.size(), 28);
  EXPECT_EQ(split.train.size(), 72);
  const NumberSequences thousand = select_number_sequences(all_sequences(), torch::arange(1000));
  EXPECT_EQ(split_number_sequences(thousand, 1, 0.25).test.size(), 250);
}

TEST(NumberSequences, SelectKeepsTheIndexOrder) {
  const NumberSequences& all = all_sequences();
  const NumberSequences picked =
      select_number_sequences(all, torch::tensor({912, 0, 785141}, torch::kInt));
  ASSERT_EQ(picked.size(), 3);
  EXPECT_EQ(row(picked.tokens, 0), row(all.tokens, 912));
  EXPECT_EQ(row(picked.targets, 1), row(all.targets, 0));
  EXPECT_EQ(values(picked.lengths), (std::vector<int64_t>{9, 8, 24}));
}

TEST(NumberSequences, BadArgumentsThrow) {
  const NumberSequences some = select_number_sequences(all_sequences(), torch::arange(0, 50));
  for (double fraction : {0.0, 1.0, -0.1, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    SCOPED_TRACE(fraction);
    EXPECT_THROW_WITH(split_number_sequences(some, 42, fraction), std::invalid_argument,
                      "test_fraction");
    EXPECT_THROW_WITH(generate_number_sequence_split(42, fraction), std::invalid_argument,
                      "test_fraction");
  }
  // 0.01 of 50 examples is 0.5: no test example.
  EXPECT_THROW_WITH(split_number_sequences(some, 42, 0.01), std::invalid_argument,
                    "empty test split");
  EXPECT_THROW_WITH(select_number_sequences(some, torch::zeros({2, 2}, torch::kLong)),
                    std::invalid_argument, "1-D integer");
  EXPECT_THROW_WITH(select_number_sequences(some, torch::zeros({2})), std::invalid_argument,
                    "1-D integer");
  EXPECT_THROW_WITH(select_number_sequences(some, torch::tensor({0, 50})), std::invalid_argument,
                    "out of range");
  EXPECT_THROW_WITH(select_number_sequences(some, torch::tensor({-1})), std::invalid_argument,
                    "out of range");
}

}  // namespace
}  // namespace structdiff::data
