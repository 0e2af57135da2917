// Fuzzes the host's reader of the session driver's replies: bytes from inside the sandbox, as
// frames, as one cell's reply and as a file request's, under small limits so that the bounds
// are reached too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "sandboxrun/error.hpp"
#include "session/protocol.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace sandboxrun::session;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const ReplyLimits limits{.output_bytes = 64, .display_bytes = 256, .display_items = 4};
  try {
    const sandboxrun::CellOutput out = parse_reply(input, 1, limits);
    if (out.display.size() > limits.display_items || out.stdout_data.size() > limits.output_bytes + 4096)
      __builtin_trap();
  } catch (const sandboxrun::Error&) {
  }
  // Replies to file requests: data bounded by the request's limit, entries too.
  for (const FileOp op : {FileOp::put, FileOp::get, FileOp::ls}) {
    try {
      const FileReply r = parse_file_reply(input, 1, op, 16);
      if (r.data.size() > 16 || r.files.size() > 16 || (op != FileOp::get && !r.data.empty())) __builtin_trap();
    } catch (const sandboxrun::Error&) {
    }
  }
  FrameReader frames(1024);
  try {
    frames.feed(input);
    while (auto body = frames.next())
      if (body->size() > 1024) __builtin_trap();
  } catch (const sandboxrun::Error&) {
  }
  return 0;
}
