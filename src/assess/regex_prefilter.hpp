// What a rule's regular expression needs of a text before it can match: a minimum length and
// literals of which every match contains at least one. std::regex is slow to run (a
// depth-first search from every position, a locale lookup per character when icase), and most
// string rules have a regex and no `contains`, so it ran on every string literal of a file:
// half the analysis of a 1,000-line file. The filter is derived from the expression's text,
// so rules stay data; it only ever answers "cannot match" when no match can exist, and says
// nothing (passes everything) for constructs it does not understand.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace sandboxrun::assess {

struct RegexPrefilter {
  size_t min_length = 0;
  bool icase = false;                // needles are lower case; texts are compared folded (ASCII)
  std::vector<std::string> needles;  // every match contains one of these; empty: none known

  // False only when `text` cannot contain a match.
  bool may_match(std::string_view text) const;
};

// For an ECMAScript expression (without the "(?i)" prefix; `icase` says whether it had one).
RegexPrefilter regex_prefilter(std::string_view expression, bool icase);

}  // namespace sandboxrun::assess
