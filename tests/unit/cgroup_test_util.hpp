// Helpers shared by the cgroup tests that make real cgroups.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <sstream>
#include <string>
#include <vector>

namespace cgtest {

// A cgroup's path() as a list: the v1 backend names one directory per hierarchy.
inline std::vector<std::string> split_paths(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string p; in >> p;) out.push_back(p);
  return out;
}

inline bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The first of the cgroup's directories that has `file`.
inline std::string dir_with(const std::string& paths, const std::string& file) {
  for (const auto& p : split_paths(paths))
    if (exists(p + "/" + file)) return p;
  return {};
}

// A run id no other test of this process uses.
inline std::string unique_id(const char* tag) {
  static std::atomic<int> n{0};
  return std::string(tag) + "-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
}

}  // namespace cgtest
