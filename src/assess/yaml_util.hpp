// Strict YAML reading helpers shared by the rules and security.yaml loaders.
#pragma once

#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace sandboxrun::assess::detail {

// Where a value sits: the file and a key path such as "rule 'SR-1'.match.args[0]".
struct Ctx {
  const std::filesystem::path& file;
  std::string where;

  [[noreturn]] void fail(const std::string& what, const std::string& expected) const;
  Ctx operator/(std::string_view key) const;  // the context of a sub-key
};

void check_keys(const YAML::Node& n, std::initializer_list<std::string_view> allowed, const Ctx& c);
std::string scalar(const YAML::Node& n, const Ctx& c, const char* expected = "a string");
std::vector<std::string> string_list(const YAML::Node& n, const Ctx& c);
bool boolean(const YAML::Node& n, const Ctx& c);
int integer(const YAML::Node& n, const Ctx& c, int lo, int hi);
double number(const YAML::Node& n, const Ctx& c, double lo, double hi);

}  // namespace sandboxrun::assess::detail
