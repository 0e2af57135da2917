#include "sandboxrun/suggest.hpp"

#include <algorithm>
#include <vector>

namespace sandboxrun {

namespace {

// Levenshtein distance.
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string_view nearest_name(std::string_view word, std::span<const std::string_view> known) {
  std::string_view best;
  size_t best_distance = word.size() / 3 + 1;
  for (auto k : known)
    if (const size_t d = edit_distance(word, k); d < best_distance) {
      best = k;
      best_distance = d;
    }
  return best;
}

}  // namespace sandboxrun
