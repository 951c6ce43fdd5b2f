// "Did you mean ...?" for mistyped names: options, subcommands, spec keys.
#pragma once

#include <string>
#include <vector>

namespace structdiff {

// The name in `names` closest to `word` by edit distance (insertions, deletions, substitutions
// and swaps of neighbours), if it is close enough to be a likely typo (at most a third of the
// longer name's length, and at most 3 edits); "" otherwise.
std::string closest_name(const std::string& word, const std::vector<std::string>& names);

}  // namespace structdiff
