// A deterministic synthetic dependency treebank, the offline stand-in for the Universal
// Dependencies treebanks of the UNN paper's parsing experiment (UNN spec, section 4.7). No UD
// treebank and no multilingual BERT can be had offline, so the parser is trained and tested on
// sentences of a small generated grammar instead; every result on it must say so.
//
// What it can show: whether a parser recovers heads that are a function of the words it reads
// (valency, word order, categories hidden behind partly ambiguous surface forms), lexically decided
// prepositional-phrase attachment with irreducible noise, and a share of non-projective arcs, and
// so whether iterating the structured UNN changes UAS, exact match and modifier-list accuracy on
// a task that is neither trivial nor saturated. What it cannot show: anything about natural
// language, about the paper's ten languages or about BERT; its numbers are not comparable to the
// paper's Table 4. The control grammar (TreebankOptions::control) keeps the words and draws the
// heads independently of them, so it measures what a parser gets from sentence length and
// positions alone: a model that beats it by much on the main grammar reads the words, and one that
// beats it on the control itself is fitting artefacts.
//
// Grammar (hidden categories, each with its own word types; the arcs on the right):
//   S    = [ADV] NP_subj V_main objects PP* "."   root -> V_main; ADV, subject, objects, "."
//                                                 and PPs (unless a noun takes them) -> V_main
//   objects = valency - 1 NPs                     valency: intransitive 1, transitive 2,
//                                                 ditransitive 3
//   NP   = PRON                                   (no dependents)
//        | [D] A{0..2} N [PP] [that V_tr NP] [and NP]
//                                                 D, A -> N; V_tr -> N; that -> V_tr; the inner
//                                                 NP -> V_tr; "and" and the 2nd conjunct -> N
//   PP   = P NP                                   P -> its governor; the NP's head -> P
// A PP's governor is the clause verb or the nearest preceding noun that can take it without a
// crossing arc; when both exist a fixed random table of preferences, indexed by (candidate head
// form, preposition), decides, except with probability pp_noise, where a fair coin does. With
// probability `nonprojective` per sentence the subject's PP or relative clause is moved to just
// before ".", keeping its head: the only source of non-projective arcs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <torch/types.h>

namespace structdiff::data {

constexpr int64_t kTreebankPad = 0;   // vocabulary id 0: padding, never a word
constexpr int64_t kTreebankRoot = 1;  // vocabulary id 1: reserved for a root token, never a word
constexpr int64_t kTreebankUnknown = 2;  // read_ud_treebank: a dev or test form unseen in training

// The hidden categories (Sentence::categories holds these values). Names, as to_conllu writes
// them in the UPOS column: VI VT VD N PRON D A P ADV CONJ REL PUNCT.
enum TreebankCategory : int64_t {
  kIntransitiveVerb = 0,
  kTransitiveVerb,
  kDitransitiveVerb,
  kNoun,
  kPronoun,
  kDeterminer,
  kAdjective,
  kPreposition,
  kAdverb,
  kConjunction,  // "and"
  kRelativiser,  // "that"
  kPunctuation,  // "."
  kTreebankCategories
};
const char* treebank_category_name(int64_t category);  // std::invalid_argument if out of range
inline bool is_verb_category(int64_t c) { return c >= kIntransitiveVerb && c <= kDitransitiveVerb; }

// Word types per category (spec 4.7). The last kAmbiguousNouns noun types share their surface
// form (and id) with verb types: 3 intransitive, 3 transitive and 2 ditransitive ones.
constexpr int64_t kIntransitiveVerbTypes = 10, kTransitiveVerbTypes = 10,
                  kDitransitiveVerbTypes = 5, kNounTypes = 40, kPronounTypes = 5,
                  kDeterminerTypes = 5, kAdjectiveTypes = 15, kPrepositionTypes = 8,
                  kAdverbTypes = 8;
constexpr int64_t kAmbiguousNouns = 8;  // 20% of the noun types

struct TreebankOptions {
  uint64_t seed = 1;  // the preference table, the sentences and the control trees all follow it
  int64_t train_sentences = 12000, dev_sentences = 1000, test_sentences = 2000;  // each >= 1
  double pp_noise = 0.1;       // eps: share of two-way PP decisions left to a fair coin
  double nonprojective = 0.1;  // share of sentences whose subject modifier is moved to the end
  // Heads of a random projective tree drawn independently of the words (see generate_treebank);
  // the words, categories and lengths are those of the main grammar with the same options.
  bool control = false;
  int64_t min_words = 5, max_words = 40;  // sentences outside are rejected and drawn again

  // Grammar probabilities, each in [0, 1] (chosen, not from the spec; tune here).
  double adverb = 0.2;            // sentence-initial ADV
  double pronoun = 0.15;          // an NP slot is a PRON (never the subject of a moved sentence)
  double determiner = 0.65;       // [D]
  double adjective = 0.3;         // each of up to 2 adjectives, the second only after a first
  double noun_pp = 0.25;          // an NP's [PP] slot
  double relative_clause = 0.12;  // an NP's [that V_tr NP]
  double coordination = 0.07;     // an NP's [and NP]
  double sentence_pp = 0.5;       // each of up to kMaxSentencePps PPs after the objects
  // NPs nest (in PPs, relative clauses and second conjuncts) at most this deep; an NP at depth
  // max_depth has no PP, relative clause or conjunct. The main clause's NPs have depth 0. Keeps
  // generation finite; must be in 0..8.
  int64_t max_depth = 3;
};
constexpr int64_t kMaxSentencePps = 3;
constexpr int64_t kMaxAttemptsPerSentence = 100000;  // then min_words..max_words is unreachable

struct Sentence {
  std::vector<int64_t> words;       // vocabulary ids, each >= 2
  std::vector<int64_t> heads;       // heads[i] in 0..n is the head of word i + 1; 0 = root
  std::vector<int64_t> categories;  // TreebankCategory of each word
  // Surface forms, read_ud_treebank only (empty for the synthetic bank): what a character
  // encoder reads, including forms that `words` holds as kTreebankUnknown.
  std::vector<std::string> forms;
  int64_t size() const { return static_cast<int64_t>(words.size()); }
};

// Generation counters over the accepted sentences of all three splits (for reports and tests).
struct TreebankCounts {
  int64_t pp_choices = 0;  // PPs with two candidate governors (clause verb, nearest noun)
  int64_t pp_coin = 0;     // ... of which a coin decided (pp_noise), not the table
  int64_t moved = 0;       // sentences whose subject modifier was moved (non-projective)
  int64_t rejected = 0;    // drawn sentences outside min_words..max_words
};

struct Treebank {
  std::vector<std::string> vocabulary;  // id -> surface form; 0 = "<pad>", 1 = "<root>"
  // lexicon[c] = the form ids of category c's word types, in type order. Ambiguous forms appear
  // under a verb category and under kNoun.
  std::vector<std::vector<int64_t>> lexicon;
  // pp_preference[form * kPrepositionTypes + p]: the affinity of candidate head `form` for
  // preposition type p, uniform in [0, 1); the candidate with the larger affinity wins.
  std::vector<double> pp_preference;
  std::vector<Sentence> train, dev, test;
  TreebankCounts counts;
};

// Generates train, then dev, then test from one std::mt19937_64 stream seeded from options.seed
// (the preference table and the control trees use streams of their own). The uniform integers
// and reals are computed by hand from the engine's 64-bit output, and mt19937_64 is fully
// specified by the C++ standard, so a seed gives the same bank with any standard library.
// Sentences may repeat within or across splits (short ones do).
//
// Control (options.control): every sentence keeps its words and categories, and its heads are
// replaced by a projective tree drawn by this process, independent of the words: for a span of
// words [l, r] and its governor g (the whole sentence and the root at the start), draw the span's
// head h uniformly from l..r and attach it to g; cut the words left of h, l..h-1, into
// contiguous segments by cutting each of the h-1-l gaps between neighbours independently with
// probability 1/2, do the same to h+1..r, and recurse on every segment with governor h. The tree
// has one root child and is projective; it depends only on the sentence length and the control
// stream.
//
// Throws std::invalid_argument naming the option for sizes < 1, min_words < 1, min_words >
// max_words, a probability outside [0, 1] (or NaN), a max_depth outside 0..8, or when no
// sentence within min_words..max_words turns up in kMaxAttemptsPerSentence draws.
Treebank generate_treebank(const TreebankOptions& options);

// Batch tensors for sentences[indices[0]], sentences[indices[1]], ...; padded to the longest.
struct TreebankBatch {
  torch::Tensor words;       // (B, n) int64, kTreebankPad after a sentence's end
  torch::Tensor heads;       // (B, n) int64 in 0..length, 0 at padding
  torch::Tensor lengths;     // (B) int64
  torch::Tensor categories;  // (B, n) int64, -1 at padding
  // (B, n, kWordBytes) int64: each form's first kWordBytes UTF-8 bytes as byte + 1, 0 after its
  // end and at padding; undefined unless every sentence of the batch has forms.
  torch::Tensor characters;
};
constexpr int64_t kWordBytes = 16;
// Throws std::invalid_argument for empty indices or an index outside the sentences.
TreebankBatch make_batch(const std::vector<Sentence>& sentences,
                         const std::vector<int64_t>& indices);

// CoNLL-U text, for inspection: per sentence "# sent_id = <1-based index>" and "# text = ...",
// then one line per word with ID, FORM, UPOS = the category name (not a UD tag), HEAD, and "_" in
// the other six columns, and a blank line. Throws std::invalid_argument for a word outside
// bank.vocabulary or a category outside the enumeration.
std::string to_conllu(const Treebank& bank, const std::vector<Sentence>& sentences);

// heads[i] in 0..n is the head of word i + 1. True when exactly one word has head 0, no word is
// its own head and following heads from any word reaches 0 (no cycle). Out-of-range heads give
// false.
bool is_single_root_tree(const std::vector<int64_t>& heads);
// Projectivity with the root at position 0: no two arcs cross, root arcs included (for a tree,
// the same as "every word between a head and its dependent descends from that head"). Requires
// heads in 0..n (std::invalid_argument otherwise); does not require a tree.
bool is_projective(const std::vector<int64_t>& heads);

struct TreebankStatistics {
  int64_t sentences = 0, words = 0;
  int64_t min_length = 0, max_length = 0;
  double mean_length = 0;
  double nonprojective = 0;    // share of sentences that are not projective
  double root_children = 0;    // share of words whose head is the root (1 per sentence here)
  double mean_arc_length = 0;  // mean |head - dependent| over words not attached to the root
  int64_t prepositions = 0;
  double pp_to_verb = 0, pp_to_noun = 0;  // shares of prepositions by their head's category
  double ambiguous_words = 0;  // share of words whose form belongs to more than one category
  double ambiguous_nouns = 0;  // share of noun words with an ambiguous form
  double ambiguous_verbs = 0;  // share of verb words with an ambiguous form
};
// Shares are 0 when their denominator is 0. Reads the forms' ambiguity from bank.lexicon.
TreebankStatistics treebank_statistics(const Treebank& bank,
                                       const std::vector<Sentence>& sentences);

// ---- Universal Dependencies (CoNLL-U) ---------------------------------------------------------

// The 17 universal POS tags, in the order of their indices in ConlluSentence::upos.
const std::vector<std::string>& universal_pos_tags();

// One sentence's syntactic words: multi-word token lines (ID 3-4) and empty nodes (ID 5.1) are
// skipped, as the basic tree has neither.
struct ConlluSentence {
  std::vector<std::string> forms;
  std::vector<int64_t> heads;  // heads[i] in 0..n is the head of word i + 1; 0 = root
  std::vector<int64_t> upos;   // index into universal_pos_tags()
};
// Throws std::runtime_error naming `source` and the line for a line without 10 tab-separated
// fields, word IDs out of sequence, a HEAD that is not a number or past the sentence, a tag that
// is not a universal POS tag, or heads that are not one tree under the root.
std::vector<ConlluSentence> parse_conllu(const std::string& text, const std::string& source);

// DIR/{train,dev,test}.conllu, each plain or gzip-compressed (.conllu.gz), as a Treebank: the
// vocabulary holds the training split's forms (after <pad>, <root>, <unk>), dev and test forms
// unseen in training read as kTreebankUnknown, categories are universal POS indices, and lexicon
// and pp_preference are empty. Throws std::runtime_error for a missing split, an empty one, or a
// malformed file (parse_conllu).
Treebank read_ud_treebank(const std::string& directory);

// The committed UD 2.x treebanks (data/ud/README.md), by their UD names, and where a name's files
// lie relative to the repository root.
const std::vector<std::string>& committed_ud_treebanks();
inline const char* const kUdDirectory = "data/ud";

}  // namespace structdiff::data
