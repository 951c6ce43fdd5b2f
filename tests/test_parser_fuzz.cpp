// Seeded fuzzing of the parsers that read user text: graphical-model specs (GraphicalModel::load
// and from_json), the `gsdm invariance` axis and permutation texts, and Sudoku puzzles. Every
// input must parse or throw std::invalid_argument with a non-empty one-line message: no crash,
// hang or other exception. Fixed seeds and bounded iterations keep it deterministic and short.
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include <gtest/gtest.h>

#include "structdiff/graph.h"
#include "structdiff/sudoku.h"
#include "support/temporary_files.h"

namespace structdiff {
namespace {

using nlohmann::json;

size_t below(std::mt19937_64& rng, size_t bound) { return bound == 0 ? 0 : rng() % bound; }

template <class T>
const T& pick(std::mt19937_64& rng, const std::vector<T>& items) {
  return items[below(rng, items.size())];
}

// The input as a failure message shows it: escaped and cut short.
std::string shown(const std::string& input) {
  std::string out;
  for (char c : input.substr(0, 300)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7F) {
      out += c;
    } else {
      out += "\\x" + std::string(1, "0123456789ABCDEF"[byte >> 4]) + "0123456789ABCDEF"[byte & 15];
    }
  }
  return input.size() > 300 ? out + "..." : out;
}

// Runs `parse`; true if it returned. A rejection must be std::invalid_argument with a non-empty
// one-line message; anything else is a test failure naming the input.
template <class Parse>
bool parses_or_rejects_cleanly(const Parse& parse, const std::string& input) {
  try {
    parse();
    return true;
  } catch (const std::invalid_argument& error) {
    const std::string message = error.what();
    EXPECT_FALSE(message.empty()) << "input: " << shown(input);
    EXPECT_EQ(message.find_first_of("\n\r"), std::string::npos)
        << "message: " << shown(message) << "\ninput: " << shown(input);
  } catch (const std::exception& error) {
    ADD_FAILURE() << "threw " << typeid(error).name()
                  << ", not std::invalid_argument: " << shown(error.what())
                  << "\ninput: " << shown(input);
  }
  return false;
}

// Byte-level damage: flips, replacements, insertions, deletions, repeats, truncation. The
// insertions favour characters that mean something to the parsers.
std::string mutate_bytes(std::string text, std::mt19937_64& rng) {
  static const std::vector<std::string> tokens = {
      "[", "]", "{", "}", "\"", ",", ":", "*", "-", ".", "0", "1", "9", "e", "E", "+", " ", "\\",
      "\n", std::string(1, '\0'), "\xff", "\xc3", "\xc3\xa9", "\xef\xbc\x91", "\xc2\xa0",
      "4294967296", "18446744073709551616", "1e400", "NaN", "-0", "2.7", "null", "true",
      "\"shape\"", "\"name\"", "x[*]", "|"};
  const int edits = 1 + static_cast<int>(below(rng, 4));
  for (int edit = 0; edit < edits; ++edit) {
    const size_t at = below(rng, text.size() + 1);
    switch (below(rng, 6)) {
      case 0:
        if (at < text.size()) text[at] = static_cast<char>(text[at] ^ (1 << below(rng, 8)));
        break;
      case 1:
        if (at < text.size()) text[at] = static_cast<char>(rng());
        break;
      case 2:
        text.insert(at, pick(rng, tokens));
        break;
      case 3:
        text.erase(at, 1 + below(rng, 8));
        break;
      case 4: {
        const std::string chunk = text.substr(at, 1 + below(rng, 16));
        text.insert(at, chunk + chunk);
        break;
      }
      default:
        text.resize(at);
        break;
    }
  }
  return text;
}

// Every value in `root` (itself included), found without recursion.
std::vector<json*> all_values(json& root) {
  std::vector<json*> values{&root};
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i]->is_structured()) {
      for (json& child : *values[i]) values.push_back(&child);
    }
  }
  return values;
}

// A JSON value that a careless or hostile author might put anywhere.
json random_value(std::mt19937_64& rng) {
  static const std::vector<json> values = {
      // Scalars: ordinary, at and past the limits, out of int64 range, not integers.
      nullptr, true, false, 0, 1, 2, 3, -1, -9223372036854775807LL - 1, 9223372036854775807LL,
      18446744073709551615ULL, 4294967296LL, 1048576, 1048577, 65537, 2.7, 2.0, -0.5, 1e300,
      // Strings: names and elements of the examples, malformed ones, Unicode, a control character.
      "", "x", "R", "K[0,0,*]", "R[*,*]", "cell[*,*]", "cell[0,*]", "E[0,0]", "R[1x,0]", "größe",
      "a\nb", "[", "discrete", "continuous", std::string(1000, 'x'),
      // Containers: empty, of the wrong kind, holding self-edges, wildcards and huge shapes.
      json::array(), json::object(), json::array({1, 2}), json::array({"R[0,0]"}),
      json::array({"R[0,0]", "R[0,0]"}), json::array({"K[*,*,*]", "E[*,*]"}),
      json::object({{"name", "x"}}),
      json::object({{"name", "y"}, {"shape", {4294967296LL, 4294967296LL}}})};
  return pick(rng, values);
}

// Structural damage: a value replaced, a key added (valid, misspelt or foreign), a key removed,
// an element appended or removed.
void mutate_structure(json& spec, std::mt19937_64& rng) {
  static const std::vector<std::string> keys = {"arrays", "edges", "factors", "embedding_groups",
                                                "name",   "shape", "type",    "options",
                                                "edgs",   "Shape", "comment", ""};
  const std::vector<json*> values = all_values(spec);
  json& target = *pick(rng, values);
  switch (below(rng, 4)) {
    case 0:
      target = random_value(rng);
      break;
    case 1:
      if (target.is_object()) target[pick(rng, keys)] = random_value(rng);
      break;
    case 2:
      if (target.is_object() && !target.empty()) {
        auto key = target.begin();
        std::advance(key, below(rng, target.size()));
        target.erase(key);
      }
      break;
    default:
      if (target.is_array()) {
        if (!target.empty() && below(rng, 2) == 0) {
          target.erase(below(rng, target.size()));
        } else {
          target.push_back(random_value(rng));
        }
      }
      break;
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A parsed model must be usable: it compiles, its nodes round-trip, and a random index
// permutation is either checked or rejected cleanly.
void exercise(const graph::GraphicalModel& model, std::mt19937_64& rng, const std::string& input) {
  EXPECT_EQ(model.compile().num_queries(), model.num_nodes()) << shown(input);
  for (int64_t node : {int64_t{0}, model.num_nodes() - 1}) {
    EXPECT_EQ(model.node(model.element(node)), node) << shown(input);
  }
  const graph::Array& array = pick(rng, model.arrays());
  graph::IndexPermutation p;
  p.axes.emplace_back(array.name, static_cast<int64_t>(below(rng, array.shape.size() + 1)));
  if (below(rng, 2) == 0) p.axes.emplace_back(pick(rng, model.arrays()).name, 0);
  const int64_t extent = 1 + static_cast<int64_t>(below(rng, 4));
  for (int64_t i = 0; i < extent; ++i) {
    p.permutation.push_back(static_cast<int64_t>(below(rng, extent + 1)));
  }
  parses_or_rejects_cleanly([&] { model.mask_invariant_under(p); }, input + " with a permutation");
}

const std::vector<std::string> kExamples = {"bcmf-small.json", "sudoku4.json"};

TEST(ParserFuzz, MutatedSpecTextsParseOrFailCleanly) {
  std::mt19937_64 rng(20240601);
  const TemporaryDirectory directory;
  const std::string path = directory.file("spec.json");
  int parsed = 0;
  for (int iteration = 0; iteration < 5000 && !::testing::Test::HasFailure(); ++iteration) {
    const std::string text = mutate_bytes(
        read_file(std::string(STRUCTDIFF_SOURCE_DIR) + "/examples/" + pick(rng, kExamples)), rng);
    std::ofstream(path, std::ios::binary) << text;
    graph::GraphicalModel model;
    if (parses_or_rejects_cleanly([&] { model = graph::GraphicalModel::load(path); }, text)) {
      ++parsed;
      exercise(model, rng, text);
    }
  }
  EXPECT_GT(parsed, 0);  // some damage is harmless (a space, a digit in an index that stays valid)
}

TEST(ParserFuzz, SpecsWithRandomValuesInRandomPlacesParseOrFailCleanly) {
  std::mt19937_64 rng(7);
  std::vector<json> examples;
  for (const std::string& name : kExamples) {
    examples.push_back(
        json::parse(read_file(std::string(STRUCTDIFF_SOURCE_DIR) + "/examples/" + name)));
  }
  int parsed = 0;
  for (int iteration = 0; iteration < 5000 && !::testing::Test::HasFailure(); ++iteration) {
    json spec = pick(rng, examples);
    const int mutations = 1 + static_cast<int>(below(rng, 3));
    for (int m = 0; m < mutations; ++m) mutate_structure(spec, rng);
    const std::string text = spec.dump();
    graph::GraphicalModel model;
    if (parses_or_rejects_cleanly([&] { model = graph::GraphicalModel::from_json(spec); }, text)) {
      ++parsed;
      exercise(model, rng, text);
    }
  }
  EXPECT_GT(parsed, 0);
}

TEST(ParserFuzz, MutatedAxisAndPermutationTextsParseOrFailCleanly) {
  std::mt19937_64 rng(11);
  const std::vector<std::string> axes = {"R:0", "cell:1", "K:2", "a:b:3"};
  const std::vector<std::string> permutations = {"1,0", "2,0,1", "0", "3,1,2,0,4,5,6,7,8"};
  for (int iteration = 0; iteration < 5000 && !::testing::Test::HasFailure(); ++iteration) {
    const std::string axis = mutate_bytes(pick(rng, axes), rng);
    std::pair<std::string, int64_t> parsed_axis;
    if (parses_or_rejects_cleanly([&] { parsed_axis = graph::parse_axis(axis); }, axis)) {
      EXPECT_GE(parsed_axis.second, 0) << shown(axis);
    }
    const std::string permutation = mutate_bytes(pick(rng, permutations), rng);
    std::vector<int64_t> values;
    if (parses_or_rejects_cleanly([&] { values = graph::parse_permutation(permutation); },
                                  permutation)) {
      for (int64_t value : values) EXPECT_GE(value, 0) << shown(permutation);
    }
  }
}

TEST(ParserFuzz, MutatedPuzzlesParseOrFailCleanly) {
  std::mt19937_64 rng(3);
  std::vector<std::string> puzzles;
  for (int n = 2; n <= 5; ++n) {
    const sudoku::Grid grid =
        sudoku::observe_random_cells(sudoku::generate_solution(n, rng), n * n * n, rng);
    puzzles.push_back(sudoku::format(grid));
    puzzles.push_back(sudoku::format(grid, /*pretty=*/true));
  }
  int parsed = 0;
  for (int iteration = 0; iteration < 10000 && !::testing::Test::HasFailure(); ++iteration) {
    const std::string text = mutate_bytes(pick(rng, puzzles), rng);
    sudoku::Grid grid;
    if (parses_or_rejects_cleanly([&] { grid = sudoku::parse(text); }, text)) {
      ++parsed;
      ASSERT_EQ(static_cast<int>(grid.cells.size()), grid.size()) << shown(text);
      EXPECT_EQ(sudoku::parse(sudoku::format(grid)).cells, grid.cells) << shown(text);
    }
  }
  EXPECT_GT(parsed, 0);
}

}  // namespace
}  // namespace structdiff
