// Data flow: which values carry the host's data (a system file's contents, secrets, the whole
// environment), so that rules can rate where it goes (`flows:` in an argument condition) instead
// of which calls a file happens to contain. Sources are marked here; values carry the marks
// through the same paths as everything else they hold (analyzer_values.cpp: operands,
// containers, f-strings, calls, subscripts; analyzer.cpp: names and returns).
#include <algorithm>
#include <array>
#include <cctype>

#include "analyzer_impl.hpp"
#include "internal.hpp"

namespace sandboxrun::assess {

uint8_t flow_named(std::string_view name) noexcept {
  if (name == "host") return flow_host;
  if (name == "secret") return flow_secret;
  if (name == "environ") return flow_environ;
  if (name == "own") return flow_own;
  if (name == "system") return flow_system;
  if (name == "network") return flow_net;
  return 0;
}

namespace {

// The names SR-CRED-003 rates as secrets read from the environment (its regex, case aside).
bool secret_env_name(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static constexpr std::array<std::string_view, 10> kWords = {
      "secret", "token", "passw", "api_key", "apikey", "private", "credential", "access_key", "accesskey", "session"};
  return std::any_of(kWords.begin(), kWords.end(), [&](std::string_view w) { return lower.find(w) != std::string::npos; });
}

}  // namespace

uint8_t flow_of_path(std::string_view path) noexcept {
  // Credentials wherever they live: in any home (~, /home/NAME, /root) or the system's.
  static constexpr std::array<std::string_view, 24> kSecrets = {
      "/etc/shadow", "/etc/gshadow", "/etc/security/opasswd", "/etc/ssl/private", ".ssh/", "id_rsa", "id_ed25519",
      "id_ecdsa", "id_dsa", ".aws/credentials", ".netrc", ".gnupg", ".docker/config.json", ".kube/config",
      ".git-credentials", ".pgpass", "Login Data", "cookies.sqlite", "key4.db", "logins.json", ".password-store",
      ".config/gcloud", "/run/secrets/", "serviceaccount/token"};
  for (const auto s : kSecrets)
    if (path.find(s) != std::string_view::npos) return flow_secret;
  // The host's SSH private keys (/etc/ssh/ssh_host_ed25519_key; the .pub beside them is public).
  if (path.find("ssh_host_") != std::string_view::npos && !path.ends_with(".pub")) return flow_secret;
  // A process's environment read through /proc (/proc/1/environ, /proc/self/environ).
  if (path.starts_with("/proc/") && path.ends_with("/environ")) return flow_environ;
  // The host's own files: system configuration and the account database, the kernel's views of
  // the machine, logs, and homes that are not the program's (`~` is its own).
  static constexpr std::array<std::string_view, 8> kHost = {"/etc/", "/proc/", "/sys/", "/boot/",
                                                            "/var/log/", "/root/", "/home/", "/var/mail/"};
  for (const auto h : kHost)
    if (path.starts_with(h) || path == h.substr(0, h.size() - 1)) return flow_host;
  if (path == "/root" || path == "/etc/passwd") return flow_host;
  return 0;
}

namespace {

// Under /usr: its standard directories and what is in them, not /usr/local, and not a file
// of its own put straight into /usr (`/usr/copy_file` exists on no system: nothing is
// overwritten there).
bool usr_system(std::string_view p) {
  if (p == "/usr") return true;
  std::string_view rest = p.substr(5);
  const std::string_view top = rest.substr(0, rest.find('/'));
  static constexpr std::array<std::string_view, 11> kStandard = {
      "bin", "sbin", "lib", "lib32", "lib64", "libx32", "libexec", "include", "share", "src", "games"};
  return std::find(kStandard.begin(), kStandard.end(), top) != kStandard.end();
}

}  // namespace

uint8_t system_path_flow(std::string_view text) {
  auto system = [](std::string_view p) {
    if (p.empty() || p[0] != '/') return false;
    while (p.size() > 1 && p[1] == '/') p.remove_prefix(1);
    // The policy's example of an edit (HIGH); a temporary directory.
    if (p == "/etc/hosts" || p == "/usr/tmp" || p.starts_with("/usr/tmp/")) return false;
    static constexpr std::array<std::string_view, 9> kDirs = {"/etc",  "/usr",  "/boot",    "/bin",    "/sbin",
                                                              "/lib", "/lib64", "/var/lib", "/var/log"};
    for (const auto d : kDirs)
      if (p.starts_with(d) && (p.size() == d.size() || p[d.size()] == '/'))
        return d != "/usr" || usr_system(p);
    return false;
  };
  return detail::any_item_value(text, system) ? flow_system : 0;
}

namespace detail {

uint8_t path_flows(const ArgInfo& a) {
  if (a.kind != Kind::string && a.kind != Kind::container && !(a.kind == Kind::expr && has_alternatives(a.text)))
    return 0;
  uint8_t out = 0;
  // Items of a list (`["cat", "/etc/passwd"]`), words of a command line, values of a loop's name.
  std::string_view t = a.text;
  for (size_t start = 0; start <= t.size();) {
    size_t end = t.find_first_of(a.kind == Kind::container ? "\x1f" : "\x1f ", start);
    if (end == std::string_view::npos) end = t.size();
    any_alternative(t.substr(start, end - start), [&](std::string_view one) {
      out |= flow_of_path(one);
      return false;
    });
    start = end + 1;
  }
  return out;
}

namespace {

// Calls whose value is the contents (or a handle on the contents) of the file their first
// argument names, or the output of a command that reads it (`cat /etc/passwd`).
bool reads_path(std::string_view qual) noexcept {
  static constexpr std::array<std::string_view, 17> kReaders = {
      "open",           "io.open",          "codecs.open",           "builtins.open",
      "os.open",        "linecache.getlines", "fileinput.input",     "glob.glob",
      "glob.iglob",     "os.listdir",       "os.scandir",            "subprocess.check_output",
      "subprocess.run", "subprocess.getoutput", "os.popen",          "shutil.copyfileobj",
      "os.walk"};
  for (const auto r : kReaders)
    if (qual == r) return true;
  return false;
}

// open() and its aliases: a file handle on the path, in the mode of argument 1.
bool opens(std::string_view qual) noexcept {
  return qual == "open" || qual == "io.open" || qual == "codecs.open" || qual == "builtins.open";
}

// A mode that reads: none given, or one with 'r' or '+'.
bool reading_mode(const std::vector<ArgInfo>& args, size_t mode_index) {
  const ArgInfo* mode = nullptr;
  for (size_t i = 0, pos = 0; i < args.size(); ++i) {
    if (args[i].keyword == "mode" || (args[i].keyword.empty() && pos++ == mode_index)) mode = &args[i];
  }
  if (!mode || mode->kind != Kind::string || mode->dynamic) return true;
  return mode->text.find_first_of("r+") != std::string::npos || mode->text.find_first_of("wax") == std::string::npos;
}

}  // namespace

bool pickles_own_objects(std::string_view source) {
  for (size_t at = source.find("dumps("); at != std::string_view::npos; at = source.find("dumps(", at + 6)) {
    const std::string_view before = source.substr(0, at);
    // marshal is for code objects: marshal.dumps(compile(...)) makes a payload, not a cache.
    if (!(before.ends_with("pickle.") || before.ends_with("dill.")))
      continue;
    size_t arg = at + 6;
    while (arg < source.size() && (source[arg] == ' ' || source[arg] == '\t')) ++arg;
    if (arg < source.size() && source[arg] != '"' && source[arg] != '\'' && source[arg] != ')' &&
        !(source[arg] == 'b' && arg + 1 < source.size() && (source[arg + 1] == '"' || source[arg + 1] == '\'')))
      return true;
  }
  return false;
}

bool keeps_system_path(std::string_view qual) {
  if (qual.starts_with("local:")) return false;
  // dataclasses.field(default=..., default_factory=lambda: [...]): the field's value.
  static constexpr std::array<std::string_view, 32> kKeep = {
      "os.path.join", "os.path.expanduser", "os.path.expandvars", "os.path.abspath", "os.path.realpath",
      "os.path.normpath", "os.path.dirname", "os.fspath", "str", "pathlib.Path", "pathlib.PurePath",
      "pathlib.PosixPath", "os.walk", "os.listdir", "os.scandir", "os.fwalk", "glob.glob", "glob.iglob",
      "fnmatch.filter", "os.open", "open", "io.open", "codecs.open", "builtins.open", "sorted", "list", "tuple",
      "set", "reversed", "iter", "filter", "dataclasses.field"};
  if (std::find(kKeep.begin(), kKeep.end(), qual) != kKeep.end()) return true;
  // Methods of a path (or of what holds one): what they give is a path below or beside it.
  const std::string_view m = qual.substr(qual.rfind('.') + 1);
  static constexpr std::array<std::string_view, 12> kMethods = {
      "glob", "rglob", "iterdir", "resolve", "absolute", "joinpath", "with_name", "with_suffix", "with_stem",
      "expanduser", "open", "walk"};
  return qual.find('.') != std::string_view::npos && std::find(kMethods.begin(), kMethods.end(), m) != kMethods.end();
}

void mark_flow(ArgInfo& v, uint8_t flows, uint32_t line) {
  if (!flows) return;
  if (!v.flows) v.flow_line = line;
  v.flows |= flows;
}

void carry_flow(ArgInfo& to, const ArgInfo& from) {
  if (!from.flows && !from.params && !from.path_params) return;
  if (!to.flows) to.flow_line = from.flow_line;
  to.flows |= from.flows;
  to.params |= from.params;
  to.path_params |= from.path_params;
}

void Analyzer::mark_read_source(std::string_view qual, const std::vector<ArgInfo>& args, ArgInfo& value,
                                uint32_t line, const ArgInfo* receiver) {
  if ((qual == "pickle.dumps" || qual == "dill.dumps" || qual == "cloudpickle.dumps") &&
      !args.empty() && args[0].kind != Kind::string && args[0].dynamic && !args[0].decoded) {
    mark_flow(value, flow_own, line);
    own_serialized_ = true;
    return;
  }
  // What the network gives: received bytes, a request handler's input, an HTTP response.
  {
    const std::string_view last = qual.substr(qual.rfind('.') + 1);
    if (last == "recv" || last == "recvfrom" || qual.starts_with("self.rfile.") || qual == "self.request.recv" ||
        qual == "urllib.request.urlopen" || qual == "urllib2.urlopen" || qual == "requests.get" ||
        qual == "requests.post" || qual == "requests.request" || qual == "httpx.get" ||
        qual.starts_with("requests.Session().get") || qual.starts_with("httpx.Client().get")) {
      mark_flow(value, flow_net, line);
      return;
    }
  }
  // The account database enumerated: its contents, as /etc/passwd's.
  if (qual == "pwd.getpwall" || qual == "grp.getgrall" || qual == "spwd.getspall") {
    mark_flow(value, qual == "spwd.getspall" ? flow_secret : flow_host, line);
    return;
  }
  if (qual == "os.environ.copy" || qual == "os.environ.items" || qual == "os.environ.values" ||
      qual == "os.environb.copy" || qual == "os.environb.items") {
    mark_flow(value, flow_environ, line);
    return;
  }
  // Credentials harvested from the environment: one read for each of several secret names
  // (`{k: os.environ.get(k) for k in ("AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN")}`). One token read
  // by name is the program's own client's (MEDIUM), not this.
  if ((qual == "os.environ.get" || qual == "os.getenv" || qual == "os.environ[]" || qual == "os.environ.pop") &&
      !args.empty() && has_alternatives(args[0].text)) {
    int secrets = 0;
    any_alternative(args[0].text, [&](std::string_view name) {
      secrets += secret_env_name(name);
      return false;
    });
    if (secrets >= 2) mark_flow(value, flow_secret, line);
    return;
  }
  // A path read by a method of its own (p.read_text(), root.glob("*.md")), whatever p is.
  const std::string_view m = qual.substr(qual.rfind('.') + 1);
  // p.open() on a parameter or a name that holds a path (def read(path): with path.open("rb")),
  // its mode first as Path.open has it; other receivers' open() (zipfile, webbrowser) are not this.
  const bool param_open = m == "open" && receiver && (receiver->params || path_flows(*receiver)) &&
                          !modules_.count(qual.substr(0, qual.find('.'))) && reading_mode(args, 0);
  const bool path_method = qual.starts_with("pathlib.Path().") || m == "read_text" || m == "read_bytes" ||
                           m == "rglob" || m == "iterdir" || (m == "glob" && qual != "glob.glob") || param_open;
  if (!path_method && !reads_path(qual)) return;
  if (path_method) {
    if (m != "read_text" && m != "read_bytes" && m != "open" && m != "iterdir" && m != "glob" && m != "rglob") return;
    if (m == "open" && !param_open && !reading_mode(args, 1)) return;
    // A receiver that is no path constant (a name, a loop's item, Path(param)): what it carries,
    // and which parameter names it.
    if (!qual.starts_with("pathlib.Path().") || (receiver && receiver->params)) {
      if (receiver) {
        value.path_params |= receiver->params | receiver->path_params;
        mark_flow(value, path_flows(*receiver), line);
      }
      return;
    }
  } else if (opens(qual) && !reading_mode(args, 1)) {
    // What is written next (f.write(x), json.dump(x, f)) goes to this file.
    if (!args.empty() && args[0].kind == Kind::string && args[0].keyword.empty()) last_write_path_ = args[0].text;
    return;
  }
  // The path: the first argument, or a command line's items (`["cat", "/etc/passwd"]`).
  for (const auto& a : args) {
    if (!a.keyword.empty() && a.keyword != "file" && a.keyword != "args" && a.keyword != "cmd") continue;
    // A path the enclosing function was given: which file, the call of the function says.
    value.path_params |= a.params;
    // `env`, `printenv`: the whole environment as a command prints it.
    if ((a.text == "env" || a.text == "printenv" || a.text.starts_with("env\x1f") || a.text.starts_with("printenv\x1f")) &&
        !opens(qual) && qual != "os.open")
      mark_flow(value, flow_environ, line);
    mark_flow(value, path_flows(a), line);
    // A copy the program made of such a file (shutil.copy(SRC, "local.txt")) holds the same.
    if (a.kind == Kind::string)
      if (const auto it = copied_.find(a.text); it != copied_.end()) mark_flow(value, it->second, line);
    break;
  }
}

void Analyzer::taint_name(const std::string& name, const ArgInfo& in) {
  // A module's attribute (os.environ.update(x), sys.path.append(p)) is no value of the program's.
  if (modules_.count(std::string_view(name).substr(0, name.find('.')))) return;
  ArgInfo v = resolve(name);
  carry_flow(v, in);
  bind(name, v);
  // s.lines.append(x): the object s holds it too (it is returned, or sent, as a whole).
  if (const size_t dot = name.find('.'); dot != std::string::npos && name.compare(0, dot, "self") != 0) {
    ArgInfo o = resolve(std::string_view(name).substr(0, dot));
    carry_flow(o, in);
    bind(name.substr(0, dot), o);
  }
}

bool Analyzer::own_holder(std::string_view qual) const {
  if (qual.starts_with("local:")) return classes_.count(qual) != 0;
  const size_t dot = qual.rfind('.');
  return dot != std::string_view::npos && params_of_.count("local:" + std::string(qual.substr(dot + 1))) != 0;
}

void Analyzer::note_arg_default(std::string_view qual, const std::vector<ArgInfo>& args) {
  if (!qual.starts_with("argparse.") || !qual.ends_with(".add_argument") || arg_defaults_.size() >= kMaxSymbols) return;
  std::string dest;
  const ArgInfo* def = nullptr;
  for (const auto& a : args) {
    if (a.keyword == "default") def = &a;
    if (a.keyword == "dest" && a.kind == Kind::string) dest = a.text;
    // The long option names the dest ("--log-dir": log_dir), else the first name given.
    if (a.keyword.empty() && a.kind == Kind::string && !a.dynamic && (dest.empty() || a.text.starts_with("--"))) {
      std::string_view n = a.text;
      while (n.starts_with('-')) n.remove_prefix(1);
      dest.assign(n);
      std::replace(dest.begin(), dest.end(), '-', '_');
    }
  }
  // A default path, or a list of them (action="append", nargs="*"): each item is a value.
  if (def && !dest.empty() && (def->kind == Kind::string || def->kind == Kind::container) && names_a_path(def->text) &&
      def->text.find(kGroup) == std::string::npos) {
    std::string values = def->text.substr(0, kMaxSymbolText);
    std::replace(values.begin(), values.end(), '\x1f', kAlternative);
    arg_defaults_[dest] = std::move(values);
  }
}

std::optional<ArgInfo> Analyzer::arg_default_value(const ArgInfo& name, uint32_t line) const {
  if (arg_defaults_.empty()) return std::nullopt;
  const std::string_view t = name.text;
  const size_t dot = t.rfind('.');
  if (dot == std::string_view::npos || !t.substr(0, dot).ends_with("parse_args()")) return std::nullopt;
  const auto it = arg_defaults_.find(t.substr(dot + 1));
  if (it == arg_defaults_.end()) return std::nullopt;
  ArgInfo v{{}, Kind::expr, "{}", true};
  v.text += kAlternative;
  v.text += it->second;
  carry_flow(v, name);
  mark_flow(v, system_path_flow(it->second), line);
  return v;
}

void Analyzer::note_written(uint8_t flows) {
  if (!last_write_path_.empty() && copied_.size() < kMaxSymbols) copied_[last_write_path_] |= flows;
}

void Analyzer::note_copy(std::string_view qual, const std::vector<ArgInfo>& args) {
  if ((qual == "json.dump" || qual == "pickle.dump" || qual == "yaml.dump" || qual == "yaml.safe_dump" ||
       qual == "marshal.dump" || qual == "toml.dump") &&
      !args.empty() && args[0].flows) {
    note_written(args[0].flows);
    return;
  }
  if (qual != "shutil.copy" && qual != "shutil.copy2" && qual != "shutil.copyfile" && qual != "shutil.move") return;
  if (args.size() < 2 || args[1].kind != Kind::string || copied_.size() >= kMaxSymbols) return;
  if (const uint8_t from = path_flows(args[0]) | args[0].flows) copied_[args[1].text] |= from;
}

void Analyzer::path_method_of_value(const Frame& f, std::string_view qual) {
  const bool carries = (f.callee.flows & (flow_host | flow_secret | flow_system)) != 0;
  // NAME.unlink(), or a file object opened in place: open(p, "r+b").truncate(0).
  const bool opened = f.callee.text.ends_with("open().truncate") || f.callee.text.ends_with("open().write");
  if ((!carries && !f.callee.params) || (f.receiver.empty() && !opened)) return;
  const std::string_view m = qual.substr(qual.rfind('.') + 1);
  // What changes the file, and the walks of a folder (a caller's home walked and emptied).
  if (m != "unlink" && m != "rmdir" && m != "write_text" && m != "write_bytes" && m != "rename" && m != "replace" &&
      m != "chmod" && m != "open" && m != "truncate" && m != "iterdir" && m != "glob" && m != "rglob")
    return;
  // str.replace(old, new) is no rename.
  if ((m == "replace" || m == "rename") && f.args.size() != 1) return;
  std::vector<ArgInfo> with_self;
  with_self.reserve(f.args.size() + 1);
  // A parameter's own name, so that a caller's path takes its place (write_text of /etc/hosts).
  ArgInfo self{{}, carries || f.receiver.empty() ? Kind::expr : Kind::name, carries ? std::string() : f.receiver, true};
  carry_flow(self, f.callee);
  with_self.push_back(std::move(self));
  with_self.insert(with_self.end(), f.args.begin(), f.args.end());
  // A parameter's method (def reclaim(p): p.open("w")): the function's summary keeps it, and a
  // call that gives it a system path reports it.
  if (!carries) return note_param_call("pathlib.Path()." + std::string(m), with_self, f.line);
  sink_.on_call(CallEvent{"pathlib.Path()." + std::string(m), f.line, with_self, false, false, depth_ > 0});
}

void Analyzer::mutate_receiver(const Frame& f) {
  const std::string_view q = f.callee.text;
  const std::string_view m = q.substr(q.rfind('.') + 1);
  // lines.append(x) to a list bound from a literal: x is one of its items now (unknown: "{}"),
  // and a list grown at run time is no constant.
  if (!f.receiver.empty() && !f.args.empty() && (m == "append" || m == "insert" || m == "extend" || m == "appendleft")) {
    if (auto it = symbols_.find(f.receiver); it != symbols_.end() && it->second.kind == Kind::container) {
      const ArgInfo& a = f.args.back();
      const bool constant = a.kind == Kind::string && !a.dynamic && m != "extend";
      if (!it->second.text.empty()) append_capped(it->second.text, "\x1f", kMaxText);
      append_capped(it->second.text, constant ? std::string_view(a.text) : std::string_view("{}"), kMaxText);
      it->second.dynamic = it->second.dynamic || !constant;
    }
  }
  ArgInfo in;
  for (const auto& a : f.args) carry_flow(in, a);
  if (!in.flows && !in.params && !in.path_params) return;
  static constexpr std::array<std::string_view, 19> kMutators = {
      "append",      "extend",      "add",         "update",         "insert",     "write",    "writelines",
      "appendleft",  "put",         "setdefault",  "set_content",    "set_payload", "attach",  "add_attachment",
      "add_header",  "writerow",    "writerows",   "writestr",       "push"};
  if (std::find(kMutators.begin(), kMutators.end(), m) == kMutators.end()) return;
  taint_name(f.receiver, in);
  note_mutation(f.receiver, in);
  if ((m == "write" || m == "writelines" || m == "writerow" || m == "writerows") && in.flows) note_written(in.flows);
}

void Analyzer::note_def_param_op(std::string_view op) {
  if (op == "(" && frames_.size() == 1) param_next_ = true;
  else param_next_ = frames_.size() == 2 && (op == "," || op == "*" || op == "**");
  if (frames_.size() == 2) kwargs_next_ = op == "**";
  if (frames_.size() == 2) {
    // `root=Path("/etc")`: the constant a path is built from is the default, as `root="/etc"` is.
    default_in_path_ = default_next_ && op == "(" && prim_.active && is_name_kind(prim_.val.kind);
    if (default_in_path_) {
      const std::string q = detail::canonical(prim_.val.text);
      default_in_path_ = q == "pathlib.Path" || q == "pathlib.PurePath" || q == "pathlib.PosixPath" ||
                         q == "os.path.join" || q == "os.path.expanduser";
    }
    // `runner=subprocess.run`: a function of an imported module as the default, read when the
    // default ends; any operator but `.` makes the default something else.
    if (default_ref_ && (op == "," || op == ")")) note_default_ref();
    default_ref_ = op == "=" ? !def_params_.empty() : default_ref_ && op == ".";
    annotation_next_ = op == ":" && !def_params_.empty();
    default_next_ = op == "=" && !def_params_.empty();
  }
}

void Analyzer::note_param_class(std::string_view name) {
  annotation_next_ = false;
  const ArgInfo v = resolve(name);
  if (v.kind != Kind::name || !classes_.count(v.text)) return;
  def_classes_.resize(def_params_.size());
  def_classes_.back() = v.text;
}

void Analyzer::note_default_ref() {
  // mode=0o777, mode=OPEN_DIR: a number or flag, as a path default is its path.
  if (prim_.active && prim_.val.kind == Kind::literal && prim_.val.text != "None" && !prim_.val.text.empty()) {
    def_defaults_.resize(def_params_.size());
    if (def_defaults_.back().empty()) def_defaults_.back() = "lit:" + prim_.val.text;
    return;
  }
  if (!prim_.active || prim_.val.kind != Kind::name) return;
  const std::string q = detail::canonical(prim_.val.text);
  if (q.find('.') == std::string::npos || !(modules_.count(q) || modules_.count(q.substr(0, q.find('.'))))) return;
  def_defaults_.resize(def_params_.size());
  if (def_defaults_.back().empty()) def_defaults_.back() = "ref:" + q;
}

void Analyzer::note_def_default(std::string_view value) {
  // Inside `Path(`: only its first argument, the first thing in it.
  const bool in_path = default_in_path_ && frames_.size() == 3 && frames_.back().args.empty() &&
                       frames_.back().cur.kind == Kind::none;
  default_in_path_ = false;
  const bool plain = default_next_ && frames_.size() == 2;
  if (!(in_path || plain) || header_ != Header::def_ || def_params_.empty()) return;
  def_defaults_.resize(def_params_.size());
  append_capped(def_defaults_.back(), value, kMaxSymbolText);
}

void Analyzer::lambda_token(const Token& t) {
  if (lambda_state_ != 1) return;
  if (t.kind == TokKind::name && frames_.size() == lambda_depth_) {
    if (lambda_params_.size() < 32) {
      if (kwargs_next_) lambda_kwargs_ = lambda_params_.size();
      lambda_params_.emplace_back(t.text);
    }
    kwargs_next_ = false;
    return;
  }
  if (t.kind == TokKind::op && frames_.size() == lambda_depth_) kwargs_next_ = t.text == "**";
  if (t.kind != TokKind::op || t.text != ":" || frames_.size() != lambda_depth_) return;
  lambda_state_ = 2;
  if (!lambda_fn_.empty() && params_of_.size() < kMaxSymbols) {
    params_of_[lambda_fn_] = lambda_params_;
    if (lambda_kwargs_ != kNoKwargs) kwargs_of_[lambda_fn_] = lambda_kwargs_;
  }
  for (size_t i = 0; i < lambda_params_.size(); ++i) bind_param(i, lambda_params_[i], {});
}

void Analyzer::bind_param(size_t i, const std::string& name, const std::string& path_default) {
  ArgInfo p{{}, path_default.empty() ? Kind::name : Kind::string, path_default.empty() ? name : path_default, true};
  p.params = 1u << i;
  mark_flow(p, system_path_flow(path_default), stmt_line_);
  bind(name, p);
}

void Analyzer::end_lambda() {
  if (lambda_state_ == 0) return;
  for (const auto& p : lambda_params_) symbols_.erase(p);
  // `send = lambda d: ...`: send is a function of the file's own from now on.
  if (lambda_state_ == 2 && !lambda_fn_.empty() && targets_.size() == 1 && "local:" + targets_[0] == lambda_fn_)
    bind(targets_[0], ArgInfo{{}, Kind::name, lambda_fn_, true});
  lambda_state_ = 0;
  lambda_params_.clear();
  lambda_fn_.clear();
  lambda_kwargs_ = kNoKwargs;
}

void Analyzer::bind_params(const Block& b) {
  if (b.kind != BlockKind::function || b.params.empty()) return;
  if (params_of_.size() < kMaxSymbols) params_of_[b.name] = b.params;
  if (b.kwargs != kNoKwargs && kwargs_of_.size() < kMaxSymbols) kwargs_of_[b.name] = b.kwargs;
  for (size_t i = 0; i < b.params.size() && i < 32; ++i) {
    // A path default (path="/etc/os-release") is what a call without that argument reads. Only
    // paths: any other constant would read as a piece of assembled code (stmt="pass").
    const bool def = i < b.defaults.size() && !b.defaults[i].empty() &&
                     (b.defaults[i][0] == '/' || b.defaults[i][0] == '~');
    // A function of the file's as the default (cat=_cat): called through the parameter (or the
    // attribute it is stored in), it is that function unless the caller gives another.
    // So is a module's function (runner=subprocess.run).
    if (i < b.defaults.size() && (b.defaults[i].starts_with("local:") || b.defaults[i].starts_with("ref:"))) {
      const std::string_view fn_name = b.defaults[i].starts_with("ref:") ? std::string_view(b.defaults[i]).substr(4)
                                                                          : std::string_view(b.defaults[i]);
      ArgInfo fn{{}, Kind::name, std::string(fn_name), true};
      fn.params = 1u << i;
      bind(b.params[i], fn);
      continue;
    }
    if (i < b.defaults.size() && b.defaults[i].starts_with("lit:")) {
      ArgInfo lit{{}, Kind::literal, b.defaults[i].substr(4)};
      lit.params = 1u << i;
      bind(b.params[i], lit);
      continue;
    }
    // `target: ShimTarget` of the file's own class: an object of it, whose attributes are the
    // class's (a dataclass's field defaults) unless the caller's object says otherwise.
    if (!def && i < b.classes.size() && !b.classes[i].empty()) {
      ArgInfo obj{{}, Kind::call, b.classes[i] + "()", true};
      obj.params = 1u << i;
      bind(b.params[i], obj);
      continue;
    }
    bind_param(i, b.params[i], def ? b.defaults[i] : std::string());
  }
}

void Analyzer::forget_params(const Block& b) {
  if (b.kind != BlockKind::function) return;
  for (const auto& p : b.params) symbols_.erase(p);
}

}  // namespace detail
}  // namespace sandboxrun::assess
