#include "session/protocol.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <initializer_list>

#include "common/base64.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::session {

namespace {

using nlohmann::json;

constexpr size_t kMaxDepth = 4;             // reply -> display -> bundle -> value
constexpr size_t kMaxBundleTypes = 16;
constexpr size_t kMaxErrorText = 65536;     // evalue and each traceback line
constexpr size_t kMaxTracebackLines = 200;
constexpr size_t kMaxName = 256;            // ename
constexpr uint64_t kNoticeBytes = 4096;     // the driver's own notes appended to a stream

[[noreturn]] void bad(const std::string& what) {
  throw Error("the session's driver sent a malformed reply: " + what,
              "the cell may have replaced the driver; the session cannot be trusted to go on")
      .as(ErrorKind::host);
}

const json& member(const json& j, const char* key) {
  const auto it = j.find(key);
  if (it == j.end()) bad(std::string("no '") + key + "'");
  return *it;
}

void exact_keys(const json& j, std::initializer_list<const char*> keys, const char* what) {
  if (!j.is_object()) bad(std::string(what) + " is not an object");
  if (j.size() != keys.size()) bad(std::string(what) + " has " + std::to_string(j.size()) + " keys, not " +
                                   std::to_string(keys.size()));
  for (const char* k : keys) member(j, k);
}

std::string text(const json& j, const char* key, uint64_t max) {
  const json& v = member(j, key);
  if (!v.is_string()) bad(std::string("'") + key + "' is not a string");
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() > max) bad(std::string("'") + key + "' holds " + std::to_string(s.size()) + " bytes, over " +
                          std::to_string(max));
  return s;
}

bool flag(const json& j, const char* key) {
  const json& v = member(j, key);
  if (!v.is_boolean()) bad(std::string("'") + key + "' is not true or false");
  return v.get<bool>();
}

bool mime_type(std::string_view t) {
  const size_t slash = t.find('/');
  if (slash == 0 || slash == std::string_view::npos || t.size() - slash - 1 == 0 || t.size() > 100) return false;
  auto part_ok = [](std::string_view p, std::string_view extra) {
    return std::all_of(p.begin(), p.end(), [&](char c) {
      return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || extra.find(c) != std::string_view::npos;
    });
  };
  return part_ok(t.substr(0, slash), "") && part_ok(t.substr(slash + 1), ".+-");
}

// Depth is bounded while parsing: a deeply nested document must not cost a deep recursion.
json parse_bounded(std::string_view body) {
  json j = json::parse(
      body,
      [](int depth, json::parse_event_t, json&) {
        if (static_cast<size_t>(depth) > kMaxDepth) bad("nesting deeper than " + std::to_string(kMaxDepth));
        return true;
      },
      /*allow_exceptions=*/false);
  if (j.is_discarded()) bad("not JSON (or not UTF-8)");
  return j;
}

bool base64(std::string_view s) {
  if (s.size() % 4 != 0) return false;
  const size_t pad = s.size() >= 2 && s[s.size() - 1] == '=' ? (s[s.size() - 2] == '=' ? 2 : 1) : 0;
  for (size_t i = 0; i < s.size() - pad; ++i) {
    const char c = s[i];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '+' || c == '/'))
      return false;
  }
  return true;
}

MimeBundle bundle(const json& j, const char* what, uint64_t& budget) {
  if (!j.is_object() || j.empty() || j.size() > kMaxBundleTypes)
    bad(std::string(what) + " is not an object of 1 to " + std::to_string(kMaxBundleTypes) + " MIME types");
  MimeBundle out;
  for (const auto& [type, data] : j.items()) {
    if (!mime_type(type)) bad(std::string(what) + " has a key that is no MIME type");
    if (!data.is_string()) bad(std::string(what) + "['" + type + "'] is not a string");
    const auto& s = data.get_ref<const std::string&>();
    if (s.size() > budget) bad(std::string(what) + " is over the cell's display limit");
    if (base64_type(type) && !base64(s))
      bad(std::string(what) + "['" + type + "'] is not base64");
    budget -= s.size();
    out.emplace(type, s);
  }
  if (!out.count("text/plain")) bad(std::string(what) + " has no text/plain");
  return out;
}

}  // namespace

std::string framed(const json& j) {
  const std::string body = j.dump(-1, ' ', false, json::error_handler_t::replace);
  const auto n = static_cast<uint32_t>(body.size());
  std::string frame{static_cast<char>(n >> 24), static_cast<char>(n >> 16), static_cast<char>(n >> 8),
                    static_cast<char>(n)};
  return frame + body;
}

size_t ReplyLimits::max_frame() const {
  // JSON escapes a byte in at most 6 (\u00XX); the traceback and the keys are bounded apart.
  return static_cast<size_t>(6 * (2 * (output_bytes + kNoticeBytes) + display_bytes) +
                             7 * (kMaxName + kMaxErrorText * (kMaxTracebackLines + 1)) + 65536 +
                             512 * display_items);
}

std::string encode_run(uint64_t id, std::string_view code, std::string_view stdin_data) {
  return framed(json{{"op", "run"}, {"id", id}, {"code", code}, {"stdin", base64_encode(stdin_data)}});
}

std::string encode_file(FileOp op, uint64_t id, std::string_view path, std::string_view data, uint64_t limit) {
  json j{{"op", op == FileOp::put ? "put" : op == FileOp::get ? "get" : "ls"}, {"id", id}, {"path", path}};
  if (op == FileOp::put) j["data"] = base64_encode(data);
  else j["limit"] = limit;
  return framed(j);
}

size_t max_file_frame(FileOp op, uint64_t limit) {
  constexpr size_t kFixed = 4096 + 6 * 16384;  // keys, id, status, an escaped message
  if (op == FileOp::get) return kFixed + static_cast<size_t>(limit / 3 * 4 + 4);
  if (op == FileOp::ls) return kFixed + static_cast<size_t>(limit) * (6 * 4096 + 128);
  return kFixed;
}

FileReply parse_file_reply(std::string_view body, uint64_t expected_id, FileOp op, uint64_t limit) {
  if (body.size() > max_file_frame(op, limit)) bad("a reply of " + std::to_string(body.size()) + " bytes");
  const json j = parse_bounded(body);
  if (!j.is_object()) bad("the reply is not an object");
  const json& id = member(j, "id");
  if (!id.is_number_unsigned() || id.get<uint64_t>() != expected_id) bad("the reply is not to request " +
                                                                         std::to_string(expected_id));
  FileReply r;
  const std::string status = text(j, "status", 16);
  if (status == "error") {
    exact_keys(j, {"id", "status", "message"}, "the reply");
    r.message = text(j, "message", 16384);
    return r;
  }
  if (status != "ok") bad("status '" + status + "'");
  r.ok = true;
  if (op == FileOp::put) {
    exact_keys(j, {"id", "status"}, "the reply");
  } else if (op == FileOp::get) {
    exact_keys(j, {"id", "status", "data"}, "the reply");
    auto data = base64_decode(text(j, "data", limit / 3 * 4 + 4));
    if (!data) bad("'data' is not base64");
    if (data->size() > limit) bad("a file of " + std::to_string(data->size()) + " bytes, over " + std::to_string(limit));
    r.data = std::move(*data);
  } else {
    exact_keys(j, {"id", "status", "files"}, "the reply");
    const json& files = member(j, "files");
    if (!files.is_array() || files.size() > limit) bad("'files' is not a list of at most " + std::to_string(limit));
    for (const json& f : files) {
      exact_keys(f, {"path", "size", "type"}, "a file");
      WorkFile w{text(f, "path", 4096), 0, text(f, "type", 8)};
      const json& size = member(f, "size");
      if (!size.is_number_unsigned()) bad("a file's 'size' is not a count of bytes");
      w.size = size.get<uint64_t>();
      if (w.type != "file" && w.type != "dir" && w.type != "link" && w.type != "other") bad("a file's type '" + w.type + "'");
      r.files.push_back(std::move(w));
    }
  }
  return r;
}

void check_work_path(std::string_view path, bool allow_empty) {
  auto refuse = [&](const std::string& why) {
    throw Error("the path '" + std::string(path.substr(0, 200)) + "' " + why,
                "name a file under /work relatively, such as data/in.csv")
        .as(ErrorKind::usage);
  };
  if (path.empty()) {
    if (!allow_empty) refuse("is empty");
    return;
  }
  if (path.size() > 1024) refuse("is longer than 1024 bytes");
  if (path.front() == '/') refuse("is absolute; paths are relative to /work");
  for (const char c : path)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) refuse("holds a control character");
  size_t at = 0;
  for (;;) {
    const size_t slash = path.find('/', at);
    const std::string_view part = path.substr(at, slash == std::string_view::npos ? std::string_view::npos : slash - at);
    if (part.empty() || part == "." || part == "..") refuse("has an empty, '.' or '..' part");
    if (part.size() > 255) refuse("has a part longer than 255 bytes");
    if (slash == std::string_view::npos) break;
    at = slash + 1;
  }
}

CellOutput parse_reply(std::string_view body, uint64_t expected_id, const ReplyLimits& limits) {
  if (body.size() > limits.max_frame()) bad("a reply of " + std::to_string(body.size()) + " bytes");
  const json j = parse_bounded(body);
  exact_keys(j, {"id", "status", "stdout", "stderr", "stdout_truncated", "stderr_truncated", "result", "display",
                 "error"},
             "the reply");
  const json& id = member(j, "id");
  if (!id.is_number_unsigned() || id.get<uint64_t>() != expected_id) bad("the reply is not to cell " +
                                                                         std::to_string(expected_id));
  CellOutput out;
  out.status = text(j, "status", 16);
  if (out.status != "ok" && out.status != "error") bad("status '" + out.status + "'");
  out.stdout_data = text(j, "stdout", limits.output_bytes + kNoticeBytes);
  out.stderr_data = text(j, "stderr", limits.output_bytes + kNoticeBytes);
  out.stdout_truncated = flag(j, "stdout_truncated");
  out.stderr_truncated = flag(j, "stderr_truncated");
  uint64_t budget = limits.display_bytes;
  if (const json& r = member(j, "result"); !r.is_null()) out.result = bundle(r, "result", budget);
  const json& display = member(j, "display");
  if (!display.is_array()) bad("'display' is not a list");
  if (display.size() > limits.display_items) bad(std::to_string(display.size()) + " display items, over " +
                                                 std::to_string(limits.display_items));
  for (const json& d : display) out.display.push_back(bundle(d, "a display item", budget));
  const json& e = member(j, "error");
  if ((out.status == "error") != !e.is_null()) bad("'error' does not go with status '" + out.status + "'");
  if (!e.is_null()) {
    exact_keys(e, {"ename", "evalue", "traceback"}, "'error'");
    CellError err{text(e, "ename", kMaxName), text(e, "evalue", kMaxErrorText), {}};
    const json& tb = member(e, "traceback");
    if (!tb.is_array() || tb.size() > kMaxTracebackLines) bad("'error.traceback' is not a list of at most " +
                                                              std::to_string(kMaxTracebackLines) + " lines");
    for (const json& line : tb) {
      if (!line.is_string() || line.get_ref<const std::string&>().size() > kMaxErrorText)
        bad("'error.traceback' holds something other than lines of text");
      err.traceback.push_back(line.get<std::string>());
    }
    out.error = std::move(err);
  }
  return out;
}

std::optional<std::string> FrameReader::next() {
  if (buf_.size() < 4) return std::nullopt;
  const auto b = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(buf_[i])); };
  const size_t n = b(0) << 24 | b(1) << 16 | b(2) << 8 | b(3);
  if (n > max_) bad("a frame of " + std::to_string(n) + " bytes, over " + std::to_string(max_));
  if (buf_.size() < 4 + n) return std::nullopt;
  std::string body = buf_.substr(4, n);
  buf_.erase(0, 4 + n);
  return body;
}

}  // namespace sandboxrun::session
