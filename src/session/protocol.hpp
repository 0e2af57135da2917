// The host's side of the session driver's protocol (driver.py): frames of a 4-byte big-endian
// length and UTF-8 JSON. Everything read here comes from inside the sandbox, where a cell can
// rewrite the driver: a reply is parsed strictly against the shape driver.py sends and bounded
// by the session's limits, and anything else is an Error (the session is then lost).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "sandboxrun/session.hpp"

namespace sandboxrun::session {

// What one reply may hold: the cell's output_limit per stream, and its display items.
struct ReplyLimits {
  uint64_t output_bytes = 1 << 20;
  uint64_t display_bytes = 8 << 20;  // all display items and the result together
  size_t display_items = 100;
  // The largest frame such a reply can take (JSON escaping included): longer is an Error.
  size_t max_frame() const;
};

// A request frame: run `code` as cell `id`.
std::string encode_run(uint64_t id, std::string_view code);

// Parses a reply body (the JSON, without its length) to cell `expected_id`. Throws Error saying
// what was wrong with it.
CellOutput parse_reply(std::string_view body, uint64_t expected_id, const ReplyLimits& limits);

// Splits a byte stream into frames, refusing one longer than `max_frame`.
class FrameReader {
 public:
  explicit FrameReader(size_t max_frame) : max_(max_frame) {}
  void feed(std::string_view bytes) { buf_.append(bytes); }
  // The next whole frame's body, or nullopt until more bytes come. Throws Error for a frame
  // longer than the maximum (before its bytes arrive).
  std::optional<std::string> next();
  size_t buffered() const { return buf_.size(); }

 private:
  size_t max_;
  std::string buf_;
};

}  // namespace sandboxrun::session
