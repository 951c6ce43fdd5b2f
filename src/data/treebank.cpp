// The synthetic dependency treebank of the UNN parsing experiment (spec 4.7): a lexicon with
// ambiguous noun / verb forms, a small recursive grammar whose PP attachments follow a random
// preference table with noise, a moved subject modifier as the one source of non-projectivity,
// and the control grammar whose heads ignore the words.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "structdiff/treebank.h"

namespace structdiff::data {
namespace {

constexpr int64_t kNone = -1;      // no token (a missing PP candidate)
constexpr int64_t kRootHead = -2;  // a token attached to the root
constexpr int64_t kPending = -3;   // a head that the following tokens will fill in

// Hand-made uniform draws from mt19937_64, whose output the standard fixes bit for bit, so that
// a seed means the same bank under any standard library (std distributions are not portable).
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  bool bernoulli(double p) { return uniform() < p; }
  // Uniform in 0..n-1 (n >= 1) by rejection, without modulo bias.
  int64_t below(int64_t n) {
    const uint64_t range = static_cast<uint64_t>(n);
    const uint64_t limit = UINT64_MAX - UINT64_MAX % range;
    uint64_t x = engine_();
    while (x >= limit) x = engine_();
    return static_cast<int64_t>(x % range);
  }

 private:
  std::mt19937_64 engine_;
};

// Independent streams from one seed: SplitMix64 of the seed and a stream number.
uint64_t stream_seed(uint64_t seed, uint64_t stream) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (stream + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
constexpr uint64_t kTableStream = 0, kSentenceStream = 1, kControlStream = 2;

const char* const kCategoryNames[kTreebankCategories] = {
    "VI", "VT", "VD", "N", "PRON", "D", "A", "P", "ADV", "CONJ", "REL", "PUNCT"};

// The fixed lexicon (independent of the seed, so that every bank shares one vocabulary). The
// first ambiguous verb types of each valency (3, 3, 2) are spelt "nv0".."nv7", and the last 8 noun
// types reuse exactly those ids.
void build_lexicon(Treebank& bank) {
  bank.vocabulary = {"<pad>", "<root>"};
  bank.lexicon.assign(kTreebankCategories, {});
  auto add_form = [&](const std::string& form) {
    bank.vocabulary.push_back(form);
    return static_cast<int64_t>(bank.vocabulary.size()) - 1;
  };
  std::vector<int64_t> shared;
  const struct {
    int64_t category, types, ambiguous;
    const char* prefix;
  } verbs[] = {{kIntransitiveVerb, kIntransitiveVerbTypes, 3, "vi"},
               {kTransitiveVerb, kTransitiveVerbTypes, 3, "vt"},
               {kDitransitiveVerb, kDitransitiveVerbTypes, 2, "vd"}};
  for (const auto& v : verbs) {
    for (int64_t t = 0; t < v.types; ++t) {
      const bool ambiguous = t < v.ambiguous;
      const std::string form =
          ambiguous ? "nv" + std::to_string(shared.size()) : v.prefix + std::to_string(t);
      const int64_t id = add_form(form);
      if (ambiguous) shared.push_back(id);
      bank.lexicon[v.category].push_back(id);
    }
  }
  for (int64_t t = 0; t < kNounTypes - kAmbiguousNouns; ++t) {
    bank.lexicon[kNoun].push_back(add_form("n" + std::to_string(t)));
  }
  for (int64_t id : shared) bank.lexicon[kNoun].push_back(id);
  const struct {
    int64_t category, types;
    const char* prefix;
  } others[] = {{kPronoun, kPronounTypes, "pron"},
                {kDeterminer, kDeterminerTypes, "d"},
                {kAdjective, kAdjectiveTypes, "a"},
                {kPreposition, kPrepositionTypes, "p"},
                {kAdverb, kAdverbTypes, "adv"}};
  for (const auto& o : others) {
    for (int64_t t = 0; t < o.types; ++t) {
      bank.lexicon[o.category].push_back(add_form(o.prefix + std::to_string(t)));
    }
  }
  bank.lexicon[kConjunction].push_back(add_form("and"));
  bank.lexicon[kRelativiser].push_back(add_form("that"));
  bank.lexicon[kPunctuation].push_back(add_form("."));
}

struct Token {
  int64_t word, category, head;  // head: a token index, kRootHead or kPending
};

// Draws one sentence of the main grammar as tokens with 0-based token heads.
//
// Projectivity by construction: a token appended at the end may attach to a token h without a
// crossing arc exactly when h is the previous token or one of its ancestors (the right frontier).
// Every attachment below is to such a token, and a PP may go up to the clause verb only when no
// later token will attach to a frontier node that this would bury (a relative clause or conjunct
// still due on the noun); `verb` is kNone wherever that could happen.
class SentenceDrawer {
 public:
  SentenceDrawer(const TreebankOptions& options, const Treebank& bank, Random& random)
      : o_(options), bank_(bank), random_(random) {}

  // The counts of the last draw alone (rejected draws must not count).
  const TreebankCounts& counts() const { return counts_; }

  std::vector<Token> draw(bool move) {
    tokens_.clear();
    counts_ = {};
    const int64_t adverb = random_.bernoulli(o_.adverb) ? add(kAdverb, kPending) : kNone;
    // A moved sentence needs a subject noun with a PP or relative clause to move.
    const int64_t subject = noun_phrase(kPending, 0, kNone, /*allow_pronoun=*/!move, move);
    const int64_t verb_type =
        random_.below(kIntransitiveVerbTypes + kTransitiveVerbTypes + kDitransitiveVerbTypes);
    int64_t category = kIntransitiveVerb, type = verb_type;
    if (type >= kIntransitiveVerbTypes) {
      type -= kIntransitiveVerbTypes;
      category = kTransitiveVerb;
      if (type >= kTransitiveVerbTypes) {
        type -= kTransitiveVerbTypes;
        category = kDitransitiveVerb;
      }
    }
    const int64_t verb = add_word(bank_.lexicon[category][type], category, kRootHead);
    if (adverb != kNone) tokens_[adverb].head = verb;
    tokens_[subject].head = verb;
    for (int64_t k = 0; k < category - kIntransitiveVerb; ++k) noun_phrase(verb, 0, verb);
    for (int64_t k = 0; k < kMaxSentencePps && random_.bernoulli(o_.sentence_pp); ++k) {
      prepositional_phrase(1, verb, frontier_noun(verb));
    }
    int64_t root = verb;
    if (move) root = move_subject_modifier(subject, verb);
    add(kPunctuation, root);
    return tokens_;
  }

 private:
  int64_t add_word(int64_t word, int64_t category, int64_t head) {
    tokens_.push_back({word, category, head});
    return static_cast<int64_t>(tokens_.size()) - 1;
  }
  int64_t add(int64_t category, int64_t head) {
    const std::vector<int64_t>& forms = bank_.lexicon[category];
    return add_word(forms[random_.below(static_cast<int64_t>(forms.size()))], category, head);
  }

  // An NP attached to `head`; returns its head token (N or PRON). `verb` is the clause verb a PP
  // in it may attach to (kNone: none may).
  int64_t noun_phrase(int64_t head, int64_t depth, int64_t verb, bool allow_pronoun = true,
                      bool force_modifier = false, bool allow_coordination = true) {
    if (allow_pronoun && random_.bernoulli(o_.pronoun)) return add(kPronoun, head);
    const int64_t first = static_cast<int64_t>(tokens_.size());
    if (random_.bernoulli(o_.determiner)) add(kDeterminer, kPending);
    if (random_.bernoulli(o_.adjective)) {
      add(kAdjective, kPending);
      if (random_.bernoulli(o_.adjective)) add(kAdjective, kPending);
    }
    const int64_t noun = add(kNoun, head);
    for (int64_t i = first; i < noun; ++i) tokens_[i].head = noun;
    if (depth >= o_.max_depth) return noun;
    // Decided up front: a PP may go up to the verb only if nothing attaches to the noun after it.
    bool pp = random_.bernoulli(o_.noun_pp);
    bool relative = random_.bernoulli(o_.relative_clause);
    const bool coordinated = allow_coordination && random_.bernoulli(o_.coordination);
    if (force_modifier && !pp && !relative) (random_.bernoulli(0.5) ? pp : relative) = true;
    if (pp) prepositional_phrase(depth + 1, relative || coordinated ? kNone : verb, noun);
    if (relative) {
      const int64_t that = add(kRelativiser, kPending);
      const int64_t relative_verb = add(kTransitiveVerb, noun);
      tokens_[that].head = relative_verb;
      noun_phrase(relative_verb, depth + 1, relative_verb);
    }
    if (coordinated) {
      add(kConjunction, noun);
      noun_phrase(noun, depth + 1, verb, true, false, /*allow_coordination=*/false);
    }
    return noun;
  }

  // P NP, with P attached to `verb` or `noun` (at least one is a token).
  void prepositional_phrase(int64_t depth, int64_t verb, int64_t noun) {
    const int64_t type = random_.below(kPrepositionTypes);
    int64_t governor = verb == kNone ? noun : verb;
    if (verb != kNone && noun != kNone) {
      ++counts_.pp_choices;
      if (random_.bernoulli(o_.pp_noise)) {
        ++counts_.pp_coin;
        governor = random_.bernoulli(0.5) ? verb : noun;
      } else {
        governor = preference(verb, type) > preference(noun, type) ? verb : noun;
      }
    }
    const int64_t p = add_word(bank_.lexicon[kPreposition][type], kPreposition, governor);
    noun_phrase(p, depth, verb);
  }
  double preference(int64_t token, int64_t preposition) const {
    return bank_.pp_preference[tokens_[token].word * kPrepositionTypes + preposition];
  }

  // The nearest preceding noun on the right frontier below `stop`, or kNone.
  int64_t frontier_noun(int64_t stop) const {
    for (int64_t i = static_cast<int64_t>(tokens_.size()) - 1; i >= 0 && i != stop;
         i = tokens_[i].head) {
      if (tokens_[i].category == kNoun) return i;
    }
    return kNone;
  }

  // Moves the subtree of one PP or relative-clause verb on the subject noun to the end (where
  // "." follows), keeping every head; returns the verb's new index. Its arc to the subject then
  // spans the main verb, which the subject does not dominate: a non-projective arc.
  int64_t move_subject_modifier(int64_t subject, int64_t verb) {
    std::vector<int64_t> modifiers;
    const int64_t n = static_cast<int64_t>(tokens_.size());
    for (int64_t i = subject + 1; i < verb; ++i) {
      const int64_t c = tokens_[i].category;
      if (tokens_[i].head == subject && (c == kPreposition || c == kTransitiveVerb)) {
        modifiers.push_back(i);
      }
    }
    if (modifiers.empty()) return verb;  // max_depth 0: nothing to move
    const int64_t chosen = modifiers[random_.below(static_cast<int64_t>(modifiers.size()))];
    // The subtree is contiguous (it is projective before the move).
    int64_t begin = chosen, end = chosen;
    for (int64_t i = 0; i < n; ++i) {
      int64_t a = i;
      while (a >= 0 && a != chosen) a = tokens_[a].head;
      if (a == chosen) {
        begin = std::min(begin, i);
        end = std::max(end, i);
      }
    }
    std::vector<int64_t> order;
    for (int64_t i = 0; i < n; ++i) {
      if (i < begin || i > end) order.push_back(i);
    }
    for (int64_t i = begin; i <= end; ++i) order.push_back(i);
    std::vector<int64_t> position(n);
    for (int64_t k = 0; k < n; ++k) position[order[k]] = k;
    std::vector<Token> moved;
    for (int64_t i : order) {
      Token t = tokens_[i];
      if (t.head >= 0) t.head = position[t.head];
      moved.push_back(t);
    }
    tokens_ = std::move(moved);
    ++counts_.moved;
    return position[verb];
  }

  const TreebankOptions& o_;
  const Treebank& bank_;
  Random& random_;
  TreebankCounts counts_;
  std::vector<Token> tokens_;
};

// The control tree over words [l, r] (1-based) hanging from `governor`; see the header.
void control_span(Random& random, int64_t l, int64_t r, int64_t governor,
                  std::vector<int64_t>& heads) {
  const int64_t h = l + random.below(r - l + 1);
  heads[h - 1] = governor;
  for (const auto& [from, to] : {std::pair{l, h - 1}, std::pair{h + 1, r}}) {
    int64_t start = from;
    for (int64_t i = from; i <= to; ++i) {
      if (i == to || random.bernoulli(0.5)) {
        control_span(random, start, i, h, heads);
        start = i + 1;
      }
    }
  }
}

void check_probability(double p, const char* name) {
  if (!(p >= 0.0 && p <= 1.0)) {
    throw std::invalid_argument(std::string("generate_treebank: ") + name +
                                " must be in [0, 1], got " + std::to_string(p));
  }
}

void check_options(const TreebankOptions& o) {
  const std::pair<int64_t, const char*> sizes[] = {{o.train_sentences, "train_sentences"},
                                                   {o.dev_sentences, "dev_sentences"},
                                                   {o.test_sentences, "test_sentences"},
                                                   {o.min_words, "min_words"}};
  for (const auto& [value, name] : sizes) {
    if (value < 1) {
      throw std::invalid_argument(std::string("generate_treebank: ") + name +
                                  " must be >= 1, got " + std::to_string(value));
    }
  }
  if (o.min_words > o.max_words) {
    throw std::invalid_argument("generate_treebank: min_words (" + std::to_string(o.min_words) +
                                ") must not exceed max_words (" + std::to_string(o.max_words) +
                                ")");
  }
  if (o.max_depth < 0 || o.max_depth > 8) {
    throw std::invalid_argument("generate_treebank: max_depth must be in 0..8, got " +
                                std::to_string(o.max_depth));
  }
  check_probability(o.pp_noise, "pp_noise");
  check_probability(o.nonprojective, "nonprojective");
  check_probability(o.adverb, "adverb");
  check_probability(o.pronoun, "pronoun");
  check_probability(o.determiner, "determiner");
  check_probability(o.adjective, "adjective");
  check_probability(o.noun_pp, "noun_pp");
  check_probability(o.relative_clause, "relative_clause");
  check_probability(o.coordination, "coordination");
  check_probability(o.sentence_pp, "sentence_pp");
}

Sentence to_sentence(const std::vector<Token>& tokens) {
  Sentence s;
  for (const Token& t : tokens) {
    s.words.push_back(t.word);
    s.categories.push_back(t.category);
    s.heads.push_back(t.head == kRootHead ? 0 : t.head + 1);
  }
  return s;
}

}  // namespace

const char* treebank_category_name(int64_t category) {
  if (category < 0 || category >= kTreebankCategories) {
    throw std::invalid_argument("treebank_category_name: no category " + std::to_string(category));
  }
  return kCategoryNames[category];
}

Treebank generate_treebank(const TreebankOptions& options) {
  check_options(options);
  Treebank bank;
  build_lexicon(bank);
  Random table(stream_seed(options.seed, kTableStream));
  bank.pp_preference.resize(bank.vocabulary.size() * kPrepositionTypes);
  for (double& p : bank.pp_preference) p = table.uniform();

  Random random(stream_seed(options.seed, kSentenceStream));
  Random control(stream_seed(options.seed, kControlStream));
  SentenceDrawer drawer(options, bank, random);
  auto split = [&](int64_t size, std::vector<Sentence>& out) {
    out.reserve(static_cast<size_t>(size));
    for (int64_t s = 0; s < size; ++s) {
      // Decided once per sentence, so rejections do not bias the non-projective share.
      const bool move = random.bernoulli(options.nonprojective);
      std::vector<Token> tokens = drawer.draw(move);
      int64_t attempts = 1;
      auto outside = [&] {
        const auto n = static_cast<int64_t>(tokens.size());
        return n < options.min_words || n > options.max_words;
      };
      while (outside()) {
        ++bank.counts.rejected;
        if (attempts++ == kMaxAttemptsPerSentence) {
          throw std::invalid_argument("generate_treebank: no sentence of min_words..max_words = " +
                                      std::to_string(options.min_words) + ".." +
                                      std::to_string(options.max_words) + " words in " +
                                      std::to_string(kMaxAttemptsPerSentence) + " draws");
        }
        tokens = drawer.draw(move);
      }
      const TreebankCounts& counts = drawer.counts();
      bank.counts.pp_choices += counts.pp_choices;
      bank.counts.pp_coin += counts.pp_coin;
      bank.counts.moved += counts.moved;
      Sentence sentence = to_sentence(tokens);
      if (options.control) {
        control_span(control, 1, sentence.size(), 0, sentence.heads);
      }
      out.push_back(std::move(sentence));
    }
  };
  split(options.train_sentences, bank.train);
  split(options.dev_sentences, bank.dev);
  split(options.test_sentences, bank.test);
  return bank;
}

TreebankBatch make_batch(const std::vector<Sentence>& sentences,
                         const std::vector<int64_t>& indices) {
  if (indices.empty()) throw std::invalid_argument("make_batch: indices is empty");
  int64_t width = 0;
  for (int64_t i : indices) {
    if (i < 0 || i >= static_cast<int64_t>(sentences.size())) {
      throw std::invalid_argument("make_batch: index " + std::to_string(i) + " is outside 0.." +
                                  std::to_string(static_cast<int64_t>(sentences.size()) - 1));
    }
    width = std::max(width, sentences[i].size());
  }
  const auto b = static_cast<int64_t>(indices.size());
  const auto long_options = torch::TensorOptions().dtype(torch::kLong);
  TreebankBatch batch{torch::full({b, width}, kTreebankPad, long_options),
                      torch::zeros({b, width}, long_options), torch::empty({b}, long_options),
                      torch::full({b, width}, -1, long_options), torch::Tensor()};
  auto words = batch.words.accessor<int64_t, 2>();
  auto heads = batch.heads.accessor<int64_t, 2>();
  auto categories = batch.categories.accessor<int64_t, 2>();
  auto lengths = batch.lengths.accessor<int64_t, 1>();
  bool all_forms = true;
  for (int64_t r = 0; r < b; ++r) {
    const Sentence& s = sentences[indices[r]];
    all_forms = all_forms && static_cast<int64_t>(s.forms.size()) == s.size();
    lengths[r] = s.size();
    for (int64_t i = 0; i < s.size(); ++i) {
      words[r][i] = s.words[i];
      heads[r][i] = s.heads[i];
      categories[r][i] = s.categories[i];
    }
  }
  if (all_forms) {
    batch.characters = torch::zeros({b, width, kWordBytes}, long_options);
    auto characters = batch.characters.accessor<int64_t, 3>();
    for (int64_t r = 0; r < b; ++r) {
      const Sentence& s = sentences[indices[r]];
      for (int64_t i = 0; i < s.size(); ++i) {
        const std::string& form = s.forms[i];
        for (size_t c = 0; c < form.size() && c < static_cast<size_t>(kWordBytes); ++c) {
          characters[r][i][static_cast<int64_t>(c)] = static_cast<unsigned char>(form[c]) + 1;
        }
      }
    }
  }
  return batch;
}

std::string to_conllu(const Treebank& bank, const std::vector<Sentence>& sentences) {
  std::ostringstream out;
  const auto vocabulary = static_cast<int64_t>(bank.vocabulary.size());
  auto form = [&](int64_t word) -> const std::string& {
    if (word < 0 || word >= vocabulary) {
      throw std::invalid_argument("to_conllu: word id " + std::to_string(word) +
                                  " is outside the vocabulary");
    }
    return bank.vocabulary[word];
  };
  for (size_t s = 0; s < sentences.size(); ++s) {
    const Sentence& sentence = sentences[s];
    out << "# sent_id = " << s + 1 << "\n# text =";
    for (int64_t w : sentence.words) out << ' ' << form(w);
    out << '\n';
    for (int64_t i = 0; i < sentence.size(); ++i) {
      out << i + 1 << '\t' << form(sentence.words[i]) << "\t_\t"
          << treebank_category_name(sentence.categories[i]) << "\t_\t_\t" << sentence.heads[i]
          << "\t_\t_\t_\n";
    }
    out << '\n';
  }
  return out.str();
}

bool is_single_root_tree(const std::vector<int64_t>& heads) {
  const auto n = static_cast<int64_t>(heads.size());
  if (n == 0) return false;
  int64_t roots = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (heads[i] < 0 || heads[i] > n || heads[i] == i + 1) return false;
    if (heads[i] == 0) ++roots;
  }
  if (roots != 1) return false;
  // Following heads from any word reaches the root within n steps unless there is a cycle.
  for (int64_t i = 1; i <= n; ++i) {
    int64_t a = i;
    for (int64_t steps = 0; a != 0; ++steps) {
      if (steps > n) return false;
      a = heads[a - 1];
    }
  }
  return true;
}

bool is_projective(const std::vector<int64_t>& heads) {
  const auto n = static_cast<int64_t>(heads.size());
  for (int64_t i = 0; i < n; ++i) {
    if (heads[i] < 0 || heads[i] > n) {
      throw std::invalid_argument("is_projective: head " + std::to_string(heads[i]) + " of word " +
                                  std::to_string(i + 1) + " is outside 0.." + std::to_string(n));
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t a = std::min(i + 1, heads[i]), b = std::max(i + 1, heads[i]);
    for (int64_t j = 0; j < n; ++j) {
      const int64_t c = std::min(j + 1, heads[j]), d = std::max(j + 1, heads[j]);
      if (a < c && c < b && b < d) return false;  // strictly interleaved endpoints
    }
  }
  return true;
}

TreebankStatistics treebank_statistics(const Treebank& bank,
                                       const std::vector<Sentence>& sentences) {
  TreebankStatistics s;
  std::vector<int64_t> categories_of_form(bank.vocabulary.size(), 0);
  for (const auto& forms : bank.lexicon) {
    for (int64_t id : forms) ++categories_of_form[id];
  }
  auto ambiguous = [&](int64_t word) {
    return word >= 0 && word < static_cast<int64_t>(categories_of_form.size()) &&
           categories_of_form[word] > 1;
  };
  int64_t nonprojective = 0, root_children = 0, arcs = 0, arc_length = 0;
  int64_t pp_verb = 0, pp_noun = 0, ambiguous_words = 0, nouns = 0, ambiguous_nouns = 0, verbs = 0,
          ambiguous_verbs = 0;
  for (const Sentence& sentence : sentences) {
    const int64_t n = sentence.size();
    s.min_length = s.sentences == 0 ? n : std::min(s.min_length, n);
    s.max_length = std::max(s.max_length, n);
    ++s.sentences;
    s.words += n;
    if (!is_projective(sentence.heads)) ++nonprojective;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t head = sentence.heads[i], category = sentence.categories[i];
      if (head == 0) {
        ++root_children;
      } else {
        ++arcs;
        arc_length += std::abs(head - (i + 1));
      }
      if (category == kPreposition) {
        ++s.prepositions;
        const int64_t governor = head == 0 ? -1 : sentence.categories[head - 1];
        if (is_verb_category(governor)) ++pp_verb;
        if (governor == kNoun) ++pp_noun;
      }
      const bool a = ambiguous(sentence.words[i]);
      ambiguous_words += a;
      if (category == kNoun) {
        ++nouns;
        ambiguous_nouns += a;
      }
      if (is_verb_category(category)) {
        ++verbs;
        ambiguous_verbs += a;
      }
    }
  }
  auto share = [](int64_t part, int64_t whole) {
    return whole == 0 ? 0.0 : static_cast<double>(part) / static_cast<double>(whole);
  };
  s.mean_length = share(s.words, s.sentences);
  s.nonprojective = share(nonprojective, s.sentences);
  s.root_children = share(root_children, s.words);
  s.mean_arc_length = share(arc_length, arcs);
  s.pp_to_verb = share(pp_verb, s.prepositions);
  s.pp_to_noun = share(pp_noun, s.prepositions);
  s.ambiguous_words = share(ambiguous_words, s.words);
  s.ambiguous_nouns = share(ambiguous_nouns, nouns);
  s.ambiguous_verbs = share(ambiguous_verbs, verbs);
  return s;
}

}  // namespace structdiff::data
