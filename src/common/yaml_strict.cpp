#include "common/yaml_strict.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "sandboxrun/error.hpp"
#include "sandboxrun/size.hpp"
#include "sandboxrun/suggest.hpp"

namespace sandboxrun {

namespace {

constexpr const char* kTopLevel = "(top level)";

std::string describe(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsMap()) return "a mapping";
  if (node.IsSequence()) return "a list";
  return "nothing";
}

// Every mapping of the document, checked for a key given twice.
void check_duplicates(const StrictYaml& r, const YAML::Node& node) {
  if (node.IsSequence()) {
    for (const auto& child : node) check_duplicates(r, child);
    return;
  }
  if (!node.IsMap()) return;
  std::map<std::string, YAML::Mark> seen;
  for (const auto& kv : node) {
    if (kv.first.IsScalar()) {
      auto [it, fresh] = seen.emplace(kv.first.Scalar(), kv.first.Mark());
      if (!fresh)
        throw Error(r.where(kv.first.Mark()) + ": key '" + kv.first.Scalar() + "' is given twice (first at line " +
                        std::to_string(it->second.line + 1) + "); YAML would use the last one without a word",
                    "keep one of them in " + r.file().string())
            .as(ErrorKind::config);
    }
    check_duplicates(r, kv.second);
  }
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

}  // namespace

YAML::Node StrictYaml::parse(const std::string& text) const {
  YAML::Node doc;
  try {
    doc = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    throw Error(where(e.mark) + ": invalid YAML: " + e.msg, "fix the syntax of " + file_.string()).as(ErrorKind::config);
  }
  check_duplicates(*this, doc);
  return doc;
}

std::string StrictYaml::where(const YAML::Mark& mark) const {
  std::string out = file_.string();
  if (mark.line >= 0) out += ":" + std::to_string(mark.line + 1);
  return out;
}

void StrictYaml::fail(const YAML::Node& node, const std::string& key, const std::string& expected,
                      const std::string& got) const {
  const YAML::Mark mark = node.IsDefined() ? node.Mark() : YAML::Mark::null_mark();
  throw Error(where(mark) + ": key '" + key + "': expected " + expected + ", got " +
                  (got.empty() ? describe(node) : got),
              "fix the value in " + file_.string())
      .as(ErrorKind::config);
}

void StrictYaml::check_keys(const YAML::Node& map, const std::string& key,
                            std::initializer_list<std::string_view> known) const {
  const std::string name = key.empty() ? kTopLevel : key;
  if (!map.IsDefined() || !map.IsMap()) fail(map, name, "a mapping");
  for (const auto& kv : map) {
    const std::string k = scalar(kv.first, name, "a key");
    if (std::find(known.begin(), known.end(), k) != known.end()) continue;
    unknown_key(kv.first, join(key, k), std::span(known.begin(), known.size()));
  }
}

void StrictYaml::unknown_key(const YAML::Node& key_node, const std::string& key,
                             std::span<const std::string_view> known) const {
  std::string list;
  for (auto known_key : known) list += (list.empty() ? "" : ", ") + std::string(known_key);
  const std::string_view near = nearest_name(key_node.IsScalar() ? key_node.Scalar() : key, known);
  fail(key_node, key, "one of the known keys (" + list + ")",
       near.empty() ? "an unknown key" : "an unknown key (did you mean '" + std::string(near) + "'?)");
}

YAML::Node StrictYaml::require(const YAML::Node& map, const std::string& parent, const std::string& name,
                               const std::string& expected) const {
  YAML::Node n = map[name];
  if (!n) fail(map, join(parent, name), expected, "nothing (the key is missing)");
  return n;
}

std::string StrictYaml::scalar(const YAML::Node& n, const std::string& key, const std::string& expected) const {
  if (!n.IsDefined() || !n.IsScalar()) fail(n, key, expected);
  return n.Scalar();
}

bool StrictYaml::boolean(const YAML::Node& n, const std::string& key) const {
  const std::string s = scalar(n, key, "true or false");
  if (s == "true") return true;
  if (s == "false") return false;
  fail(n, key, "true or false");
}

uint64_t StrictYaml::integer(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi) const {
  const std::string expected = "a whole number between " + std::to_string(lo) + " and " + std::to_string(hi);
  const std::string s = scalar(n, key, expected);
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || ptr != s.data() + s.size() || v < lo || v > hi) fail(n, key, expected);
  return v;
}

double StrictYaml::number(const YAML::Node& n, const std::string& key, double lo, double hi) const {
  const std::string expected = "a number between " + format_number(lo) + " and " + format_number(hi);
  const std::string s = scalar(n, key, expected);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v) || v < lo || v > hi) fail(n, key, expected);
  return v;
}

uint64_t StrictYaml::size(const YAML::Node& n, const std::string& key, uint64_t min) const {
  const std::string expected = "a size like 512k, 32m or 1g" + (min > 0 ? ", at least " + format_size(min) : "");
  const auto v = parse_size(scalar(n, key, expected));
  if (!v || *v < min) fail(n, key, expected);
  return *v;
}

std::vector<std::string> StrictYaml::strings(const YAML::Node& n, const std::string& key) const {
  if (!n.IsDefined() || !n.IsSequence()) fail(n, key, "a list of strings");
  std::vector<std::string> out;
  for (size_t i = 0; i < n.size(); ++i) out.push_back(scalar(n[i], key + "[" + std::to_string(i) + "]"));
  return out;
}

std::map<std::string, std::string> StrictYaml::string_map(const YAML::Node& n, const std::string& key) const {
  if (n.IsDefined() && n.IsNull()) return {};
  if (!n.IsDefined() || !n.IsMap()) fail(n, key, "a mapping of names to strings");
  std::map<std::string, std::string> out;
  for (const auto& kv : n) {
    const std::string k = scalar(kv.first, key, "a name");
    out[k] = scalar(kv.second, join(key, k));
  }
  return out;
}

std::filesystem::path StrictYaml::resolve(const std::string& p) const {
  const std::filesystem::path path(p);
  if (path.is_absolute()) return path.lexically_normal();
  return (file_.parent_path() / path).lexically_normal();
}

std::string StrictYaml::join(const std::string& parent, std::string_view child) {
  return parent.empty() ? std::string(child) : parent + "." + std::string(child);
}

}  // namespace sandboxrun
