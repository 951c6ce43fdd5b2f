// Character-level text data: UTF-8 files read into code points, a vocabulary of the corpus's
// characters plus <MASK>, a split into train / validation / test by blocks, and span masking
// (Algorithms 1 and 2 of the Tracformer paper, App. B.1 and C.1).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <torch/types.h>

namespace structdiff::data {

// Code points of `bytes`; throws std::invalid_argument naming `what` and the byte offset when
// the bytes are not UTF-8 text (malformed sequences or NUL bytes, as in binary files).
std::u32string decode_utf8(const std::string& bytes, const std::string& what);
std::string encode_utf8(const std::u32string& text);

// Token ids 0 .. characters-1 for the characters (sorted by code point), then <MASK>.
class CharVocabulary {
 public:
  // Throws std::invalid_argument if `characters` is empty or holds a character twice.
  explicit CharVocabulary(std::u32string characters);
  static CharVocabulary of_text(const std::u32string& text);

  int64_t size() const { return static_cast<int64_t>(characters_.size()) + 1; }  // with <MASK>
  int64_t num_characters() const { return static_cast<int64_t>(characters_.size()); }
  int64_t mask_id() const { return num_characters(); }
  const std::u32string& characters() const { return characters_; }
  // -1 for a character outside the vocabulary.
  int64_t id(char32_t c) const;
  // (n) int64 ids, -1 where a character is outside the vocabulary.
  torch::Tensor encode(const std::u32string& text) const;
  // UTF-8 text of ids; <MASK> (and anything out of range) becomes `mask_glyph`.
  std::string decode(const torch::Tensor& ids, const std::string& mask_glyph = "_") const;

 private:
  std::u32string characters_;
};

// A text split by blocks (paragraphs separated by blank lines; the chapters of data/kjv/kjv.txt):
// with at least 20 blocks, block i goes to validation when i % 20 == 18, to test when
// i % 20 == 19, else to train, so that no block is shared; with fewer blocks, the first 90 % of
// the characters train, the next 5 % validate and the last 5 % test. Each split joins its blocks
// with the blank line between them.
struct TextSplits {
  std::u32string train, validation, test;
  int64_t blocks = 0;
};
TextSplits split_text(const std::u32string& text);
// Reads a UTF-8 text file of at most kMaxTextBytes; throws std::invalid_argument for a missing,
// unreadable, empty, blank, too large or non-text file, naming it.
constexpr int64_t kMaxTextBytes = int64_t{256} << 20;
std::u32string read_text_file(const std::string& path);

// ---- span masking --------------------------------------------------------------------------

enum class SpanDistribution { geometric, logistic };
SpanDistribution parse_span_distribution(const std::string& name);  // "geometric" | "logistic"

struct SpanMasking {
  double ratio = 0.5;  // fraction of positions masked, in (0, 1]
  double mean = 16;    // mean span length, >= 1
  SpanDistribution distribution = SpanDistribution::geometric;
  double stddev = 3;  // logistic only: the standard deviation of the span length
};
// Throws std::invalid_argument naming the field, its accepted range and the value.
void check_span_masking(const SpanMasking& masking);

// Algorithm 1: masks exactly max(1, round(ratio * n)) of n positions in disjoint spans; returns
// (n) bool, true where masked (to be predicted). Span starts are drawn uniformly among unmasked
// positions (Algorithm 1's rejection of starts inside a span, without the loop); a span that
// overlaps an earlier one is redrawn, and after 100 overlaps in a row it is cut at the next
// masked position, so the procedure terminates at any ratio; the last span is trimmed to the
// exact count. Lengths: geometric on {1, 2, ...} with success probability 1/mean, or a logistic
// of that mean and standard deviation rounded and clamped to >= 1.
torch::Tensor span_mask(int64_t n, const SpanMasking& masking, std::mt19937_64& rng);

// Algorithm 2 (the paper's mixed strategy): with probability 0.3 everything is masked, with 0.2
// spans at ratio 0.85, else spans at ratio 0.5; `masking` gives the span lengths.
torch::Tensor mixed_span_mask(int64_t n, const SpanMasking& masking, std::mt19937_64& rng);

// A uniform double in [0, 1) from 53 bits of `rng`: the same on every platform, unlike the
// standard library's distributions.
double uniform01(std::mt19937_64& rng);

}  // namespace structdiff::data
