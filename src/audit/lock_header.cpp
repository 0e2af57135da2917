// The lock file's header line: formatting, parsing, fresh generations.
#include "audit/lock_header.hpp"

#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "sandboxrun/error.hpp"

namespace sandboxrun::audit {

LockBytes format_header(const LockHeader& h) {
  char buf[kLockHeaderLen + 1];
  int n = std::snprintf(buf, sizeof buf, "%.*s%016llx dev=%016llx ino=%016llx\n",
                        static_cast<int>(kLockMagic.size()), kLockMagic.data(),
                        static_cast<unsigned long long>(h.gen), static_cast<unsigned long long>(h.dev),
                        static_cast<unsigned long long>(h.ino));
  if (n != static_cast<int>(kLockHeaderLen)) throw Error("audit lock header has the wrong length");
  LockBytes out;
  std::memcpy(out.data(), buf, kLockHeaderLen);
  return out;
}

namespace {

bool parse_hex16(std::string_view s, uint64_t& out) {
  if (s.size() != 16) return false;
  out = 0;
  for (char c : s) {
    int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (v < 0) return false;
    out = out << 4 | static_cast<uint64_t>(v);
  }
  return true;
}

}  // namespace

bool parse_header(std::string_view b, LockHeader& h) {
  size_t m = kLockMagic.size();
  return b.size() == kLockHeaderLen && b.substr(0, m) == kLockMagic && parse_hex16(b.substr(m, 16), h.gen) &&
         b.substr(m + 16, 5) == " dev=" && parse_hex16(b.substr(m + 21, 16), h.dev) &&
         b.substr(m + 37, 5) == " ino=" && parse_hex16(b.substr(m + 42, 16), h.ino) && b.back() == '\n';
}

uint64_t random_generation() {
  uint64_t v = 0;
  if (::getrandom(&v, sizeof v, 0) != static_cast<ssize_t>(sizeof v)) {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    v = static_cast<uint64_t>(ts.tv_nsec) * 0x9E3779B97F4A7C15ull ^ static_cast<uint64_t>(ts.tv_sec) ^
        (static_cast<uint64_t>(::getpid()) << 32);
  }
  return v;
}

}  // namespace sandboxrun::audit
