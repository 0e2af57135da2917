// Strict reading of one YAML configuration file (sandbox.yaml, audit.yaml, security.yaml, the
// assessor rules): every key known, every value checked, and every error naming the file, the
// line, the key and what was expected, e.g.
//   /etc/sandboxrun/sandbox.yaml:7: key 'mem_limit': expected a size like 512k, 32m or 1g, at least
//   16MiB, got '1x'
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sandboxrun {

class StrictYaml {
 public:
  explicit StrictYaml(std::filesystem::path file) : file_(std::move(file)) {}

  const std::filesystem::path& file() const noexcept { return file_; }

  // Parses `text`, the contents of file(); a syntax error throws Error naming the file and line,
  // and so does a key given twice in one mapping (naming both lines: YAML would let the last one
  // win without a word).
  YAML::Node parse(const std::string& text) const;
  // "FILE:LINE" (1-based), or "FILE" when the mark has no line.
  std::string where(const YAML::Mark& mark) const;

  // Throws Error "FILE:LINE: key 'KEY': expected EXPECTED, got GOT" (hint: fix the value in FILE).
  // An empty `got` describes `node` ('value', a mapping, a list, nothing); pass one for errors
  // about the meaning rather than the form of the value ("a duplicate id"). `node` gives the line
  // and may be undefined (a missing key): then pass the mapping that lacks it.
  [[noreturn]] void fail(const YAML::Node& node, const std::string& key, const std::string& expected,
                         const std::string& got = {}) const;

  // `map` must be a mapping whose keys are all in `known`; `key` names it ("" for the top level).
  void check_keys(const YAML::Node& map, const std::string& key,
                  std::initializer_list<std::string_view> known) const;
  // Throws Error for the unknown key `key_node` (its full name `key`): the known keys, and the
  // nearest of them when the key looks like a typo of it.
  [[noreturn]] void unknown_key(const YAML::Node& key_node, const std::string& key,
                                std::span<const std::string_view> known) const;

  // map[name], which must be there: else fails on PARENT.NAME ("got nothing (the key is missing)")
  // at the line of `map`.
  YAML::Node require(const YAML::Node& map, const std::string& parent, const std::string& name,
                     const std::string& expected) const;

  std::string scalar(const YAML::Node& n, const std::string& key, const std::string& expected = "a string") const;
  bool boolean(const YAML::Node& n, const std::string& key) const;  // true or false, nothing else
  // Decimal digits only, lo <= value <= hi.
  uint64_t integer(const YAML::Node& n, const std::string& key, uint64_t lo, uint64_t hi) const;
  // A finite number, lo <= value <= hi.
  double number(const YAML::Node& n, const std::string& key, double lo, double hi) const;
  // A size as parse_size reads it (512k, 32m, 1g), at least `min` bytes.
  uint64_t size(const YAML::Node& n, const std::string& key, uint64_t min = 0) const;
  // A list of strings; entry i is named KEY[i].
  std::vector<std::string> strings(const YAML::Node& n, const std::string& key) const;
  // A mapping of names to strings; nothing (null) is the empty mapping.
  std::map<std::string, std::string> string_map(const YAML::Node& n, const std::string& key) const;

  // `p` made absolute against the directory of file(), lexically normalised.
  std::filesystem::path resolve(const std::string& p) const;
  // The name of `child` under `parent`: "parent.child", or "child" when parent is "".
  static std::string join(const std::string& parent, std::string_view child);

 private:
  std::filesystem::path file_;
};

}  // namespace sandboxrun
