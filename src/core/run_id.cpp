#include <sys/random.h>

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "sandboxrun/error.hpp"
#include "sandboxrun/executor.hpp"

namespace sandboxrun {

std::string new_run_id() {
  unsigned char b[16];
  if (::getrandom(b, sizeof b, 0) != sizeof b) throw_errno("getrandom for the run id");
  char out[33];
  for (int i = 0; i < 16; ++i) std::snprintf(out + 2 * i, 3, "%02x", b[i]);
  return out;
}

namespace {

bool id_chars(const std::string& s, size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && c != '.' && c != '_' && c != '-') return false;
  return true;
}

bool printable(const std::string& s) {
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

}  // namespace

void validate_run_identity(const RunRequest& req) {
  if (req.run_id && !id_chars(*req.run_id, 64))
    throw Error("run id '" + *req.run_id + "' is not accepted", "use 1-64 characters of A-Z a-z 0-9 . _ -");
  if (req.caller && (req.caller->empty() || req.caller->size() > 128 || !printable(*req.caller) ||
                     std::any_of(req.caller->begin(), req.caller->end(), [](unsigned char c) { return c > 0x7e; })))
    throw Error("caller '" + *req.caller + "' is not accepted", "use 1-128 printable ASCII characters");
  if (req.env.size() > 64) throw Error(std::to_string(req.env.size()) + " environment variables", "pass at most 64 --env KEY=VALUE");
  for (const auto& [k, v] : req.env) {
    const bool name_ok = !k.empty() && k.size() <= 128 && !std::isdigit(static_cast<unsigned char>(k[0])) &&
                         std::all_of(k.begin(), k.end(), [](unsigned char c) { return std::isalnum(c) || c == '_'; });
    if (!name_ok)
      throw Error("environment variable name '" + k + "' is not accepted",
                  "use 1-128 characters of A-Z a-z 0-9 _, not starting with a digit");
    if (v.size() > 32768 || v.find('\0') != std::string::npos)
      throw Error("environment variable " + k + " has a value that is not accepted", "use at most 32 KiB, no NUL byte");
  }
  if (req.labels.size() > 32)
    throw Error(std::to_string(req.labels.size()) + " labels", "pass at most 32 --label KEY=VALUE");
  for (const auto& [k, v] : req.labels) {
    if (!id_chars(k, 64))
      throw Error("label key '" + k + "' is not accepted", "use 1-64 characters of A-Z a-z 0-9 . _ -");
    if (v.size() > 256 || !printable(v))
      throw Error("label " + k + " has a value that is not accepted", "use at most 256 bytes, no control characters");
  }
}

}  // namespace sandboxrun
