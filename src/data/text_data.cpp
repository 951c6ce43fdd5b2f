// Character-level text data and span masking.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

#include <torch/torch.h>

#include "structdiff/enum_names.h"
#include "structdiff/runtime.h"
#include "structdiff/text_data.h"
#include "util/text.h"

namespace structdiff::data {

std::u32string decode_utf8(const std::string& bytes, const std::string& what) {
  std::u32string text;
  text.reserve(bytes.size());
  for (size_t at = 0; at < bytes.size();) {
    const size_t length = utf8_sequence_length(bytes, at);
    if (length == 0 || bytes[at] == '\0') {
      char byte[8];
      std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(bytes[at]));
      throw std::invalid_argument(what + " is not UTF-8 text (byte " + byte + " at offset " +
                                  std::to_string(at) + ")");
    }
    const auto lead = static_cast<unsigned char>(bytes[at]);
    char32_t c = length == 1   ? lead
                 : length == 2 ? lead & 0x1F
                 : length == 3 ? lead & 0x0F
                               : lead & 0x07;
    for (size_t k = 1; k < length; ++k)
      c = (c << 6) | (static_cast<unsigned char>(bytes[at + k]) & 0x3F);
    text.push_back(c);
    at += length;
  }
  return text;
}

std::string encode_utf8(const std::u32string& text) {
  std::string bytes;
  bytes.reserve(text.size());
  for (const char32_t c : text) {
    if (c < 0x80) {
      bytes.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      bytes.push_back(static_cast<char>(0xC0 | (c >> 6)));
      bytes.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      bytes.push_back(static_cast<char>(0xE0 | (c >> 12)));
      bytes.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      bytes.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      bytes.push_back(static_cast<char>(0xF0 | (c >> 18)));
      bytes.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      bytes.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      bytes.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  }
  return bytes;
}

CharVocabulary::CharVocabulary(std::u32string characters) : characters_(std::move(characters)) {
  if (characters_.empty()) throw std::invalid_argument("CharVocabulary: no characters");
  std::sort(characters_.begin(), characters_.end());
  if (std::adjacent_find(characters_.begin(), characters_.end()) != characters_.end()) {
    throw std::invalid_argument("CharVocabulary: a character appears twice");
  }
}

CharVocabulary CharVocabulary::of_text(const std::u32string& text) {
  std::u32string characters = text;
  std::sort(characters.begin(), characters.end());
  characters.erase(std::unique(characters.begin(), characters.end()), characters.end());
  return CharVocabulary(std::move(characters));
}

int64_t CharVocabulary::id(char32_t c) const {
  const auto it = std::lower_bound(characters_.begin(), characters_.end(), c);
  return it != characters_.end() && *it == c ? it - characters_.begin() : -1;
}

torch::Tensor CharVocabulary::encode(const std::u32string& text) const {
  torch::Tensor ids = torch::empty({static_cast<int64_t>(text.size())}, torch::kLong);
  int64_t* out = ids.data_ptr<int64_t>();
  for (size_t i = 0; i < text.size(); ++i) out[i] = id(text[i]);
  return ids;
}

std::string CharVocabulary::decode(const torch::Tensor& ids, const std::string& mask_glyph) const {
  const torch::Tensor flat = ids.to(torch::kLong).contiguous().view(-1);
  const int64_t* in = flat.data_ptr<int64_t>();
  std::string text;
  for (int64_t i = 0; i < flat.numel(); ++i) {
    if (in[i] >= 0 && in[i] < num_characters()) {
      text += encode_utf8(std::u32string(1, characters_[in[i]]));
    } else {
      text += mask_glyph;
    }
  }
  return text;
}

TextSplits split_text(const std::u32string& text) {
  std::vector<std::u32string> blocks;
  const std::u32string separator = U"\n\n";
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find(separator, at);
    if (end == std::u32string::npos) end = text.size();
    if (end > at) blocks.push_back(text.substr(at, end - at));
    at = end + separator.size();
    while (at < text.size() && text[at] == U'\n') ++at;
  }
  TextSplits splits;
  splits.blocks = static_cast<int64_t>(blocks.size());
  if (blocks.size() < 20) {
    const size_t n = text.size(), train_end = n * 90 / 100, validation_end = n * 95 / 100;
    splits.train = text.substr(0, train_end);
    splits.validation = text.substr(train_end, validation_end - train_end);
    splits.test = text.substr(validation_end);
    return splits;
  }
  for (size_t i = 0; i < blocks.size(); ++i) {
    std::u32string& split = i % 20 == 18   ? splits.validation
                            : i % 20 == 19 ? splits.test
                                           : splits.train;
    if (!split.empty()) split += separator;
    split += blocks[i];
  }
  return splits;
}

std::u32string read_text_file(const std::string& path) {
  const std::string content = read_bounded(path, kMaxTextBytes, "text file");
  if (content.empty()) throw std::invalid_argument("text file " + path + " is empty");
  if (content.find_first_not_of(" \t\r\n\f\v") == std::string::npos) {
    throw std::invalid_argument("text file " + path + " holds only white space: nothing to learn from");
  }
  return decode_utf8(content, "text file " + path);
}

// ---- span masking --------------------------------------------------------------------------

namespace {
const auto kSpanNames = enum_names<SpanDistribution>("span distribution", {
    {SpanDistribution::geometric, "geometric"},
    {SpanDistribution::logistic, "logistic"},
});
}  // namespace

SpanDistribution parse_span_distribution(const std::string& name) { return kSpanNames.parse(name); }

void check_span_masking(const SpanMasking& masking) {
  if (!(masking.ratio > 0 && masking.ratio <= 1)) {
    throw std::invalid_argument("mask ratio must be in (0, 1], got " +
                                std::to_string(masking.ratio));
  }
  if (!(masking.mean >= 1 && std::isfinite(masking.mean))) {
    throw std::invalid_argument("span mean must be a finite number >= 1, got " +
                                std::to_string(masking.mean));
  }
  if (!(masking.stddev > 0 && std::isfinite(masking.stddev))) {
    throw std::invalid_argument("span standard deviation must be > 0, got " +
                                std::to_string(masking.stddev));
  }
}

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

namespace {

int64_t draw_span_length(const SpanMasking& masking, std::mt19937_64& rng) {
  // 1 - u lies in (0, 1], so both logarithms are finite.
  const double u = 1.0 - uniform01(rng);
  if (masking.distribution == SpanDistribution::geometric) {
    if (masking.mean <= 1) return 1;
    // Inverse CDF of the geometric distribution on {1, 2, ...} with success probability 1/mean.
    const double length = 1.0 + std::floor(std::log(u) / std::log1p(-1.0 / masking.mean));
    return static_cast<int64_t>(std::min(length, 1e15));
  }
  const double scale =
      masking.stddev * std::sqrt(3.0) / M_PI;  // logistic std = scale * pi / sqrt 3
  const double v = std::max(u, 1e-300);
  const double draw = masking.mean + scale * std::log(v / std::max(1.0 - v, 1e-300));
  return static_cast<int64_t>(std::max(1.0, std::min(std::round(draw), 1e15)));
}

}  // namespace

torch::Tensor span_mask(int64_t n, const SpanMasking& masking, std::mt19937_64& rng) {
  if (n < 1)
    throw std::invalid_argument("span_mask: need at least one position, got " + std::to_string(n));
  check_span_masking(masking);
  const int64_t to_mask = std::max<int64_t>(
      1, std::min<int64_t>(n, std::llround(masking.ratio * static_cast<double>(n))));
  std::vector<uint8_t> masked(n, 0);
  std::vector<int64_t> free_positions;
  int64_t num_masked = 0, last_start = 0, last_end = 0;
  constexpr int kMaxOverlaps = 100;
  int overlaps = 0;
  while (num_masked < to_mask) {
    free_positions.clear();
    for (int64_t i = 0; i < n; ++i) {
      if (!masked[i]) free_positions.push_back(i);
    }
    const int64_t start = free_positions[static_cast<size_t>(
        uniform01(rng) * static_cast<double>(free_positions.size()))];
    int64_t end = std::min(n, start + draw_span_length(masking, rng));
    const int64_t first_masked =
        std::find(masked.begin() + start, masked.begin() + end, 1) - masked.begin();
    if (first_masked < end) {
      if (++overlaps < kMaxOverlaps) continue;
      end = first_masked;  // cut at the next span
    }
    overlaps = 0;
    std::fill(masked.begin() + start, masked.begin() + end, 1);
    num_masked += end - start;
    last_start = start;
    last_end = end;
  }
  // Trim the last span so that exactly to_mask positions are masked.
  for (int64_t i = last_end - 1; num_masked > to_mask && i >= last_start; --i, --num_masked)
    masked[i] = 0;
  torch::Tensor result = torch::empty({n}, torch::kBool);
  std::copy(masked.begin(), masked.end(), result.data_ptr<bool>());
  return result;
}

torch::Tensor mixed_span_mask(int64_t n, const SpanMasking& masking, std::mt19937_64& rng) {
  const double r = uniform01(rng);
  if (r < 0.3) return torch::ones({n}, torch::kBool);
  SpanMasking spans = masking;
  spans.ratio = r < 0.5 ? 0.85 : 0.5;
  return span_mask(n, spans, rng);
}

}  // namespace structdiff::data
