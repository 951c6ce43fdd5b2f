// Universal Dependencies treebanks in CoNLL-U (https://universaldependencies.org/format.html):
// the basic dependency tree of each sentence's syntactic words.
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "structdiff/datasets.h"
#include "structdiff/treebank.h"

namespace structdiff::data {

const std::vector<std::string>& universal_pos_tags() {
  static const std::vector<std::string> tags = {"ADJ",  "ADP",   "ADV",  "AUX",  "CCONJ", "DET",
                                                "INTJ", "NOUN",  "NUM",  "PART", "PRON",  "PROPN",
                                                "PUNCT", "SCONJ", "SYM", "VERB", "X"};
  return tags;
}

namespace {

int64_t whole_number(const std::string& text, const std::string& where, const std::string& what) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw std::runtime_error(where + ": " + what + " '" + text + "' is not a whole number");
  }
  return std::stoll(text);
}

// Checks and stores one sentence's words; `where` names its first line.
void finish_sentence(std::vector<ConlluSentence>& sentences, ConlluSentence& sentence,
                     const std::string& where) {
  if (sentence.forms.empty()) return;
  const int64_t n = static_cast<int64_t>(sentence.forms.size());
  for (int64_t i = 0; i < n; ++i) {
    if (sentence.heads[i] > n) {
      throw std::runtime_error(where + ": word " + std::to_string(i + 1) + "'s head " +
                               std::to_string(sentence.heads[i]) + " is past the sentence's " +
                               std::to_string(n) + " words");
    }
  }
  if (!is_single_root_tree(sentence.heads)) {
    throw std::runtime_error(where + ": the heads are not one tree under the root (one word with "
                             "head 0, no cycle)");
  }
  sentences.push_back(std::move(sentence));
  sentence = ConlluSentence{};
}

}  // namespace

std::vector<ConlluSentence> parse_conllu(const std::string& text, const std::string& source) {
  std::map<std::string, int64_t> tag_index;
  for (const std::string& tag : universal_pos_tags()) tag_index.emplace(tag, tag_index.size());
  std::vector<ConlluSentence> sentences;
  ConlluSentence sentence;
  std::istringstream in(text);
  int64_t line_number = 0, first_line = 0;
  const auto here = [&] { return source + " line " + std::to_string(line_number); };
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      finish_sentence(sentences, sentence, source + " line " + std::to_string(first_line));
      continue;
    }
    if (line[0] == '#') continue;
    std::vector<std::string> fields;
    std::istringstream columns(line);
    for (std::string field; std::getline(columns, field, '\t');) fields.push_back(field);
    if (fields.size() != 10) {
      throw std::runtime_error(here() + ": " + std::to_string(fields.size()) +
                               " tab-separated fields, CoNLL-U has 10");
    }
    const std::string& id = fields[0];
    // A multi-word token's range (3-4) spells out words listed after it; an empty node (5.1)
    // belongs to the enhanced graph only. Neither is a word of the basic tree.
    if (id.find('-') != std::string::npos || id.find('.') != std::string::npos) continue;
    if (sentence.forms.empty()) first_line = line_number;
    const int64_t expected = static_cast<int64_t>(sentence.forms.size()) + 1;
    if (whole_number(id, here(), "ID") != expected) {
      throw std::runtime_error(here() + ": word ID " + id + " where " + std::to_string(expected) +
                               " comes next");
    }
    const auto tag = tag_index.find(fields[3]);
    if (tag == tag_index.end()) {
      throw std::runtime_error(here() + ": '" + fields[3] + "' is not a universal POS tag");
    }
    sentence.forms.push_back(fields[1]);
    sentence.upos.push_back(tag->second);
    sentence.heads.push_back(whole_number(fields[6], here(), "HEAD"));
  }
  finish_sentence(sentences, sentence, source + " line " + std::to_string(first_line));
  return sentences;
}

Treebank read_ud_treebank(const std::string& directory) {
  Treebank bank;
  bank.vocabulary = {"<pad>", "<root>", "<unk>"};
  std::map<std::string, int64_t> ids;
  const auto split = [&](const std::string& name, bool grows) {
    std::string path = directory + "/" + name + ".conllu";
    if (!std::filesystem::exists(path)) path += ".gz";
    if (!std::filesystem::exists(path)) {
      throw std::runtime_error(directory + ": no " + name + ".conllu or " + name + ".conllu.gz");
    }
    std::vector<Sentence> sentences;
    for (const ConlluSentence& parsed : parse_conllu(read_possibly_compressed_text(path), path)) {
      Sentence sentence;
      sentence.heads = parsed.heads;
      sentence.categories = parsed.upos;
      sentence.forms = parsed.forms;
      for (const std::string& form : parsed.forms) {
        auto found = ids.find(form);
        if (found == ids.end() && grows) {
          found = ids.emplace(form, static_cast<int64_t>(bank.vocabulary.size())).first;
          bank.vocabulary.push_back(form);
        }
        sentence.words.push_back(found == ids.end() ? kTreebankUnknown : found->second);
      }
      sentences.push_back(std::move(sentence));
    }
    if (sentences.empty()) throw std::runtime_error(path + ": no sentences");
    return sentences;
  };
  bank.train = split("train", /*grows=*/true);
  bank.dev = split("dev", false);
  bank.test = split("test", false);
  return bank;
}

const std::vector<std::string>& committed_ud_treebanks() {
  static const std::vector<std::string> names = {"af_afribooms", "en_partut", "hu_szeged",
                                                 "te_mtg"};
  return names;
}

}  // namespace structdiff::data
