// Calls: how a finished call is reported, what it tells the loops and functions around it, and
// the value it returns (string methods, imports, getattr, namespaces, paths, decoders).
#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <optional>
#include <string>
#include <vector>

#include "analyzer_impl.hpp"
#include "internal.hpp"

namespace sandboxrun::assess::detail {

namespace {

// Text that names data from outside the program: its command line, stdin, the environment, a
// request or a response.
bool names_outside_input(std::string_view text) {
  for (std::string_view w :
       {"argv", "stdin", "input(", "environ", "getenv", "recv", "request", "urlopen", "response", "makefile", "sock"})
    if (text.find(w) != std::string_view::npos) return true;
  return false;
}

// pathlib methods: on a path held as a string they are reported as calls of
// pathlib.Path().METHOD with the path as argument 0, so path rules read them like open().
bool is_path_method(std::string_view m) {
  static constexpr std::array<std::string_view, 20> names = {
      "write_text", "write_bytes", "read_text", "read_bytes", "open", "touch", "unlink", "mkdir", "rmdir",
      "chmod", "rename", "replace", "symlink_to", "hardlink_to", "iterdir", "glob", "rglob", "walk", "expanduser", "resolve"};
  return std::find(names.begin(), names.end(), m) != names.end();
}

// Calls whose result is their arguments' path text: the path keeps flowing to the call that
// uses it (open(os.path.join(home, ".ssh", "authorized_keys"), "a")).
bool is_path_builder(std::string_view q) {
  static constexpr std::array<std::string_view, 14> names = {
      "os.path.join", "os.path.expanduser", "os.path.expandvars", "os.path.abspath", "os.path.realpath",
      "os.path.normpath", "os.fspath", "str", "pathlib.Path", "pathlib.PurePath", "pathlib.PosixPath",
      "pathlib.Path.home", "os.path.dirname", "pathlib.Path.cwd"};
  return std::find(names.begin(), names.end(), q) != names.end();
}

std::optional<uint32_t> parse_int(std::string_view s) {
  uint32_t v = 0;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

void Analyzer::report_call(const std::string& qual, const std::vector<ArgInfo>& args, uint32_t line) {
  check_secret_use(qual, args, line);
  note_wait(qual);
  // A call whose rules ask about endless loops waits in its loop or function block.
  Block* loop = sink_.loop_sensitive(qual) ? candidate() : nullptr;
  if (loop && loop->pending.size() < kMaxPending) {
    loop->pending.push_back(Deferred{qual, line, args, depth_ > 0});
  } else {
    const bool endless = loop && loop->header_unbounded;
    sink_.on_call(CallEvent{qual, line, args, endless, false, depth_ > 0, endless && loop->waits});
  }
}

bool Analyzer::own_alternatives(std::string_view text) const {
  return has_alternatives(text) && !any_alternative(text, [](std::string_view one) {
           return !one.starts_with("local:") && !(one.starts_with("self.") && is_identifier(one.substr(5)));
         });
}

ArgInfo Analyzer::close_call(Frame& f) {
  const bool decoded_args = any_decoded(f.args);
  if (f.callee.kind == Kind::string) return string_method_value(f, decoded_args);
  // One of the file's own functions, which one chosen at run time (see own_function_item): each.
  // Each is a call read again: a budget per file keeps a file of dispatches from costing each
  // of them eight times over (6 MB of them: 1.2 s unbounded).
  if (f.callee.kind == Kind::expr && alternative_calls_ < kMaxAlternativeCalls && own_alternatives(f.callee.text)) {
    ++alternative_calls_;
    ArgInfo merged{{}, Kind::expr, {}, true, false, decoded_args};
    const std::string alts = f.callee.text;
    any_alternative(alts, [&](std::string_view name) {
      Frame one = f;
      one.callee = ArgInfo{{}, Kind::name, std::string(name), true};
      carry_flow(merged, close_call(one));
      return false;  // every one
    });
    return merged;
  }
  if (!is_name_kind(f.callee.kind)) return ArgInfo{{}, Kind::expr, {}, true, false, decoded_args};

  const std::string qual_text = detail::canonical(f.callee.text);
  // Compared as a view: GCC 12's std::string == "literal" runs memcmp over the shorter length
  // instead of comparing sizes first, and this chain of names runs for every call.
  const std::string_view qual = qual_text;
  note_control_flow(qual, f.args);
  // Before report_call: an attrgetter called is a reference, not a call the rules rate.
  if (qual.starts_with(kGetterOf)) return getter_call_value(qual_text, f.args, f.line);
  if (qual == "timeit.timeit" || qual == "timeit.repeat" || qual == "timeit.Timer") own_benchmark(f.args);
  note_own_unpickle(qual, f);
  report_call(qual_text, f.args, f.line);
  note_param_call(qual_text, f.args, f.line);
  note_copy(qual, f.args);
  note_arg_default(qual, f.args);
  run_callable_argument(qual, f);
  path_method_of_value(f, qual);
  if (const ArgInfo* v = own_return_value(qual_text, f.args, f.line)) {
    ArgInfo r = *v;
    apply_summary(qual, f, &r);
    carry_decorated(qual, r);
    return r;
  }
  apply_summary(qual, f, nullptr);
  if (is_path_builder(qual)) {
    if (auto p = path_value(qual, f.args, decoded_args)) {
      mark_flow(*p, system_path_flow(p->text), f.line);
      return std::move(*p);
    }
  }
  ArgInfo v = named_call_value(f, qual_text, decoded_args);
  mark_read_source(qual, f.args, v, f.line, &f.callee);
  carry_decorated(qual, v);
  return v;
}

void Analyzer::own_benchmark(std::vector<ArgInfo>& args) const {
  // A setup that imports the file itself (`import __main__ as z`, `from __main__ import fn`):
  // the statement built in the file times the file's own code.
  bool setup_main = false;
  // `globals={name: fn}` / `globals={**TABLE, "data": d}`: a namespace of its own, written as a
  // dict, for a statement that calls a name (f"{name}(data)", whose unknown field leaves "(data)"):
  // the functions it times.
  bool own_namespace = false;
  for (size_t i = 0, pos = 0; i < args.size(); ++i) {
    const bool setup = args[i].keyword == "setup" || (args[i].keyword.empty() && pos++ == 1);
    if (setup && args[i].kind == Kind::string && args[i].text.find("__main__") != std::string::npos &&
        args[i].text.find("import") != std::string::npos)
      setup_main = true;
    own_namespace = own_namespace || (args[i].keyword == "globals" && args[i].kind == Kind::container);
  }
  for (size_t i = 0, pos = 0; i < args.size(); ++i) {
    ArgInfo& a = args[i];
    const bool positional = a.keyword.empty() && pos++ < 2;
    if (!positional && a.keyword != "stmt" && a.keyword != "setup") continue;
    // A string built here, or one of several constants (a loop over "fib(n)", "sorted(d)").
    const bool alternatives = a.kind == Kind::expr && has_alternatives(a.text);
    if ((a.kind != Kind::string || !a.dynamic) && !alternatives) continue;
    if (a.decoded) continue;
    // Each value the statement stands for (f"{name}()" over a list of the file's function names).
    const bool other = any_alternative(a.text, [&](std::string_view t) {
      while (!t.empty() && (t.front() == ' ' || t.front() == '\n')) t.remove_prefix(1);
      size_t n = 0;
      while (n < t.size() && (std::isalnum(static_cast<unsigned char>(t[n])) || t[n] == '_')) ++n;
      const bool own_call = n > 0 && n < t.size() && t[n] == '(' && resolve(t.substr(0, n)).text.starts_with("local:");
      return !(own_call || t.starts_with("from __main__ import ") || (own_namespace && t.starts_with("(")));
    });
    if (!(!other || setup_main || a.text.starts_with("__main__."))) continue;
    // Each value marked, as the rules test each one.
    std::string marked;
    any_alternative(a.text, [&](std::string_view t) {
      if (!marked.empty()) marked += kAlternative;
      marked.append("local:").append(t);
      return false;
    });
    a.text = std::move(marked);
  }
}

ArgInfo Analyzer::string_method_value(Frame& f, bool decoded_args) {
  ArgInfo r = std::move(f.callee);
  if (is_path_method(f.method)) return path_method_value(std::move(r), f, decoded_args);
  const std::string_view method = f.method;
  if (method == "join") {
    fold_join(r, f.args, f.line);
  } else if (method != "decode" && method != "encode" && method != "strip" && method != "lower" &&
             method != "upper") {
    r.dynamic = true;
  }
  r.decoded |= decoded_args;
  return r;
}

ArgInfo Analyzer::path_method_value(ArgInfo path, const Frame& f, bool decoded_args) {
  const std::string_view method = f.method;
  std::vector<ArgInfo> with_path;
  with_path.reserve(f.args.size() + 1);
  with_path.push_back(path);
  with_path.back().keyword.clear();
  with_path.insert(with_path.end(), f.args.begin(), f.args.end());
  const std::string qual = "pathlib.Path()." + f.method;
  sink_.on_call(CallEvent{qual, f.line, with_path, false, false, depth_ > 0});
  if (method == "expanduser" || method == "resolve") return path;
  ArgInfo v{{}, Kind::call, qual + "()", true, false, decoded_args};
  mark_read_source(qual, with_path, v, f.line);
  return v;
}

void Analyzer::fold_join(ArgInfo& sep, const std::vector<ArgInfo>& args, uint32_t line) {
  // "".join(reversed(s)): a string put together backwards, as s[::-1] is.
  if (!args.empty() && args[0].kind == Kind::call && args[0].text == "reversed()") {
    sink_.on_detector(Detector::reversed_string, line, "join(reversed())");
    sep.folded = true;
    sep.dynamic = true;
    return;
  }
  // "".join(s) of a constant string (reversed("lave") folds to one) is that string.
  if (sep.text.empty() && !args.empty() && args[0].kind == Kind::string && !args[0].dynamic) {
    sep.text = args[0].text;
    sep.folded = true;
    sep.dynamic = false;
    return;
  }
  // Joins with short separators only: a long one would multiply text without source.
  if (sep.text.size() <= 16 && !args.empty() && args[0].kind == Kind::container) {
    std::string joined;
    for (char c : args[0].text) {
      if (c == '\x1f') append_capped(joined, sep.text, kMaxText);
      else joined += c;
    }
    sep.text = std::move(joined);
    // Constant pieces put together are folded (hidden text); pieces of which some were added at
    // run time (lines.append(f"... {tok} ...") in a template compiler) are text built from input.
    sep.folded = !args[0].dynamic;
    sep.dynamic = args[0].dynamic;
    return;
  }
  sep.dynamic = true;
}

void Analyzer::note_control_flow(std::string_view qual, const std::vector<ArgInfo>& args) {
  if (header_ == Header::for_ && !header_colon_ &&
      (qual == "itertools.count" || qual == "itertools.cycle" ||
       (qual == "itertools.repeat" && args.size() == 1) || (qual == "iter" && args.size() == 2)))
    header_unbounded_ = true;
  // os._exit is how a forked child ends (`if pid == 0: work(); os._exit(0)`): the parent's loop
  // goes on, so it is no exit of the loop.
  if (qual == "sys.exit" || qual == "exit" || qual == "quit") {
    for (auto& b : blocks_) b.exits = b.exits || b.kind == BlockKind::loop;
  }
  // A function that calls itself in its own body, not under an if, a loop or a handler: a
  // depth-first search that recurses where a condition holds ends with its data.
  if (qual.starts_with("local:") && !blocks_.empty() && blocks_.back().kind == BlockKind::function && !suite_on_line_)
    blocks_.back().recursive = blocks_.back().recursive || blocks_.back().name == qual;
}

ArgInfo Analyzer::getter_call_value(const std::string& qual_text, const std::vector<ArgInfo>& args, uint32_t line) {
  if (args.size() != 1 || !args[0].keyword.empty() || !is_name_kind(args[0].kind)) return ArgInfo{{}, Kind::expr, {}, true};
  ArgInfo v{{}, Kind::name, detail::canonical(args[0].text + "." + qual_text.substr(kGetterOf.size())), true};
  if (v.text.size() > kMaxQual) v.text.resize(kMaxQual);
  sink_.on_reference(v.text, line);
  return v;
}

std::optional<OwnCall> own_call(std::string_view qual) {
  if (qual.starts_with("local:")) {
    const size_t dot = qual.rfind("().");
    if (dot == std::string_view::npos) return OwnCall{std::string(qual), false};
    // obj.method() where obj = local:Cls(): the class's def of that method.
    if (qual.find('.', dot + 3) == std::string_view::npos) return OwnCall{"local:" + std::string(qual.substr(dot + 3)), true};
    return std::nullopt;
  }
  // self.unpack(): a method of the file's own class.
  if (qual.starts_with("self.") || qual.starts_with("cls.")) {
    const size_t dot = qual.find('.');
    if (qual.find('.', dot + 1) == std::string_view::npos) return OwnCall{"local:" + std::string(qual.substr(dot + 1)), true};
  }
  return std::nullopt;
}

std::optional<OwnCall> Analyzer::own_method(std::string_view qual) const {
  if (auto own = own_call(qual)) return own;
  const size_t dot = qual.find('.');
  if (dot == std::string_view::npos || qual.find_first_of(".()[", dot + 1) != std::string_view::npos) return std::nullopt;
  const std::string_view recv = qual.substr(0, dot);
  if (modules_.count(recv)) return std::nullopt;
  if (const auto it = symbols_.find(recv); it != symbols_.end() && !(is_name_kind(it->second.kind) && it->second.text == recv))
    return std::nullopt;
  std::string name = "local:" + std::string(qual.substr(dot + 1));
  if (!params_of_.count(name) || classes_.empty()) return std::nullopt;
  return OwnCall{std::move(name), true};
}

const ArgInfo* Analyzer::own_return_value(const std::string& qual_text, const std::vector<ArgInfo>& args,
                                          uint32_t line) {
  if (qual_text.starts_with("local:")) check_fragments(args, line);  // _lookup("set", "uid")
  if (const auto own = own_method(qual_text))
    if (auto it = returns_.find(own->name + "()"); it != returns_.end()) return &it->second;
  return nullptr;
}

std::optional<ArgInfo> Analyzer::path_value(std::string_view qual, const std::vector<ArgInfo>& args, bool decoded_args) {
  // A piece that is not a constant reads "{}", so that anchored path patterns cannot match
  // a suffix by accident (join(base, "sys") is not "/sys").
  ArgInfo p{{}, Kind::string, {}, false, false, decoded_args};
  bool has_text = qual == "pathlib.Path.home" || qual == "pathlib.Path.cwd";
  if (qual == "pathlib.Path.home") p.text = "~";
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].keyword.empty()) continue;
    if (i > 0 && !p.text.ends_with('/')) append_capped(p.text, "/", kMaxText);
    if (args[i].kind == Kind::string || args[i].kind == Kind::literal) {
      has_text = true;
      append_capped(p.text, args[i].text, kMaxText);
      p.dynamic |= args[i].dynamic;
      p.folded |= args[i].folded;
      continue;
    }
    if (is_name_kind(args[i].kind) && (args[i].text == "os.sep" || args[i].text == "os.path.sep")) {
      has_text = true;  // join(os.sep, "etc"): the root
      append_capped(p.text, "/", kMaxText);
      continue;
    }
    if (args[i].kind == Kind::expr && has_alternatives(args[i].text)) {
      // Path(p) for a loop's p over a list of paths: each of them.
      has_text = true;
      append_capped(p.text, as_group(args[i].text), kMaxText);
    } else {
      append_capped(p.text, "{}", kMaxText);
    }
    p.dynamic |= args[i].dynamic || (args[i].kind != Kind::string && args[i].kind != Kind::literal);
    p.folded |= args[i].folded;
  }
  if (qual == "pathlib.Path.cwd") p.dynamic = true;
  if (has_text) return p;
  return std::nullopt;
}

ArgInfo Analyzer::named_call_value(const Frame& f, const std::string& qual_text, bool decoded_args) {
  const std::string_view qual = qual_text;
  const auto& args = f.args;
  // A method of decoded data still returns it: b64decode(x).decode(), decompress(x).strip().
  ArgInfo r{{}, Kind::call, qual_text, true, false, decoded_args || f.callee.decoded};
  append_capped(r.text, "()", kMaxQual);
  const ArgInfo* a0 = args.empty() ? nullptr : &args[0];
  // bytes([112, 114, ...]): text spelled as character codes, hidden as chr() codes are.
  if ((qual == "bytes" || qual == "bytearray") && a0 && a0->kind == Kind::container && !a0->dynamic &&
      a0->text.find_first_not_of('\x1f') == std::string::npos && !a0->text.empty())
    r.decoded = true;

  // os.getenv("ROOT", "/srv"): the path it falls back on, or what the environment says.
  if ((qual == "os.getenv" || qual == "os.environ.get") && args.size() == 2 && args[1].keyword.empty() &&
      args[1].kind == Kind::string && !args[1].decoded && absolute_path(args[1].text) &&
      !has_alternatives(args[1].text)) {
    r.kind = Kind::expr;
    r.text = "{}";
    r.text += kAlternative;
    append_capped(r.text, args[1].text, kMaxText);
    return r;
  }
  // The calls below that find no more than the call itself return r.
  if (qual == "__import__" || qual == "importlib.import_module" || qual == "importlib.__import__")
    return import_value(qual, a0, f.line).value_or(std::move(r));
  if (qual == "getattr" && args.size() >= 2) return getattr_value(args, f.line).value_or(std::move(r));
  // partial(requests.post, timeout=15) is requests.post, when it binds keywords only (a bound
  // positional argument would move the others).
  if ((qual == "functools.partial" || qual == "functools.partialmethod") && a0 && is_name_kind(a0->kind) &&
      a0->keyword.empty() && std::all_of(args.begin() + 1, args.end(), [](const ArgInfo& a) { return !a.keyword.empty(); }))
    return ArgInfo{{}, Kind::name, a0->text, true};
  // attrgetter/methodcaller reach an attribute by name like getattr does; an attrgetter of one
  // name carries it to its call: attrgetter("remove")(os) is os.remove.
  if ((qual == "operator.attrgetter" || qual == "operator.methodcaller") && a0)
    return attrgetter_value(qual, args, f.line).value_or(std::move(r));
  if (auto v = namespace_value(qual, args, f.line)) return std::move(*v);
  if (auto v = character_value(qual, a0, f.line)) return std::move(*v);
  if (auto text = detail::decode_constant_call(qual, args)) return decoded_value(qual_text, std::move(*text), f.line);
  // Decoding what the program encoded from its own objects gives them back, not a payload. So
  // is, in a file that pickles its own objects, decoding a parameter (freeze() and thaw()
  // helpers) or what it read back from a file (a cache it stores, a state file): not a constant,
  // nor the network, the host's or the command line's data.
  const bool own = std::any_of(args.begin(), args.end(), [&](const ArgInfo& a) {
    if (a.flows & flow_own) return true;
    if (!own_serialized_ || a.decoded) return false;
    if (a.params != 0) return true;
    return a.kind != Kind::string && !a.folded && (a.flows & ~flow_own) == 0 && !names_outside_input(a.text);
  });
  if (is_decoder(qual) && !own) r.decoded = true;
  // A decoder passed as a value (map(chr, codes), map(bytes.fromhex, parts)) decodes too.
  for (const auto& a : args)
    if (is_name_kind(a.kind) && (a.text == "chr" || is_decoder(a.text))) r.decoded = true;
  read_exec_constant(qual, a0, f.line);
  return r;
}

std::optional<ArgInfo> Analyzer::import_value(std::string_view qual, const ArgInfo* a0, uint32_t line) {
  if (a0 && a0->kind == Kind::string && !a0->dynamic) {
    sink_.on_import(a0->text, line);
    if (a0->folded || a0->decoded) sink_.on_detector(Detector::dynamic_import, line, a0->text);
    std::string mod = a0->text;
    if (qual != "importlib.import_module") mod = mod.substr(0, mod.find('.'));
    if (modules_.size() < kMaxSymbols) modules_.insert(mod);
    return ArgInfo{{}, Kind::name, std::move(mod), true};
  }
  sink_.on_detector(Detector::dynamic_import, line, "non-constant module name");
  return std::nullopt;
}

std::optional<ArgInfo> Analyzer::getattr_value(const std::vector<ArgInfo>& args, uint32_t line) {
  const ArgInfo& n = args[1];
  if (n.kind == Kind::string && !n.dynamic) {
    // getattr(self, "cmd_" + verb): dispatch to the object's own methods, not obfuscation.
    const bool own = args[0].text == "self" || args[0].text == "cls";
    if ((n.folded || n.decoded) && !own) computed_name(n.text, line);
    if (is_name_kind(args[0].kind)) {
      ArgInfo v{{}, Kind::name, detail::canonical(args[0].text + "." + n.text), true};
      if (v.text.size() > kMaxQual) v.text.resize(kMaxQual);
      sink_.on_reference(v.text, line);
      return v;
    }
  } else {
    sink_.on_detector(Detector::getattr_dynamic, line, {});
  }
  return std::nullopt;
}

std::optional<ArgInfo> Analyzer::attrgetter_value(std::string_view qual, const std::vector<ArgInfo>& args,
                                                  uint32_t line) {
  const ArgInfo* a0 = &args[0];
  if (a0->kind == Kind::string && !a0->dynamic) {
    if (a0->folded || a0->decoded) computed_name(a0->text, line);
    if (qual == "operator.attrgetter" && args.size() == 1 && a0->keyword.empty() && !a0->text.empty() &&
        a0->text.size() <= kMaxQual && a0->text.find_first_of("()[] ") == std::string::npos)
      return ArgInfo{{}, Kind::call, std::string(kGetterOf) + a0->text, true};
  } else {
    sink_.on_detector(Detector::getattr_dynamic, line, {});
  }
  return std::nullopt;
}

std::optional<ArgInfo> Analyzer::namespace_value(std::string_view qual, const std::vector<ArgInfo>& args,
                                                 uint32_t line) {
  const ArgInfo* a0 = args.empty() ? nullptr : &args[0];
  if ((qual == "globals" || qual == "locals" || qual == "vars") && args.empty())
    return ArgInfo{{}, Kind::call, "globals()", true};
  // vars(module) is the module's namespace: a subscript of it reads an attribute.
  if (qual == "vars" && a0 && is_name_kind(a0->kind) && modules_.count(detail::canonical(a0->text)))
    return ArgInfo{{}, Kind::name, detail::canonical(a0->text), true};
  if (qual == "vars" && a0 && is_name_kind(a0->kind) &&
      (a0->text == "builtins" || a0->text == "__builtins__" || a0->text == "__builtin__")) {
    sink_.on_detector(Detector::builtins_dict, line, "vars(builtins)");
    return ArgInfo{{}, Kind::name, "builtins", true};
  }
  return std::nullopt;
}

std::optional<ArgInfo> Analyzer::character_value(std::string_view qual, const ArgInfo* a0, uint32_t line) {
  if (qual == "reversed" && a0 && a0->kind == Kind::string && !a0->dynamic && a0->keyword.empty()) {
    sink_.on_detector(Detector::reversed_string, line, "reversed()");
    return ArgInfo{{}, Kind::string, std::string(a0->text.rbegin(), a0->text.rend()), false, true, a0->decoded};
  }
  if (qual == "chr" && a0 && a0->kind == Kind::literal) {
    if (auto v = parse_int(a0->text); v && *v < 0x80) return ArgInfo{{}, Kind::string, std::string(1, static_cast<char>(*v)), false, true};
  }
  // Characters from computed codes ("".join(chr(c) for c in codes)): text no reader can see.
  if (qual == "chr") return ArgInfo{{}, Kind::string, {}, true, true, true};
  return std::nullopt;
}

ArgInfo Analyzer::decoded_value(const std::string& qual_text, std::string text, uint32_t line) {
  if (looks_like_text(text)) {
    sink_.on_detector(Detector::decoded_payload, line, qual_text);
    enqueue(text, line, depth_ + 1);
  }
  return ArgInfo{{}, Kind::string, std::move(text), false, true, true};
}

void Analyzer::read_exec_constant(std::string_view qual, const ArgInfo* a0, uint32_t line) {
  const bool const0 = a0 && a0->kind == Kind::string && !a0->dynamic;
  // Decoded text was queued when it was decoded.
  if ((qual == "exec" || qual == "eval" || qual == "compile") && const0 && !a0->decoded && a0->keyword.empty())
    enqueue(a0->text, line, depth_ + 1);
}

}  // namespace sandboxrun::assess::detail
