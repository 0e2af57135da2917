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
#include <vector>

#include <nlohmann/json.hpp>

#include "sandboxrun/session.hpp"

namespace sandboxrun::session {

// The MIME types whose data a bundle carries base64-encoded (binary images); text otherwise.
inline bool base64_type(std::string_view type) noexcept { return type == "image/png" || type == "image/jpeg"; }

// What one reply may hold: the cell's output_limit per stream, and its display items.
struct ReplyLimits {
  uint64_t output_bytes = 1 << 20;
  uint64_t display_bytes = 8 << 20;  // all display items and the result together
  size_t display_items = 100;
  // The largest frame such a reply can take (JSON escaping included): longer is an Error.
  size_t max_frame() const;
};

// One frame: the 4-byte big-endian length, then `j` as JSON (invalid UTF-8 replaced). The
// session holder's socket (session_holder.hpp) uses the same frames.
std::string framed(const nlohmann::json& j);

// A request frame: run `code` as cell `id`, with `stdin` as its standard input.
std::string encode_run(uint64_t id, std::string_view code, std::string_view stdin_data = {});

// A file request under /work (driver.py): put `data` at `path`; get `path`, at most `limit`
// bytes; ls under `path` (empty: /work), at most `limit` entries.
enum class FileOp { put, get, ls };
std::string encode_file(FileOp op, uint64_t id, std::string_view path, std::string_view data, uint64_t limit);

// A reply to a file request: ok with the file's bytes (get) or the entries (ls), or the
// sandbox's own message when it could not.
struct FileReply {
  bool ok = false;
  std::string message;
  std::string data;
  std::vector<WorkFile> files;
};
// Parses it as parse_reply() does a cell's: strictly, bounded by the request's `limit`.
FileReply parse_file_reply(std::string_view body, uint64_t expected_id, FileOp op, uint64_t limit);
// The largest frame a reply to such a request can take.
size_t max_file_frame(FileOp op, uint64_t limit);

// Checks a path under /work as a request may name it: relative, no `.`, `..` or empty part, no
// NUL or control characters, at most 1024 bytes (parts 255). Throws Error (usage) saying what is
// wrong. `allow_empty`: "" (all of /work) is accepted.
void check_work_path(std::string_view path, bool allow_empty);

// Parses a reply body (the JSON, without its length) to cell `expected_id`. Throws Error saying
// what was wrong with it.
CellOutput parse_reply(std::string_view body, uint64_t expected_id, const ReplyLimits& limits);

// Splits a byte stream into frames, refusing one longer than `max_frame`.
class FrameReader {
 public:
  explicit FrameReader(size_t max_frame) : max_(max_frame) {}
  void feed(std::string_view bytes) { buf_.append(bytes); }
  void set_max(size_t max_frame) { max_ = max_frame; }  // for the next frame: a reply's own bound
  // The next whole frame's body, or nullopt until more bytes come. Throws Error for a frame
  // longer than the maximum (before its bytes arrive).
  std::optional<std::string> next();
  size_t buffered() const { return buf_.size(); }

 private:
  size_t max_;
  std::string buf_;
};

}  // namespace sandboxrun::session
