// Data flow: which values carry the host's data (a system file's contents, secrets, the whole
// environment), so that rules can rate where it goes (`flows:` in an argument condition) instead
// of which calls a file happens to contain. Sources are marked here; values carry the marks
// through the same paths as everything else they hold (analyzer_values.cpp: operands,
// containers, f-strings, calls, subscripts; analyzer.cpp: names and returns).
#include <algorithm>
#include <array>
#include <bit>

#include "analyzer_impl.hpp"
#include "internal.hpp"

namespace sandboxrun::assess {

uint8_t flow_named(std::string_view name) noexcept {
  if (name == "host") return flow_host;
  if (name == "secret") return flow_secret;
  if (name == "environ") return flow_environ;
  return 0;
}

uint8_t flow_of_path(std::string_view path) noexcept {
  // Credentials wherever they live: in any home (~, /home/NAME, /root) or the system's.
  static constexpr std::array<std::string_view, 22> kSecrets = {
      "/etc/shadow", "/etc/gshadow", "/etc/security/opasswd", "/etc/ssl/private", ".ssh/", "id_rsa", "id_ed25519",
      "id_ecdsa", "id_dsa", ".aws/credentials", ".netrc", ".gnupg", ".docker/config.json", ".kube/config",
      ".git-credentials", ".pgpass", "Login Data", "cookies.sqlite", "key4.db", "logins.json", ".password-store",
      ".config/gcloud"};
  for (const auto s : kSecrets)
    if (path.find(s) != std::string_view::npos) return flow_secret;
  // The host's own files: system configuration and the account database, the kernel's views of
  // the machine, logs, and homes that are not the program's (`~` is its own).
  static constexpr std::array<std::string_view, 8> kHost = {"/etc/", "/proc/", "/sys/", "/boot/",
                                                            "/var/log/", "/root/", "/home/", "/var/mail/"};
  for (const auto h : kHost)
    if (path.starts_with(h) || path == h.substr(0, h.size() - 1)) return flow_host;
  if (path == "/root" || path == "/etc/passwd") return flow_host;
  return 0;
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

namespace {

// Each item of `text` that starts with a piece that is no constant ("{}/doc") starts at `base`.
std::string rebased(std::string_view text, std::string_view base) {
  const std::string b = has_alternatives(base) ? as_group(base) : std::string(base);
  std::string out;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find('\x1f', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    if (start) out += '\x1f';
    if (item.starts_with("{}")) {
      out += b;
      item.remove_prefix(2);
    }
    out += item;
    if (out.size() > kMaxText) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

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
  if ((qual == "pickle.dumps" || qual == "marshal.dumps" || qual == "dill.dumps" || qual == "cloudpickle.dumps") &&
      !args.empty() && args[0].kind != Kind::string && args[0].dynamic && !args[0].decoded) {
    mark_flow(value, flow_own, line);
    own_serialized_ = true;
    return;
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
  // A path read by a method of its own (p.read_text(), root.glob("*.md")), whatever p is.
  const std::string_view m = qual.substr(qual.rfind('.') + 1);
  const bool path_method = qual.starts_with("pathlib.Path().") || m == "read_text" || m == "read_bytes" ||
                           m == "rglob" || m == "iterdir" || (m == "glob" && qual != "glob.glob");
  if (!path_method && !reads_path(qual)) return;
  if (path_method) {
    if (m != "read_text" && m != "read_bytes" && m != "open" && m != "iterdir" && m != "glob" && m != "rglob") return;
    if (m == "open" && !reading_mode(args, 1)) return;
    // A receiver that is no path constant (a name, a loop's item): what it carries, and which
    // parameter names it.
    if (!qual.starts_with("pathlib.Path().")) {
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
  if (!(f.callee.flows & (flow_host | flow_secret)) || f.receiver.empty()) return;
  const std::string_view m = qual.substr(qual.rfind('.') + 1);
  if (m != "unlink" && m != "rmdir" && m != "write_text" && m != "write_bytes" && m != "rename" && m != "replace" &&
      m != "chmod")
    return;
  std::vector<ArgInfo> with_self;
  with_self.reserve(f.args.size() + 1);
  ArgInfo self{{}, Kind::expr, {}, true};
  carry_flow(self, f.callee);
  with_self.push_back(std::move(self));
  with_self.insert(with_self.end(), f.args.begin(), f.args.end());
  sink_.on_call(CallEvent{"pathlib.Path()." + std::string(m), f.line, with_self, false, false, depth_ > 0});
}

void Analyzer::mutate_receiver(const Frame& f) {
  ArgInfo in;
  for (const auto& a : f.args) carry_flow(in, a);
  if (!in.flows && !in.params && !in.path_params) return;
  const std::string_view q = f.callee.text;
  const std::string_view m = q.substr(q.rfind('.') + 1);
  static constexpr std::array<std::string_view, 19> kMutators = {
      "append",      "extend",      "add",         "update",         "insert",     "write",    "writelines",
      "appendleft",  "put",         "setdefault",  "set_content",    "set_payload", "attach",  "add_attachment",
      "add_header",  "writerow",    "writerows",   "writestr",       "push"};
  if (std::find(kMutators.begin(), kMutators.end(), m) == kMutators.end()) return;
  taint_name(f.receiver, in);
  if ((m == "write" || m == "writelines" || m == "writerow" || m == "writerows") && in.flows) note_written(in.flows);
}

namespace {

// What a summary keeps of a call: its first arguments, their text cut short (the rules that a
// summary's calls meet again ask where data goes; a replayed call must stay cheap).
ParamCall param_call(const std::string& qual, const std::vector<ArgInfo>& args, uint32_t line) {
  ParamCall c{qual, line, {}};
  for (size_t i = 0; i < args.size() && i < kMaxParamCallArgs; ++i) {
    c.args.push_back(args[i]);
    if (c.args.back().text.size() > kMaxParamCallText) c.args.back().text.resize(kMaxParamCallText);
  }
  return c;
}

}  // namespace

void Analyzer::note_def_param_op(std::string_view op) {
  if (op == "(" && frames_.size() == 1) param_next_ = true;
  else param_next_ = frames_.size() == 2 && (op == "," || op == "*" || op == "**");
  if (frames_.size() == 2) kwargs_next_ = op == "**";
  if (frames_.size() == 2) default_next_ = op == "=" && !def_params_.empty();
}

void Analyzer::note_def_default(std::string_view value) {
  if (!default_next_ || header_ != Header::def_ || frames_.size() != 2 || def_params_.empty()) return;
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
    bind_param(i, b.params[i], def ? b.defaults[i] : std::string());
  }
}

void Analyzer::forget_params(const Block& b) {
  if (b.kind != BlockKind::function) return;
  for (const auto& p : b.params) symbols_.erase(p);
}

void Analyzer::note_param_call(const std::string& qual, const std::vector<ArgInfo>& args, uint32_t line) {
  if (std::none_of(args.begin(), args.end(), [](const ArgInfo& a) { return (a.params | a.path_params) != 0; })) return;
  // The innermost function: a lambda being read, else the def around the call.
  const std::string* fn = lambda_state_ == 2 && !lambda_fn_.empty() ? &lambda_fn_ : nullptr;
  for (auto it = blocks_.rbegin(); !fn && it != blocks_.rend(); ++it)
    if (it->kind == BlockKind::function) fn = &it->name;
  if (!fn || (summaries_.size() >= kMaxSymbols && !summaries_.count(*fn))) return;
  auto& calls = summaries_[*fn];
  if (calls.size() < kMaxParamCalls) calls.push_back(param_call(qual, args, line));
}

void Analyzer::apply_summary(std::string_view qual, const Frame& f, ArgInfo* ret) {
  // Which function, and what its parameter i is here: obj.method(x) and self.method(x) give
  // the receiver as parameter 0.
  const auto own = own_call(qual);
  if (!own) return;
  const std::string& fn = own->name;
  const ArgInfo* receiver = own->receiver ? &f.callee : nullptr;
  const auto names = params_of_.find(fn);
  if (names == params_of_.end()) return;
  std::vector<const ArgInfo*> given(names->second.size(), nullptr);
  size_t next = 0;
  if (receiver && !given.empty()) given[next++] = receiver;
  // Keywords no parameter is named for go to `**kwargs`, together.
  const auto kwargs = kwargs_of_.find(fn);
  ArgInfo collected;
  for (const auto& a : f.args) {
    if (a.keyword.empty()) {
      // At the `**kwargs` slot: `f(**fields)`, whose keywords it collects.
      if (kwargs != kwargs_of_.end() && next == kwargs->second) carry_flow(collected, a);
      else if (next < given.size()) given[next++] = &a;
      continue;
    }
    bool named = false;
    for (size_t i = 0; i < names->second.size(); ++i)
      if (names->second[i] == a.keyword) {
        given[i] = &a;
        named = true;
      }
    if (!named && kwargs != kwargs_of_.end()) carry_flow(collected, a);
  }
  if (kwargs != kwargs_of_.end() && kwargs->second < given.size() &&
      (collected.flows || collected.params || collected.path_params))
    given[kwargs->second] = &collected;
  // Only a call that hands on host data, parameters of its own, or a host path changes anything:
  // the others (nearly every call) stop here.
  // An absolute path given as a constant: the calls the function makes with that parameter are
  // read again with the path in its place (def purge(p): shutil.rmtree(p) ... purge("/usr/lib")).
  auto absolute = [](const ArgInfo* g) {
    return g && !g->text.empty() && (g->kind == Kind::string || g->kind == Kind::container || g->kind == Kind::expr) &&
           (g->text[0] == '/' || g->text[0] == '~' || (has_alternatives(g->text) && g->text.find('/') != std::string::npos));
  };
  const bool relevant = std::any_of(given.begin(), given.end(), [&](const ArgInfo* g) {
    return g && (g->flows || g->params || g->path_params || path_flows(*g) || absolute(g));
  });
  if (!relevant) {
    if (ret) ret->params = ret->path_params = 0;  // the callee's parameters mean nothing here
    return;
  }
  // A call that gives the function what an earlier one gave it (by kind, not by value) meets its
  // calls again with the same result: once per function and kind of arguments is enough.
  std::string seen = fn;
  for (const ArgInfo* g : given) {
    seen += '\x1f';
    if (!g) continue;
    seen += std::to_string(g->flows) + ',' + std::to_string(g->params) + ',' + std::to_string(g->path_params) + ',' +
            std::to_string(path_flows(*g));
    if (absolute(g)) seen += g->text.substr(0, kMaxParamCallText);
  }
  const bool replayed = applied_.count(seen) != 0;
  if (!replayed && applied_.size() < kMaxSymbols) applied_.insert(seen);
  // What a value built from the callee's parameters is here.
  auto here = [&](const ArgInfo& v) {
    ArgInfo r;
    for (size_t i = 0; i < given.size() && i < 32; ++i) {
      if (!given[i]) continue;
      if ((v.params >> i) & 1u) carry_flow(r, *given[i]);
      // A file the function reads, named here: what it holds is host data when the path is.
      if ((v.path_params >> i) & 1u) {
        mark_flow(r, path_flows(*given[i]), f.line);
        r.path_params |= given[i]->params;
      }
    }
    return r;
  };
  if (ret && (ret->params || ret->path_params)) {
    const ArgInfo r = here(*ret);
    // `def under(root): return os.path.join(root, "doc")` called with "/usr": the path it
    // builds starts there (each item of a list it builds, too).
    if (std::has_single_bit(ret->params) && !ret->path_params) {
      const size_t i = static_cast<size_t>(std::countr_zero(ret->params));
      if (i < given.size() && absolute(given[i]) && given[i]->kind != Kind::container)
        ret->text = rebased(ret->text, given[i]->text);
    }
    ret->params = ret->path_params = 0;
    carry_flow(*ret, r);
  }
  const auto calls = summaries_.find(fn);
  if (calls == summaries_.end() || replayed) return;
  // By index, each entry copied: a function calling itself adds to the summary being read.
  const size_t n = calls->second.size();
  for (size_t k = 0; k < n; ++k) {
    ParamCall c = summaries_.find(fn)->second[k];
    std::vector<ArgInfo>& args = c.args;
    bool flows = false;
    for (auto& a : args) {
      // The parameter itself, given an absolute path here: the path stands in its place.
      if (is_name_kind(a.kind) && std::has_single_bit(a.params) && !a.path_params) {
        const size_t i = static_cast<size_t>(std::countr_zero(a.params));
        if (i < given.size() && absolute(given[i]) && given[i]->kind != Kind::name) {
          std::string kw = std::move(a.keyword);
          a = *given[i];
          a.keyword = std::move(kw);
          flows = true;
          continue;
        }
      }
      // A path built on the parameter (os.path.join(prefix, "man")): built on that path here.
      if (std::has_single_bit(a.params) && !a.path_params && a.text.starts_with("{}") &&
          (a.kind == Kind::string || a.kind == Kind::container)) {
        const size_t i = static_cast<size_t>(std::countr_zero(a.params));
        if (i < given.size() && absolute(given[i]) && given[i]->kind != Kind::container) {
          a.text = rebased(a.text, given[i]->text);
          flows = true;
        }
      }
      const ArgInfo r = here(a);
      a.params = a.path_params = 0;
      carry_flow(a, r);
      flows |= a.flows != 0;
    }
    if (flows) sink_.on_call(CallEvent{c.qual, c.line, args, false, false, depth_ > 0});
    note_param_call(c.qual, args, c.line);  // a function that passes its own parameters on
  }
}

}  // namespace detail
}  // namespace sandboxrun::assess
