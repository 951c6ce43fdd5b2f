// Character-level text data: UTF-8, vocabulary, splits by block, file errors, span masking.
#include <cmath>
#include <fstream>
#include <random>
#include <string>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "structdiff/text_data.h"
#include "support/expect_throw.h"
#include "support/temporary_files.h"

namespace structdiff::data {
namespace {

TEST(Utf8, RoundTripsEveryLength) {
  const std::string bytes = "a\xC3\xA9\xE6\x97\xA5\xF0\x9F\x98\x80z";  // a é 日 😀 z
  const std::u32string text = decode_utf8(bytes, "test");
  ASSERT_EQ(text.size(), 5u);
  EXPECT_EQ(text[1], U'\u00E9');
  EXPECT_EQ(text[2], U'\u65E5');
  EXPECT_EQ(text[3], U'\U0001F600');
  EXPECT_EQ(encode_utf8(text), bytes);
}

TEST(Utf8, NamesTheFirstBadByte) {
  EXPECT_THROW_WITH(decode_utf8(std::string("ab\xFF", 3), "file x"), std::invalid_argument,
                    "file x is not UTF-8 text (byte 0xFF at offset 2)");
  EXPECT_THROW_WITH(decode_utf8(std::string("a\0b", 3), "file y"), std::invalid_argument,
                    "byte 0x00 at offset 1");
  EXPECT_THROW_WITH(decode_utf8("\xC3", "file z"), std::invalid_argument, "offset 0");
}

TEST(CharVocabulary, SortedCharactersThenMask) {
  const CharVocabulary vocabulary = CharVocabulary::of_text(U"banana é");
  EXPECT_EQ(vocabulary.characters(), std::u32string(U" abné"));
  EXPECT_EQ(vocabulary.size(), 6);
  EXPECT_EQ(vocabulary.mask_id(), 5);
  EXPECT_EQ(vocabulary.id(U'n'), 3);
  EXPECT_EQ(vocabulary.id(U'x'), -1);
  const torch::Tensor ids = vocabulary.encode(U"nax");
  EXPECT_TRUE(torch::equal(ids, torch::tensor({3, 1, -1}, torch::kLong)));
  EXPECT_EQ(vocabulary.decode(ids), "na_");
  EXPECT_EQ(vocabulary.decode(torch::tensor({4, 5}, torch::kLong), "?"), "\xC3\xA9?");
  EXPECT_THROW_WITH(CharVocabulary(U""), std::invalid_argument, "no characters");
  EXPECT_THROW_WITH(CharVocabulary(U"aba"), std::invalid_argument, "twice");
}

TEST(SplitText, ByBlocksWhenThereAreTwenty) {
  std::u32string text;
  for (int i = 0; i < 40; ++i)
    text += (i ? U"\n\n" : U"") + std::u32string(1, U'A' + i % 26) + U" x";
  const TextSplits splits = split_text(text);
  EXPECT_EQ(splits.blocks, 40);
  // Blocks 18 and 38 ('S', 'M'), 19 and 39 ('T', 'N').
  EXPECT_EQ(splits.validation, U"S x\n\nM x");
  EXPECT_EQ(splits.test, U"T x\n\nN x");
  EXPECT_EQ(splits.train.find(U"S x"), std::u32string::npos);
  EXPECT_EQ(splits.train.size() + splits.validation.size() + splits.test.size() + 2 * 2,
            text.size());
}

TEST(SplitText, ByFractionWithFewBlocks) {
  const std::u32string text(1000, U'a');
  const TextSplits splits = split_text(text);
  EXPECT_EQ(splits.train.size(), 900u);
  EXPECT_EQ(splits.validation.size(), 50u);
  EXPECT_EQ(splits.test.size(), 50u);
}

TEST(ReadTextFile, NamesWhatIsWrong) {
  const TemporaryDirectory directory;
  EXPECT_THROW_WITH(read_text_file(directory.file("missing.txt")), std::invalid_argument,
                    "does not exist");
  EXPECT_THROW_WITH(read_text_file(directory.path()), std::invalid_argument, "is a directory");
  std::ofstream(directory.file("empty.txt")).close();
  EXPECT_THROW_WITH(read_text_file(directory.file("empty.txt")), std::invalid_argument, "is empty");
  std::ofstream(directory.file("binary.bin"), std::ios::binary) << std::string(
      "\x7F"
      "ELF\0\x01",
      6);
  EXPECT_THROW_WITH(read_text_file(directory.file("binary.bin")), std::invalid_argument,
                    "is not UTF-8 text");
  std::ofstream(directory.file("good.txt")) << "h\xC3\xA9llo";
  EXPECT_EQ(read_text_file(directory.file("good.txt")), std::u32string(U"héllo"));
}

// Lengths of the runs of true in a mask.
std::vector<int64_t> runs(const torch::Tensor& mask) {
  std::vector<int64_t> lengths;
  int64_t current = 0;
  const bool* m = mask.data_ptr<bool>();
  for (int64_t i = 0; i < mask.size(0); ++i) {
    if (m[i]) {
      ++current;
    } else if (current > 0) {
      lengths.push_back(current);
      current = 0;
    }
  }
  if (current > 0) lengths.push_back(current);
  return lengths;
}

TEST(SpanMask, MasksExactlyTheRequestedCount) {
  std::mt19937_64 rng(1);
  for (int64_t n : {1, 7, 64, 256, 1000}) {
    for (double ratio : {0.01, 0.1, 0.5, 0.9, 1.0}) {
      for (SpanDistribution distribution :
           {SpanDistribution::geometric, SpanDistribution::logistic}) {
        const SpanMasking masking{ratio, 16, distribution, 3};
        const torch::Tensor mask = span_mask(n, masking, rng);
        const int64_t expected = std::max<int64_t>(1, std::llround(ratio * n));
        EXPECT_EQ(mask.sum().item<int64_t>(), expected) << n << " " << ratio;
      }
    }
  }
}

TEST(SpanMask, TerminatesAtHighRatiosWithLongSpans) {
  std::mt19937_64 rng(2);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(
        span_mask(256, {0.95, 200, SpanDistribution::geometric, 3}, rng).sum().item<int64_t>(),
        243);
  }
}

TEST(SpanMask, MeanSpanLengthAtLowRatio) {
  std::mt19937_64 rng(3);
  for (SpanDistribution distribution : {SpanDistribution::geometric, SpanDistribution::logistic}) {
    double total = 0, count = 0;
    for (int i = 0; i < 400; ++i) {
      for (int64_t length : runs(span_mask(4096, {0.03, 10, distribution, 3}, rng))) {
        total += static_cast<double>(length);
        count += 1;
      }
    }
    // Spans rarely touch at 3 %; the trimmed last span pulls the mean down a little.
    EXPECT_NEAR(total / count, 10.0, 1.0);
  }
}

TEST(SpanMask, SameSeedSameMask) {
  std::mt19937_64 a(7), b(7);
  EXPECT_TRUE(torch::equal(span_mask(300, {}, a), span_mask(300, {}, b)));
}

TEST(SpanMask, MixedFollowsAlgorithmTwo) {
  std::mt19937_64 rng(4);
  int all = 0, high = 0, half = 0;
  for (int i = 0; i < 2000; ++i) {
    const int64_t count = mixed_span_mask(200, {}, rng).sum().item<int64_t>();
    all += count == 200;
    high += count == 170;
    half += count == 100;
  }
  EXPECT_EQ(all + high + half, 2000);
  EXPECT_NEAR(all / 2000.0, 0.3, 0.04);
  EXPECT_NEAR(high / 2000.0, 0.2, 0.04);
}

TEST(SpanMask, BadSettingsNameTheField) {
  std::mt19937_64 rng(5);
  EXPECT_THROW_WITH(span_mask(10, {0.0, 3, SpanDistribution::geometric, 3}, rng),
                    std::invalid_argument, "mask ratio must be in (0, 1]");
  EXPECT_THROW_WITH(span_mask(10, {0.5, 0.5, SpanDistribution::geometric, 3}, rng),
                    std::invalid_argument, "span mean must be a finite number >= 1");
  EXPECT_THROW_WITH(span_mask(10, {0.5, NAN, SpanDistribution::geometric, 3}, rng),
                    std::invalid_argument, "span mean");
  EXPECT_THROW_WITH(span_mask(0, {}, rng), std::invalid_argument, "at least one position");
  EXPECT_THROW_WITH(parse_span_distribution("poisson"), std::invalid_argument,
                    "(choose geometric or logistic)");
}

}  // namespace
}  // namespace structdiff::data
