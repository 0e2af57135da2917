// Obfuscation evidence: decoders that turn literals back into code, entropy of data blobs,
// unusual source encodings, and the canonical form of names that hide their module.
#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstring>

#include "common/ascii.hpp"
#include "common/utf8.hpp"
#include "internal.hpp"
#include "sandboxrun/assess_analyzer.hpp"

namespace sandboxrun::assess {

namespace {

constexpr std::array<std::string_view, 6> kBase64 = {
    "base64.b64decode",    "base64.standard_b64decode", "base64.urlsafe_b64decode",
    "base64.decodebytes", "base64.decodestring",       "binascii.a2b_base64"};
constexpr std::array<std::string_view, 5> kHex = {"bytes.fromhex", "bytearray.fromhex", "binascii.unhexlify",
                                                  "binascii.a2b_hex", "base64.b16decode"};
// Decoders whose output cannot be recovered statically (compressed, other alphabets).
constexpr std::array<std::string_view, 12> kOpaque = {
    "zlib.decompress", "gzip.decompress", "bz2.decompress",  "lzma.decompress",
    "base64.b32decode", "base64.b85decode", "base64.a85decode", "marshal.loads",
    "binascii.a2b_uu", "codecs.decode",    "codecs.encode",    "binascii.a2b_qp"};

template <size_t N>
bool in(const std::array<std::string_view, N>& set, std::string_view s) noexcept {
  return std::find(set.begin(), set.end(), s) != set.end();
}

int b64_value(char c) noexcept {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+' || c == '-') return 62;
  if (c == '/' || c == '_') return 63;
  return -1;
}

}  // namespace

const char* to_string(Detector d) noexcept {
  switch (d) {
    case Detector::getattr_computed: return "getattr_computed";
    case Detector::getattr_dynamic: return "getattr_dynamic";
    case Detector::builtins_dict: return "builtins_dict";
    case Detector::dynamic_import: return "dynamic_import";
    case Detector::decoded_payload: return "decoded_payload";
    case Detector::long_line: return "long_line";
    case Detector::wide_gap: return "wide_gap";
    case Detector::entropy_blob: return "entropy_blob";
    case Detector::unicode_identifier: return "unicode_identifier";
    case Detector::source_encoding: return "source_encoding";
    case Detector::deep_nesting: return "deep_nesting";
    case Detector::reversed_string: return "reversed_string";
    case Detector::truncated: return "truncated";
    case Detector::not_python: return "not_python";
    case Detector::python2: return "python2";
    case Detector::xor_decode: return "xor_decode";
    case Detector::blank_padding: return "blank_padding";
    case Detector::code_fragments: return "code_fragments";
    case Detector::syntax_error: return "syntax_error";
    case Detector::secret_random: return "secret_random";
    case Detector::secret_weak_hash: return "secret_weak_hash";
    case Detector::count_: break;
  }
  return "?";
}

bool decode_base64(std::string_view in, std::string& out) {
  out.clear();
  uint32_t acc = 0;
  int bits = 0;
  size_t digits = 0;
  for (char c : in) {
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') break;
    int v = b64_value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    ++digits;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return digits >= 4 && digits % 4 != 1;
}

bool decode_hex(std::string_view in, std::string& out) {
  out.clear();
  int hi = -1;
  for (char c : in) {
    if (c == ' ' || c == '\n' || c == '\t') continue;
    int v = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (v < 0) return false;
    if (hi < 0) {
      hi = v;
    } else {
      out += static_cast<char>(hi * 16 + v);
      hi = -1;
    }
  }
  return hi < 0 && !out.empty();
}

std::string rot13(std::string_view in) {
  std::string out(in);
  for (char& c : out) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>('a' + (c - 'a' + 13) % 26);
    else if (c >= 'A' && c <= 'Z') c = static_cast<char>('A' + (c - 'A' + 13) % 26);
  }
  return out;
}

double shannon_entropy(std::string_view s) noexcept {
  if (s.empty()) return 0;
  std::array<uint32_t, 256> count{};
  for (char c : s) ++count[static_cast<unsigned char>(c)];
  double h = 0;
  const double n = static_cast<double>(s.size());
  for (uint32_t k : count)
    if (k) {
      double p = k / n;
      h -= p * std::log2(p);
    }
  return h;
}

bool looks_like_text(std::string_view s) noexcept {
  if (s.empty()) return false;
  size_t good = 0;
  for (char ch : s) {
    auto c = static_cast<unsigned char>(ch);
    if (c == 0) return false;
    if (c >= 0x20 || c == '\n' || c == '\r' || c == '\t') ++good;
  }
  return good * 10 >= s.size() * 9;
}

bool is_decoder(std::string_view qual) noexcept {
  return in(kBase64, qual) || in(kHex, qual) || in(kOpaque, qual);
}

namespace detail {

std::optional<std::string> decode_constant_call(std::string_view qual, std::span<const ArgInfo> args) {
  if (args.empty() || args[0].kind != ArgInfo::Kind::string || args[0].dynamic) return std::nullopt;
  const std::string& input = args[0].text;
  std::string out;
  if (in(kBase64, qual)) {
    if (decode_base64(input, out)) return out;
    return std::nullopt;
  }
  if (in(kHex, qual)) {
    if (decode_hex(input, out)) return out;
    return std::nullopt;
  }
  if (qual == "codecs.decode" || qual == "codecs.encode") {
    std::string codec;
    for (const auto& a : args.subspan(1))
      if ((a.keyword.empty() || a.keyword == "encoding") && a.kind == ArgInfo::Kind::string) {
        codec = ascii_lower(a.text);
        break;
      }
    if (codec == "rot13" || codec == "rot_13" || codec == "rot-13") return rot13(input);
    if ((codec == "hex" || codec == "hex_codec") && decode_hex(input, out)) return out;
    if ((codec == "base64" || codec == "base64_codec") && decode_base64(input, out)) return out;
  }
  return std::nullopt;
}

namespace {

// PEP 263: the encoding a comment matching coding[:=]\s*([-\w.]+) on line 1 or 2 declares,
// lower case with '-' for '_'.
std::optional<std::string> coding_cookie(std::string_view source) {
  size_t line_end = 0;
  for (int line = 0; line < 2 && line_end < source.size(); ++line) {
    size_t begin = line_end;
    line_end = source.find('\n', begin);
    if (line_end == std::string_view::npos) line_end = source.size();
    std::string_view l = source.substr(begin, line_end - begin);
    ++line_end;
    size_t hash = l.find('#');
    if (hash == std::string_view::npos) continue;
    size_t k = l.find("coding", hash);
    if (k == std::string_view::npos || k + 6 >= l.size() || (l[k + 6] != ':' && l[k + 6] != '=')) continue;
    size_t p = k + 7;
    while (p < l.size() && (l[p] == ' ' || l[p] == '\t')) ++p;
    size_t q = p;
    while (q < l.size() && (std::isalnum(static_cast<unsigned char>(l[q])) || l[q] == '-' || l[q] == '_' || l[q] == '.')) ++q;
    std::string enc = ascii_lower(l.substr(p, q - p));
    std::replace(enc.begin(), enc.end(), '_', '-');
    return enc;
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> unusual_source_encoding(std::string_view source) {
  auto enc = coding_cookie(source);
  static constexpr std::array<std::string_view, 9> plain = {
      "utf-8", "utf8", "ascii", "us-ascii", "latin-1", "iso-8859-1", "latin1", "iso8859-1", "utf-8-sig"};
  if (!enc || enc->empty() || in(plain, *enc) || enc->starts_with("iso-8859") || enc->starts_with("cp125"))
    return std::nullopt;
  return enc;
}

std::optional<std::string> foreign_format(std::string_view source) {
  if (source.starts_with("\x7f" "ELF")) return "ELF executable";
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 11> magic = {{
      {"\x89PNG", "PNG image"}, {"GIF8", "GIF image"}, {"\xff\xd8\xff", "JPEG image"}, {"%PDF-", "PDF document"},
      {"PK\x03\x04", "ZIP archive"}, {"\x1f\x8b", "gzip data"},
      {"\xcf\xfa\xed\xfe", "Mach-O executable"}, {"\xca\xfe\xba\xbe", "Mach-O or Java class"},
      {std::string_view("\0asm", 4), "WebAssembly module"}, {"SQLite format 3", "SQLite database"},
      {"\xfd" "7zXZ", "xz data"}}};
  for (const auto& [m, what] : magic)
    if (source.starts_with(m) && source.size() > m.size()) return std::string(what);
  // A shell interpreter line: Python refuses it only when it runs, so a reader must say so.
  if (source.starts_with("#!")) {
    std::string_view first = source.substr(0, source.find('\n'));
    if (first.find("python") == std::string_view::npos &&
        (first.ends_with("sh") || first.find("sh ") != std::string_view::npos || first.find("/env ") != std::string_view::npos))
      return "shell script (" + std::string(first.substr(0, 64)) + ")";
  }
  // Binary data: a tenth of the first 4 KiB is control bytes or bytes that are not UTF-8,
  // which no source file has. A stray NUL in text is not enough; what follows it is analyzed.
  const std::string_view head = source.substr(0, 4096);
  size_t odd = 0;
  for (size_t i = 0; i < head.size();) {
    const auto c = static_cast<unsigned char>(head[i]);
    if (c < 0x80) {
      odd += (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f') || c == 0x7f;
      ++i;
      continue;
    }
    const size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    size_t k = 1;
    while (len && k < len && i + k < head.size() && (static_cast<unsigned char>(head[i + k]) & 0xc0) == 0x80) ++k;
    if (len && (k == len || i + k == head.size())) {
      i += k;  // a whole sequence (or one cut by the 4 KiB window)
    } else {
      ++odd;
      ++i;
    }
  }
  if (head.size() >= 64 && odd * 10 >= head.size()) return "binary data";
  // Bytes CPython refuses before it compiles anything (the rest is still analyzed).
  if (const size_t nul = source.find('\0'); nul != std::string_view::npos)
    return "a NUL byte at offset " + std::to_string(nul) + " (CPython refuses to compile the file)";
  if (!coding_cookie(source)) {
    if (const size_t bad = first_invalid_utf8(source); bad != std::string_view::npos)
      return "bytes that are not UTF-8 at offset " + std::to_string(bad) +
             " and no coding declaration (CPython refuses to compile the file)";
  }
  // A shell script without an interpreter line: statements no Python file can hold, and no
  // statement that only Python has (a usage text in a docstring may well show shell lines).
  size_t shell_lines = 0, python_lines = 0, begin = 0;
  for (int n = 0; n < 200 && begin < source.size(); ++n) {
    size_t end = source.find('\n', begin);
    if (end == std::string_view::npos) end = source.size();
    std::string_view l = source.substr(begin, end - begin);
    begin = end + 1;
    // Every word below starts with one of these: most lines (indented ones) need no comparison.
    if (l.empty() || std::string_view("fitdeswcp\"'").find(l[0]) == std::string_view::npos) continue;
    static constexpr std::array<std::string_view, 12> shell = {"fi", "then", "done", "esac", "do", "set -e",
                                                               "echo ", "export ", "wget ", "curl ", "chmod ", "cd "};
    static constexpr std::array<std::string_view, 7> python = {"import ", "from ", "def ", "class ", "print(",
                                                               "\"\"\"", "'''"};
    for (auto k : python) python_lines += l.starts_with(k);
    for (auto k : shell)
      if (l.starts_with(k) && (l.size() == k.size() || k.back() == ' ' || l[k.size()] == ' ')) {
        ++shell_lines;
        break;
      }
  }
  if (shell_lines >= 3 && python_lines == 0) return "shell script";
  return std::nullopt;
}

bool is_entropy_blob(std::string_view s, const AnalyzerLimits& limits) noexcept {
  if (s.size() < limits.entropy_min_length) return false;
  size_t blanks = 0;
  for (char c : s)
    if (c == ' ' || c == '\n' || c == '\t') ++blanks;
  // Prose has blanks; encoded data has (almost) none.
  if (blanks * 50 > s.size()) return false;
  return shannon_entropy(s) >= limits.entropy_bits;
}

bool is_canonical(std::string_view qual) noexcept {
  // Every rewrite in canonical() needs "__", one of these prefixes or ".os.".
  return qual.find("__") == std::string_view::npos && !qual.starts_with("builtins.") && !qual.starts_with("posix.") &&
         !qual.starts_with("nt.") && qual.find(".os.") == std::string_view::npos;
}

void canonicalize(std::string& qual) {
  if (!is_canonical(qual)) qual = canonical(qual);
}

std::string canonical(std::string_view qual) {
  // Most names have nothing to rewrite: they are returned as they are without the searches.
  if (is_canonical(qual)) return std::string(qual);
  // __dict__ and __call__ are transparent: os.__dict__.system -> os.system
  std::string out(qual);
  for (std::string_view t : {".__dict__", ".__call__"}) {
    for (size_t k; (k = out.find(t)) != std::string::npos;) out.erase(k, t.size());
  }
  std::string_view q = out;
  for (bool again = true; again;) {
    again = false;
    for (std::string_view prefix : {"builtins.", "__builtins__.", "__builtin__.", "__main__.__builtins__."}) {
      if (q.starts_with(prefix) && q.size() > prefix.size()) {
        q.remove_prefix(prefix.size());
        again = true;
      }
    }
  }
  std::string r;
  if (q.starts_with("posix.") || q.starts_with("nt.")) {
    r = "os.";
    r.append(q.substr(q.find('.') + 1));
  } else {
    r.assign(q);
  }
  // Modules re-export os (subprocess.os.system, shutil.os.system): use the os spelling.
  if (size_t k = r.find(".os."); k != std::string::npos && r.find('(') > k) r.erase(0, k + 1);
  return r;
}

}  // namespace detail
}  // namespace sandboxrun::assess
