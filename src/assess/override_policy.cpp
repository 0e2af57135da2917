// security.yaml's `override:` section, and the check of one override against it.
#include "sandboxrun/override_policy.hpp"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "assess/assess_override.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.size() <= 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A user or group entry: a numeric id as given, or a name resolved through NSS now, so that a
// typo is an error when the configuration loads rather than a silent never-match.
template <typename Id>
Id resolve_id(const StrictYaml& y, const YAML::Node& n, const std::string& key, bool user) {
  const std::string s = y.scalar(n, key, user ? "a user name or uid" : "a group name or gid");
  if (all_digits(s)) {
    const uint64_t v = std::stoull(s);
    if (v >= 0xffffffffull) y.fail(n, key, "an id below 4294967295", s);
    return static_cast<Id>(v);
  }
  std::vector<char> buf(16384);
  int rc = 0;
  if (user) {
    passwd pw{}, *found = nullptr;
    rc = ::getpwnam_r(s.c_str(), &pw, buf.data(), buf.size(), &found);
    if (rc == 0 && found) return static_cast<Id>(pw.pw_uid);
  } else {
    group gr{}, *found = nullptr;
    rc = ::getgrnam_r(s.c_str(), &gr, buf.data(), buf.size(), &found);
    if (rc == 0 && found) return static_cast<Id>(gr.gr_gid);
  }
  y.fail(n, key, user ? "a user that exists on this host, or a numeric uid" : "a group that exists on this host, or a numeric gid",
         "'" + s + "'" + (rc ? std::string(" (lookup failed: ") + std::strerror(rc) + ")" : std::string(", which does not exist")));
}

template <typename Id>
std::vector<Id> id_list(const StrictYaml& y, const YAML::Node& n, const std::string& key, bool user) {
  if (!n.IsSequence()) y.fail(n, key, user ? "a list of user names or uids ([] for nobody)" : "a list of group names or gids ([] for none)");
  std::vector<Id> ids;
  for (size_t i = 0; i < n.size(); ++i) ids.push_back(resolve_id<Id>(y, n[i], key + "[" + std::to_string(i) + "]", user));
  return ids;
}

std::string user_label(uid_t uid) {
  std::vector<char> buf(16384);
  passwd pw{}, *found = nullptr;
  std::string s = "uid " + std::to_string(uid);
  if (::getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found) s += std::string(" (") + pw.pw_name + ")";
  return s;
}

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

OverridePolicy parse_override_policy(const StrictYaml& y, const YAML::Node& node) {
  OverridePolicy p;
  if (!node.IsMap()) y.fail(node, "override", "a mapping with min_reason_length, allowed_uids, allowed_groups");
  y.check_keys(node, "override", {"min_reason_length", "allowed_uids", "allowed_groups"});
  if (node["min_reason_length"])
    p.min_reason_length = static_cast<uint32_t>(y.integer(node["min_reason_length"], "override.min_reason_length",
                                                          OverridePolicy::kMinDistinctLetters, OverridePolicy::kMaxReasonBytes));
  if (node["allowed_uids"]) p.allowed_uids = id_list<uid_t>(y, node["allowed_uids"], "override.allowed_uids", true);
  if (node["allowed_groups"]) p.allowed_groups = id_list<gid_t>(y, node["allowed_groups"], "override.allowed_groups", false);
  return p;
}

ProcessIdentity ProcessIdentity::of_this_process() {
  ProcessIdentity who;
  who.uid = ::getuid();
  who.gid = ::getgid();
  const int n = ::getgroups(0, nullptr);
  if (n > 0) {
    who.groups.resize(static_cast<size_t>(n));
    const int got = ::getgroups(n, who.groups.data());
    who.groups.resize(got > 0 ? static_cast<size_t>(got) : 0);
  }
  return who;
}

std::optional<std::string> check_override(const OverridePolicy& policy, std::string_view reason,
                                          const ProcessIdentity& who, const std::string& source) {
  // Who first: for a caller who may not override, the reason does not matter.
  if (policy.allowed_uids || policy.allowed_groups) {
    const auto& uids = policy.allowed_uids ? *policy.allowed_uids : std::vector<uid_t>{};
    const auto& gids = policy.allowed_groups ? *policy.allowed_groups : std::vector<gid_t>{};
    bool allowed = std::find(uids.begin(), uids.end(), who.uid) != uids.end() ||
                   std::find(gids.begin(), gids.end(), who.gid) != gids.end();
    for (gid_t g : who.groups) allowed = allowed || std::find(gids.begin(), gids.end(), g) != gids.end();
    if (uids.empty() && gids.empty())
      return "nobody may override here: override.allowed_uids and override.allowed_groups in " + source +
             " list no one; an administrator must list who may";
    if (!allowed)
      return user_label(who.uid) + " may not override: it is not in override.allowed_uids and none of its groups is in "
             "override.allowed_groups (" + source + "); ask someone listed there, or an administrator to list you";
  }
  size_t begin = 0, end = reason.size();
  while (begin < end && is_blank(reason[begin])) ++begin;
  while (end > begin && is_blank(reason[end - 1])) --end;
  const std::string_view text = reason.substr(begin, end - begin);
  const std::string need = "a reason of at least " + std::to_string(policy.min_reason_length) +
                           " characters that says why this code may run (override.min_reason_length in " + source + ")";
  if (text.empty()) return "the reason is empty; give " + need;
  if (reason.size() > OverridePolicy::kMaxReasonBytes)
    return "the reason is " + std::to_string(reason.size()) + " bytes; at most " +
           std::to_string(OverridePolicy::kMaxReasonBytes) + " are accepted (it is recorded in the audit log)";
  if (std::any_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
    return "the reason holds control characters (a newline, tab or escape); give it as one line of text";
  // Characters are UTF-8 code points; each letter or digit (any non-ASCII one counts as a
  // letter) is kept case-folded to count the distinct ones.
  size_t chars = 0;
  std::set<std::string> letters;
  for (size_t i = 0; i < text.size();) {
    size_t len = 1;
    while (i + len < text.size() && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80) ++len;
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) letters.insert(std::string(text.substr(i, len)));
    else if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z')) letters.insert(std::string(1, static_cast<char>(c)));
    else if (c >= 'A' && c <= 'Z') letters.insert(std::string(1, static_cast<char>(c - 'A' + 'a')));
    ++chars;
    i += len;
  }
  const std::string quoted = "'" + std::string(text) + "'";
  if (chars < policy.min_reason_length)
    return "the reason " + quoted + " has " + std::to_string(chars) + " characters; give " + need;
  if (letters.size() < OverridePolicy::kMinDistinctLetters)
    return "the reason " + quoted + " has fewer than " + std::to_string(OverridePolicy::kMinDistinctLetters) +
           " distinct letters or digits; say in words why this code may run";
  return std::nullopt;
}

}  // namespace sandboxrun
