// Who may run a refused verdict anyway (`--override "reason"`), and what a reason must look like:
// the `override:` section of security.yaml (docs/assess.md, "Overrides").
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandboxrun/record.hpp"

namespace sandboxrun {

struct OverridePolicy {
  // Characters (UTF-8 code points) a reason needs once leading and trailing blanks are trimmed.
  uint32_t min_reason_length = 12;
  // Who may override. Both unset (the keys absent): anyone who may run sandboxrun with this
  // configuration. Once either is set, only the uids and groups listed (an unset list grants
  // nothing; both empty: nobody). Names are resolved to ids when security.yaml is loaded.
  std::optional<std::vector<uid_t>> allowed_uids;
  std::optional<std::vector<gid_t>> allowed_groups;

  // A reason longer than this is refused: it goes into the audit record as given.
  static constexpr size_t kMaxReasonBytes = 1000;
  // A reason needs this many distinct letters or digits (case-folded): "aaaaaaaaaaaa",
  // "!!!!!!!!!!!!" or "abababababab" say nothing.
  static constexpr size_t kMinDistinctLetters = 4;

  using O = OverridePolicy;
  static constexpr auto fields = std::tuple{record::field("min_reason_length", &O::min_reason_length),
                                            record::field("allowed_uids", &O::allowed_uids),
                                            record::field("allowed_groups", &O::allowed_groups)};
};

// The identity an override is judged by: the real uid and gid and the supplementary groups of
// the calling process (for a root service that runs code for others with --caller, that is the
// service, not the caller it names).
struct ProcessIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  static ProcessIdentity of_this_process();
};

// Why the policy refuses this override, saying what it requires; nullopt when it is allowed.
// `source` (the security.yaml path) is named in the message.
std::optional<std::string> check_override(const OverridePolicy& policy, std::string_view reason,
                                          const ProcessIdentity& who, const std::string& source);

}  // namespace sandboxrun
