#include "sandboxrun/error.hpp"

#include <cerrno>
#include <cstring>

namespace sandboxrun {

namespace {
std::string compose(const std::string& what, int err) {
  if (err == 0) return what;
  return what + ": " + std::strerror(err);
}
}  // namespace

Error::Error(std::string what, std::string hint, int err)
    : std::runtime_error(compose(what, err)), errno_(err), hint_(std::move(hint)) {}

const char* to_string(ErrorKind kind) noexcept {
  switch (kind) {
    case ErrorKind::usage: return "usage";
    case ErrorKind::config: return "config";
    case ErrorKind::image: return "image";
    case ErrorKind::limits: return "limits";
    case ErrorKind::audit: return "audit";
    case ErrorKind::deps: return "deps";
    case ErrorKind::host: return "host";
    case ErrorKind::interrupted: return "interrupted";
    case ErrorKind::other: break;
  }
  return "other";
}

std::string Error::describe() const {
  std::string s = what();
  if (!hint_.empty()) s += " (" + hint_ + ")";
  return s;
}

void throw_errno(const std::string& what, const std::string& hint) { throw_errno(errno, what, hint); }

void throw_errno(int err, const std::string& what, const std::string& hint) { throw Error(what, hint, err); }

}  // namespace sandboxrun
