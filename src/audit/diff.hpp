// Line diffs of stored code: the counts a run_start's diff_from records, and the unified diff
// `sandboxrun audit show --diff` prints. Myers' O(ND) algorithm on the part between the common
// prefix and suffix, bounded in time and memory.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace sandboxrun::audit {

struct LineDiffCounts {
  uint64_t added = 0;
  uint64_t removed = 0;
  // The files differ in more places than the bound allows diffing: the changed middle (after
  // the common prefix and suffix) counts as removed and added as a whole, an upper bound.
  bool approximate = false;
};

// Lines are compared with their terminator: a last line without '\n' differs from the same
// text with one.
LineDiffCounts count_line_changes(std::string_view old_text, std::string_view new_text);

// `diff -u` form: "--- old_label", "+++ new_label", then "@@ -l,n +l,n @@" hunks with
// `context` lines around each change, and "\ No newline at end of file" after a last line
// without one. Empty when the texts are equal. Approximate (see above) past the bound.
std::string unified_diff(std::string_view old_text, std::string_view new_text, const std::string& old_label,
                         const std::string& new_label, int context = 3);

}  // namespace sandboxrun::audit
