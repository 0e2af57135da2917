// Fuzzes the Docker-format profile loader: any input must either compile to a program the
// kernel accepts in size, or throw sandboxrun::Error; nothing else may escape.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "sandboxrun/error.hpp"
#include "sandboxrun/seccomp.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  // A fixed kernel release keeps minKernel conditions deterministic across hosts.
  const sandboxrun::SeccompContext ctx{{"CAP_SYS_ADMIN"}, "5.10.0"};
  try {
    const sandboxrun::SeccompProgram prog = sandboxrun::compile_seccomp_profile_text(text, "fuzz.json", ctx);
    if (prog.instructions.empty() || prog.instructions.size() > BPF_MAXINSNS) std::abort();
  } catch (const sandboxrun::Error&) {
  }
  return 0;
}
