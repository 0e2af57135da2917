// Sessions: one sandbox with one long-lived interpreter, running cells that keep their state
// (docs/sessions.md). This header holds what a cell comes back as; every field of it was
// reported by code inside the sandbox, checked and bounded by the host, and is never used for a
// security decision.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandboxrun/record.hpp"

namespace sandboxrun {

// A displayed object as Jupyter sends it: MIME type -> data (text; image/png and image/jpeg
// base64-encoded). "text/plain" is always there.
using MimeBundle = std::map<std::string, std::string>;

// An exception a cell raised: its type's name, its message and the formatted traceback, whose
// line numbers are the cell's ("<cell N>").
struct CellError {
  std::string ename{};
  std::string evalue{};
  std::vector<std::string> traceback{};
  static constexpr auto fields = std::tuple{record::field("ename", &CellError::ename),
                                            record::field("evalue", &CellError::evalue),
                                            record::field("traceback", &CellError::traceback)};
  bool operator==(const CellError&) const = default;
};

// What one cell produced, as the session's driver reported it.
struct CellOutput {
  std::string status{};  // "ok", or "error" when the cell raised (error is set)
  std::string stdout_data{};
  std::string stderr_data{};
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  std::optional<MimeBundle> result{};  // the value of the cell's trailing expression
  std::vector<MimeBundle> display{};   // display() calls and figures, in order
  std::optional<CellError> error{};
  static constexpr auto fields = std::tuple{
      record::field("status", &CellOutput::status), record::field("stdout", &CellOutput::stdout_data),
      record::field("stderr", &CellOutput::stderr_data),
      record::field("stdout_truncated", &CellOutput::stdout_truncated),
      record::field("stderr_truncated", &CellOutput::stderr_truncated),
      record::field_or_null("result", &CellOutput::result), record::field("display", &CellOutput::display),
      record::field_or_null("error", &CellOutput::error)};
  bool operator==(const CellOutput&) const = default;
};

// A file or directory under a session's /work, as list_files() reports it (what the sandbox's
// driver said: data, not a decision).
struct WorkFile {
  std::string path{};  // relative to /work
  uint64_t size = 0;   // regular files only
  std::string type{};  // file | dir | link | other
  static constexpr auto fields = std::tuple{record::field("path", &WorkFile::path),
                                            record::field("size", &WorkFile::size),
                                            record::field("type", &WorkFile::type)};
  bool operator==(const WorkFile&) const = default;
};

}  // namespace sandboxrun
