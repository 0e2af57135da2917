#include <sys/random.h>

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

}  // namespace sandboxrun
