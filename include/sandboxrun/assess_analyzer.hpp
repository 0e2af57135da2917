// The analyzer turns tokens into facts: imports, calls with resolved qualified names and
// their arguments, attribute references, string literals, and obfuscation evidence. It
// streams them to a sink (the rule engine) and keeps only bounded state, so any input is
// analyzed in linear time and memory.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "sandboxrun/record.hpp"

namespace sandboxrun::assess {

using record::from_json;  // for AnalyzerLimits (record.hpp)
using record::to_json;

// One argument of a call, as far as a static reader can know it.
struct ArgInfo {
  enum class Kind : uint8_t { none, string, literal, name, call, container, expr };
  std::string keyword;  // empty for positional arguments
  Kind kind = Kind::none;
  // string: the value (pieces joined with + folded; list/tuple items joined by spaces);
  // literal: the token (True, 0, 0o777); name/call: the resolved qualified name.
  // For expressions, the literal string pieces it contains.
  std::string text;
  bool dynamic = false;  // not a constant (names, calls, formatting, f-string fields)
  bool folded = false;   // a constant assembled from pieces: 'ev'+'al', chr(101), s[::-1]
  bool decoded = false;  // carries data from a decoder (base64, hex, rot13, zlib ...)
  // Host data it carries (Flow bits): read from a system file, a secret, the whole environment;
  // kept through every value built from it (variables, returns, containers, f-strings, calls).
  uint8_t flows = 0;
  uint32_t flow_line = 0;  // where the first of that data was read
  // Inside a function of the file: which of its parameters the value is built from (bit i:
  // parameter i), so that a call with host data in that argument reaches the calls it feeds.
  uint32_t params = 0;
  // And which parameters name a file it holds the contents of (def read(p): return open(p).read()):
  // a call with a host path there reads host data.
  uint32_t path_params = 0;
};

// Where data in a value came from (ArgInfo::flows). The rules name them (`flows: [...]`).
enum Flow : uint8_t {
  flow_host = 1,     // a file under /etc, /proc, /sys, /boot, /var/log, /root or /home
  flow_secret = 2,   // credentials: shadow, SSH/GPG keys, cloud and browser credential stores
  flow_environ = 4,  // the whole environment (os.environ as a value, .copy(), .items())
  // Not the host's: serialized by the program from a value it made (pickle.dumps(obj)), so
  // decoding it again (zlib, base64) yields its own objects, no payload.
  flow_own = 8,
  // Not data but a name: a path under a system directory (/etc, /usr, /boot, /bin, /lib,
  // /var/lib) or built from one (joined, walked, globbed, returned, stored in an object), so that
  // deleting or overwriting it is seen however far the path travelled.
  flow_system = 16,
  // Received from the network: a socket's recv, a socketserver handler's rfile, an HTTP
  // response (requests.get(...), urlopen(...).read()). Run as code or a command, it is a remote
  // shell or a download-and-execute.
  flow_net = 32,
};
// "host", "secret", "environ", "own", "system", "network" -> its bit; 0 for any other name.
uint8_t flow_named(std::string_view name) noexcept;
// The kind of host data a read of `path` gives (0: none of the host's).
uint8_t flow_of_path(std::string_view path) noexcept;
// flow_system when the text (any item or value of it) is a system path; /etc/hosts, whose edit
// the policy rates lower, is not.
uint8_t system_path_flow(std::string_view text);

// Evidence detectors; the rules file refers to them by these names.
enum class Detector : uint8_t {
  getattr_computed,   // getattr/setattr/hasattr with a name folded from pieces
  getattr_dynamic,    // getattr with a name that is not a constant
  builtins_dict,      // globals()['__builtins__'], __builtins__.__dict__[...], vars(builtins)
  dynamic_import,     // __import__ / import_module of a non-constant or folded name
  decoded_payload,    // a literal decoded (base64, hex, rot13) to text that is analyzed too
  long_line,          // a physical line longer than limits.long_line
  wide_gap,           // code pushed off-screen by a long run of blanks
  entropy_blob,       // long high-entropy string literal
  unicode_identifier, // identifier in fullwidth/mathematical letters that Python folds to ASCII
  source_encoding,    // coding declaration other than utf-8/ascii/latin-1
  deep_nesting,       // brackets nested deeper than limits.max_nesting
  reversed_string,    // string[::-1]
  truncated,          // input larger than limits.max_bytes: only its head was analyzed
  not_python,         // an ELF executable, a shell script or binary data, not Python source
  python2,            // Python 2 statements (`print "x"`, `exec code`): the file cannot run as Python 3
  xor_decode,         // `^` inside bytes()/bytearray()/chr(): bytes decoded with an XOR key
  blank_padding,      // code after a long run of blank lines (pushed out of view)
  code_fragments,     // a list of constant pieces that join into Python statements
  syntax_error,       // the file does not compile: a bracket never closed, a string never ended
  secret_random,      // the random module (not secrets) makes a value for a function or name that says secret
  secret_weak_hash,   // MD5 or SHA-1 (not usedforsecurity=False) in a function or for a name that says password
  count_,
};
const char* to_string(Detector d) noexcept;

struct CallEvent {
  std::string_view qual;  // canonical qualified name: os.system, eval, ctypes.CDLL().mount
  uint32_t line;
  std::span<const ArgInfo> args;
  // Inside a loop that never ends (`while True:` / `for _ in itertools.count()` with no
  // break, return or exit) or a function that calls itself with no return. Only computed for
  // calls the sink marked loop_sensitive; false for the others.
  bool unbounded_loop;
  bool subscript;         // os.environ['KEY'] is reported as call "os.environ[]" with the key
  bool from_decoded;      // found in text decoded from a literal
  // unbounded_loop, and the loop waits for input each pass (awaits a queue or a task, accept,
  // recv, input, readline): a server or a consumer, which grows with what it is given.
  bool waiting_loop = false;
};

class EventSink {
 public:
  virtual ~EventSink() = default;
  virtual void on_import(std::string_view module, uint32_t line) = 0;
  virtual void on_call(const CallEvent& call) = 0;
  virtual void on_reference(std::string_view qual, uint32_t line) = 0;
  // String literals in expressions (docstrings and other bare string statements excluded).
  virtual void on_string(std::string_view value, uint32_t line) = 0;
  virtual void on_detector(Detector d, uint32_t line, std::string_view detail) = 0;
  // `from M import *`: bare names may come from M.
  virtual void on_star_import(std::string_view module) = 0;
  // Whether calls of `qual` need unbounded_loop (they are then reported when their loop or
  // function block ends).
  virtual bool loop_sensitive(std::string_view qual) = 0;
};

struct AnalyzerLimits {
  uint32_t long_line = 1000;
  uint32_t wide_gap = 80;
  uint32_t blank_run = 100;              // blank lines before code that read as padding
  uint32_t entropy_min_length = 200;
  double entropy_bits = 3.5;
  uint32_t max_nesting = 200;
  uint32_t max_fragment_depth = 3;       // decoded-in-decoded levels analyzed
  uint64_t max_fragment_bytes = 4 << 20; // total decoded text analyzed per file

  using L = AnalyzerLimits;
  static constexpr auto fields = std::tuple{
      record::field("long_line", &L::long_line), record::field("wide_gap", &L::wide_gap),
      record::field("blank_run", &L::blank_run), record::field("entropy_min_length", &L::entropy_min_length),
      record::field("entropy_bits", &L::entropy_bits), record::field("max_nesting", &L::max_nesting),
      record::field("max_fragment_depth", &L::max_fragment_depth),
      record::field("max_fragment_bytes", &L::max_fragment_bytes)};
};

// Analyzes Python source, then (iteratively, never recursively) the code it hides in exec'd
// literals and decoded strings, up to the limits.
void analyze(std::string_view source, const AnalyzerLimits& limits, EventSink& sink);

// Decoders used by the obfuscation detectors (exposed for tests); false when the input is
// not valid for the encoding.
bool decode_base64(std::string_view in, std::string& out);
bool decode_hex(std::string_view in, std::string& out);
std::string rot13(std::string_view in);
double shannon_entropy(std::string_view s) noexcept;
// Mostly printable text (worth analyzing as code).
bool looks_like_text(std::string_view s) noexcept;
// Qualified names whose result is decoded data.
bool is_decoder(std::string_view qual) noexcept;

}  // namespace sandboxrun::assess
