// pip requirement sets: only what keeps pip on the configured index. Options that change where
// pip looks (-i, --extra-index-url, -f, --trusted-host), pull in other files (-r, -c, which do
// not exist inside the sandbox), build from source (-e) or fetch direct URLs (NAME @ URL) are
// refused, so that the install phase's network allowlist and the cache key say everything.
#include <algorithm>
#include <cctype>

#include "deps/deps.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun::deps {

namespace {

constexpr size_t kMaxLineBytes = 4096;
constexpr size_t kMaxLines = 1000;

bool hash_option(std::string_view tok) {
  for (std::string_view algo : {"--hash=sha256:", "--hash=sha384:", "--hash=sha512:"}) {
    if (tok.substr(0, algo.size()) != algo) continue;
    std::string_view hex = tok.substr(algo.size());
    return !hex.empty() && std::all_of(hex.begin(), hex.end(), [](char c) { return std::isxdigit(static_cast<unsigned char>(c)); });
  }
  return false;
}

std::string collapse(std::string_view s) {
  std::string out;
  for (char c : s) {
    if (c == ' ' || c == '\t') {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

std::string Requirements::text() const {
  std::string s;
  for (const auto& l : lines) s += l + "\n";
  return s;
}

std::optional<std::string> check_requirement(std::string_view line) {
  if (line.empty()) return "an empty requirement";
  if (line.size() > kMaxLineBytes) return "a requirement longer than " + std::to_string(kMaxLineBytes) + " bytes";
  for (char c : line)
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) > 0x7e)
      return "a control or non-ASCII character (requirements are ASCII text)";
  if (!std::isalnum(static_cast<unsigned char>(line[0])))
    return "'" + std::string(line) +
           "': only requirement specifiers (NAME[extras] VERSION-SPEC ; MARKER) with --hash=ALGO:HEX options are "
           "accepted; index, find-links, editable and include options would bypass the configured package_index";
  if (line.find(" @ ") != std::string_view::npos || line.find("://") != std::string_view::npos)
    return "'" + std::string(line) + "': direct URL references are not supported; install from the package_index";
  size_t pos = 0;
  while ((pos = line.find(" -", pos)) != std::string_view::npos) {
    size_t end = line.find(' ', pos + 1);
    std::string_view tok = line.substr(pos + 1, end == std::string_view::npos ? std::string_view::npos : end - pos - 1);
    if (!hash_option(tok))
      return "'" + std::string(tok) + "': the only per-requirement option accepted is --hash=sha256:HEX (or sha384, sha512)";
    pos += 1;
  }
  return std::nullopt;
}

Requirements parse_requirements(std::string_view text, const std::string& origin) {
  Requirements r;
  size_t lineno = 0, start_line = 0;
  std::string logical;
  auto finish = [&] {
    // A comment starts at '#' at the beginning of the line or after whitespace (pip's rule).
    size_t hash = std::string::npos;
    for (size_t i = 0; i < logical.size(); ++i)
      if (logical[i] == '#' && (i == 0 || logical[i - 1] == ' ' || logical[i - 1] == '\t')) {
        hash = i;
        break;
      }
    std::string line = collapse(std::string_view(logical).substr(0, hash));
    logical.clear();
    if (line.empty()) return;
    if (auto why = check_requirement(line))
      throw Error(origin + ":" + std::to_string(start_line) + ": " + *why, "fix the requirement in " + origin);
    if (r.lines.size() >= kMaxLines)
      throw Error(origin + ": more than " + std::to_string(kMaxLines) + " requirements", "split the set");
    if (line.find("--hash=") != std::string::npos) r.hashes = true;
    r.lines.push_back(std::move(line));
  };
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t nl = text.find('\n', pos);
    std::string_view raw = text.substr(pos, nl == std::string_view::npos ? std::string_view::npos : nl - pos);
    pos = nl == std::string_view::npos ? text.size() + 1 : nl + 1;
    ++lineno;
    if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
    if (logical.empty()) start_line = lineno;
    // A trailing backslash continues the logical line (pip's rule; used for long --hash lists).
    if (!raw.empty() && raw.back() == '\\') {
      logical.append(raw.substr(0, raw.size() - 1)).push_back(' ');
      continue;
    }
    logical.append(raw);
    finish();
  }
  if (!logical.empty()) finish();
  std::sort(r.lines.begin(), r.lines.end());
  r.lines.erase(std::unique(r.lines.begin(), r.lines.end()), r.lines.end());
  return r;
}

void merge(Requirements& base, const Requirements& more) {
  base.lines.insert(base.lines.end(), more.lines.begin(), more.lines.end());
  std::sort(base.lines.begin(), base.lines.end());
  base.lines.erase(std::unique(base.lines.begin(), base.lines.end()), base.lines.end());
  base.hashes = base.hashes || more.hashes;
}

nlohmann::json installed_from_report(const nlohmann::json& report) {
  nlohmann::json out = nlohmann::json::array();
  if (!report.is_object() || !report.contains("install") || !report["install"].is_array()) return out;
  for (const auto& item : report["install"]) {
    if (!item.is_object()) continue;
    const auto meta = item.value("metadata", nlohmann::json::object());
    const auto info = item.value("download_info", nlohmann::json::object());
    const auto archive = info.is_object() ? info.value("archive_info", nlohmann::json::object()) : nlohmann::json::object();
    nlohmann::json sha = nullptr;
    // pip writes "hashes": {"sha256": HEX} (newer) or "hash": "sha256=HEX" (23.0).
    if (archive.contains("hashes") && archive["hashes"].is_object() && archive["hashes"].contains("sha256"))
      sha = archive["hashes"]["sha256"];
    else if (archive.contains("hash") && archive["hash"].is_string()) {
      const std::string h = archive["hash"];
      if (h.rfind("sha256=", 0) == 0) sha = h.substr(7);
    }
    out.push_back({{"name", meta.is_object() ? meta.value("name", "") : ""},
                   {"version", meta.is_object() ? meta.value("version", "") : ""},
                   {"sha256", sha},
                   {"url", info.is_object() ? info.value("url", "") : ""}});
  }
  return out;
}

}  // namespace sandboxrun::deps
