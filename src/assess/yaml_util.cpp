// Strict YAML reading: every key known, every value checked, every error naming the file,
// the key and what was expected.
#include "yaml_util.hpp"

#include <algorithm>

#include "sandboxrun/error.hpp"

namespace sandboxrun::assess::detail {

void Ctx::fail(const std::string& what, const std::string& expected) const {
  throw Error(file.string() + ": " + where + ": " + what, "expected " + expected);
}

Ctx Ctx::operator/(std::string_view key) const { return Ctx{file, where + "." + std::string(key)}; }

void check_keys(const YAML::Node& n, std::initializer_list<std::string_view> allowed, const Ctx& c) {
  if (!n.IsMap()) c.fail("not a mapping", "a mapping");
  for (const auto& kv : n) {
    const auto key = kv.first.as<std::string>();
    if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
      std::string list;
      for (auto a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
      (c / key).fail("unknown key", "one of: " + list);
    }
  }
}

std::string scalar(const YAML::Node& n, const Ctx& c, const char* expected) {
  if (!n.IsScalar()) c.fail("not a scalar", expected);
  return n.as<std::string>();
}

std::vector<std::string> string_list(const YAML::Node& n, const Ctx& c) {
  std::vector<std::string> out;
  if (n.IsScalar()) {
    out.push_back(n.as<std::string>());
  } else if (n.IsSequence()) {
    for (const auto& e : n) out.push_back(scalar(e, c, "a list of strings"));
  } else {
    c.fail("not a string or list", "a string or a list of strings");
  }
  if (out.empty()) c.fail("empty list", "at least one entry");
  for (const auto& s : out)
    if (s.empty()) c.fail("empty entry", "non-empty strings");
  return out;
}

bool boolean(const YAML::Node& n, const Ctx& c) {
  bool v = false;
  if (!n.IsScalar() || !YAML::convert<bool>::decode(n, v)) c.fail("'" + (n.IsScalar() ? n.Scalar() : "") + "'", "true or false");
  return v;
}

int integer(const YAML::Node& n, const Ctx& c, int lo, int hi) {
  int v = 0;
  if (!n.IsScalar() || !YAML::convert<int>::decode(n, v) || v < lo || v > hi)
    c.fail("'" + (n.IsScalar() ? n.Scalar() : "") + "'", "an integer from " + std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

double number(const YAML::Node& n, const Ctx& c, double lo, double hi) {
  double v = 0;
  if (!n.IsScalar() || !YAML::convert<double>::decode(n, v) || !(v >= lo && v <= hi))
    c.fail("'" + (n.IsScalar() ? n.Scalar() : "") + "'", "a number from " + std::to_string(lo) + " to " + std::to_string(hi));
  return v;
}

}  // namespace sandboxrun::assess::detail
