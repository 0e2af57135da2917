// The file's own functions: what they give back (a `return` statement's value, a generator's
// yields, the body of `NAME = lambda ...:`, kept by function in returns_) and what they do with
// their parameters (summaries_), met again at each call with what the call gives them.
#include <algorithm>
#include <bit>
#include <string>
#include <vector>

#include "analyzer_impl.hpp"
#include "internal.hpp"

namespace sandboxrun::assess::detail {

namespace {

// A string or a name's values, with no group inside (two of them can be joined as alternatives).
bool plain_text(const ArgInfo& a) {
  return (a.kind == Kind::string || a.kind == Kind::expr) && a.text.find(kGroup) == std::string::npos;
}

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

void Analyzer::run_callable_argument(std::string_view qual, const Frame& f) {
  if (summaries_.empty() || callback_depth_ >= 4) return;
  const std::string_view m = qual.substr(qual.rfind('.') + 1);
  const bool thread = qual == "threading.Thread" || qual == "multiprocessing.Process" || qual == "threading.Timer";
  const bool submit = m == "submit" || m == "to_thread" || m == "apply_async" || m == "run_in_executor" ||
                      m == "start_new_thread" || qual == "map" || m == "map" || m == "imap" || m == "imap_unordered" ||
                      m == "starmap";
  if (!thread && !submit) return;
  Frame call;
  call.kind = FrameKind::call;
  call.line = f.line;
  const ArgInfo* fn = nullptr;
  size_t positional = 0;
  for (const auto& a : f.args) {
    if (thread) {
      if (a.keyword == "target") fn = &a;
      // args=(q, PATTERN): the tuple's items are not kept apart; each parameter gets what it carries.
      else if (a.keyword == "args" || a.keyword == "kwargs") call.args.assign(4, a);
      continue;
    }
    if (!a.keyword.empty()) continue;
    // run_in_executor(None, fn, ...): the executor comes first.
    const size_t fn_at = m == "run_in_executor" ? 1 : 0;
    if (positional == fn_at) fn = &a;
    else if (positional > fn_at) call.args.push_back(a);
    ++positional;
  }
  if (!fn || !is_name_kind(fn->kind) || !own_method(fn->text)) return;
  for (auto& a : call.args) a.keyword.clear();
  call.callee = *fn;
  ++callback_depth_;
  apply_summary(fn->text, call, nullptr);
  --callback_depth_;
}

void Analyzer::carry_decorated(std::string_view qual, ArgInfo& value) const {
  if (decorated_.empty() || !qual.starts_with("local:")) return;
  const auto d = decorated_.find(qual);
  if (d == decorated_.end()) return;
  for (const auto& decorator : d->second) {
    const auto in = inner_.find(decorator);
    if (in == inner_.end()) continue;
    for (const auto& wrapper : in->second)
      if (const auto r = returns_.find(wrapper + "()"); r != returns_.end())
        mark_flow(value, r->second.flows, r->second.flow_line);  // its parameters mean nothing here
  }
}

void Analyzer::note_return(Frame& s) {
  const std::string returned = !return_fn_.empty() ? return_fn_
                               : lambda_state_ == 2 && !lambda_fn_.empty() ? lambda_fn_ + "()"
                                                                           : std::string();
  if (returned.empty() || s.args.empty()) return;
  // `return a, b` / `yield name, uid`: a tuple of what each carries. (A lambda's parameter commas
  // split the statement's value instead: its body is the last piece.)
  ArgInfo tuple;
  if (!return_fn_.empty() && s.args.size() > 1) {
    tuple = container(s.args);
    for (const auto& a : s.args) carry_flow(tuple, a);
  }
  const ArgInfo& v = tuple.kind == Kind::container ? tuple : s.args.back();
  // Only values that carry evidence: a constant, folded or decoded string, data, parameters,
  // and paths from the root or a home, built or listed (`return [join(prefix, d) for d in
  // DIRS]`), which a call's loop or a caller's argument hands on. A later return of a plain
  // computed value does not erase what an earlier one showed.
  const bool path = (v.kind == Kind::string || v.kind == Kind::container || v.kind == Kind::expr) &&
                    names_a_path(v.text);
  if (!((v.kind == Kind::string && (!v.dynamic || v.folded || v.decoded)) || v.decoded || v.flows || v.params ||
        v.path_params || path))
    return;
  if (returns_.size() >= kMaxSymbols && !returns_.count(returned)) return;
  ArgInfo r = v;
  r.keyword.clear();
  if (r.text.size() > kMaxSymbolText) r.text.resize(kMaxSymbolText);
  ArgInfo& slot = returns_[returned];
  if (yields_) {
    // A generator gives each value it yields: the items of a container.
    if (r.kind == Kind::expr && has_alternatives(r.text)) r.text = as_group(r.text);
    r.kind = Kind::container;
    r.dynamic = true;
    if (slot.kind == Kind::container && !slot.text.empty() && slot.text.size() + r.text.size() < kMaxSymbolText)
      r.text = slot.text + '\x1f' + r.text;
  } else if (plain_text(slot) && plain_text(r) && names_a_path(slot.text) && slot.text != r.text &&
             slot.text.size() + r.text.size() < kMaxSymbolText) {
    // `return Path.home()` in one branch, `return Path.home() / name` in another: either.
    r.text = slot.text + kAlternative + r.text;
    r.kind = Kind::expr;
    r.dynamic = true;
  }
  // `return fh.read()` then `except OSError: return "n/a"`: either may come back, so the data
  // an earlier return carried stays with the function.
  carry_flow(r, slot);
  slot = std::move(r);
}

const std::string* Analyzer::enclosing_def() const {
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
    if (it->kind == BlockKind::function) return &it->name;
  return nullptr;
}

void Analyzer::note_param_call(const std::string& qual, const std::vector<ArgInfo>& args, uint32_t line) {
  if (std::none_of(args.begin(), args.end(), [](const ArgInfo& a) { return (a.params | a.path_params) != 0; })) return;
  // The innermost function: a lambda being read, else the def around the call.
  const std::string* fn = lambda_state_ == 2 && !lambda_fn_.empty() ? &lambda_fn_ : enclosing_def();
  if (!fn || (summaries_.size() >= kMaxSymbols && !summaries_.count(*fn))) return;
  auto& calls = summaries_[*fn];
  if (calls.size() < kMaxParamCalls) calls.push_back(param_call(qual, args, line));
}

void Analyzer::note_mutation(const std::string& receiver, const ArgInfo& in) {
  if (!in.flows) return;
  const ArgInfo r = resolve(receiver);
  if (r.kind != Kind::name || r.text != receiver || !std::has_single_bit(r.params)) return;
  const std::string* fn = enclosing_def();
  if (!fn || (mutations_.size() >= kMaxSymbols && !mutations_.count(*fn))) return;
  auto& m = mutations_[*fn];
  if (m.size() < kMaxParamCalls)
    m.push_back(Mutation{static_cast<uint8_t>(std::countr_zero(r.params)), in.flows, in.flow_line});
}

void Analyzer::apply_mutations(const std::string& fn, const Frame& f, bool receiver) {
  const auto m = mutations_.find(fn);
  if (m == mutations_.end() || f.arg_names.empty()) return;
  for (const Mutation& mu : m->second) {
    if (receiver && mu.param == 0) continue;
    const size_t index = mu.param - (receiver ? 1u : 0u);
    for (const auto& [i, name] : f.arg_names) {
      if (i != index) continue;
      ArgInfo in;
      mark_flow(in, mu.flows, mu.line);
      taint_name(name, in);
    }
  }
}

void Analyzer::note_own_unpickle(std::string_view qual, Frame& f) {
  if (!own_serialized_ || f.args.empty() || !std::has_single_bit(f.args[0].params) || (f.args[0].flows & ~flow_own))
    return;
  if (qual != "pickle.loads" && qual != "cPickle.loads" && qual != "_pickle.loads" && qual != "dill.loads" &&
      qual != "cloudpickle.loads")
    return;
  const std::string* fn = enclosing_def();
  if (!fn || (own_unpickles_.size() >= kMaxSymbols && !own_unpickles_.count(*fn))) return;
  auto& list = own_unpickles_[*fn];
  if (list.size() >= kMaxParamCalls) return;
  list.push_back(OwnUnpickle{std::string(qual), static_cast<uint8_t>(std::countr_zero(f.args[0].params))});
  mark_flow(f.args[0], flow_own, f.line);
}

void Analyzer::apply_own_unpickles(const std::string& fn, const std::vector<const ArgInfo*>& given, uint32_t line) {
  const auto it = own_unpickles_.find(fn);
  if (it == own_unpickles_.end()) return;
  for (const OwnUnpickle& u : it->second) {
    if (u.param >= given.size() || !given[u.param] || (given[u.param]->flows & flow_own)) continue;
    report_call(u.qual, {*given[u.param]}, line);
  }
}

void Analyzer::apply_summary(std::string_view qual, const Frame& f, ArgInfo* ret) {
  // Which function, and what its parameter i is here: obj.method(x) and self.method(x) give
  // the receiver as parameter 0.
  const auto own = own_method(qual);
  if (!own) return;
  const std::string& fn = own->name;
  const ArgInfo* receiver = own->receiver && !static_methods_.count(own->name) ? &f.callee : nullptr;
  const auto names = params_of_.find(fn);
  if (names == params_of_.end()) return;
  apply_mutations(fn, f, receiver != nullptr);
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
  apply_own_unpickles(fn, given, f.line);
  // Only a call that hands on host data, parameters of its own, or a host path changes anything:
  // the others (nearly every call) stop here.
  // An absolute path given as a constant: the calls the function makes with that parameter are
  // read again with the path in its place (def purge(p): shutil.rmtree(p) ... purge("/usr/lib")).
  auto absolute = [](const ArgInfo* g) {
    return g && !g->text.empty() && (g->kind == Kind::string || g->kind == Kind::container || g->kind == Kind::expr) &&
           (g->text[0] == '/' || g->text[0] == '~' || (has_alternatives(g->text) && names_a_path(g->text)));
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
    // `session.post(...)` on a parameter the caller gave aiohttp.ClientSession(): that method.
    std::string callee = c.qual;
    if (const size_t dot = callee.find('.'); dot != std::string::npos) {
      const auto& ps = names->second;
      const auto p = std::find(ps.begin(), ps.end(), std::string_view(callee).substr(0, dot));
      const ArgInfo* g = p == ps.end() ? nullptr : given[static_cast<size_t>(p - ps.begin())];
      if (g && is_name_kind(g->kind) && !g->text.empty() && g->text.size() < kMaxQual)
        callee = detail::canonical(g->text + callee.substr(dot));
    }
    if (flows) sink_.on_call(CallEvent{callee, c.line, args, false, false, depth_ > 0});
    note_param_call(callee, args, c.line);  // a function that passes its own parameters on
    // `consume(data)` where consume is a parameter given a function of the file's own
    // (run_job(backup.snapshot, backup.upload)): that function's summary meets the data.
    if (!flows || callback_depth_ >= 4) continue;
    const auto& names_here = names->second;
    const auto pos = std::find(names_here.begin(), names_here.end(), c.qual);
    if (pos == names_here.end()) continue;
    const ArgInfo* cb = given[static_cast<size_t>(pos - names_here.begin())];
    if (!cb || !is_name_kind(cb->kind) || !own_method(cb->text)) continue;
    Frame call;
    call.kind = FrameKind::call;
    call.line = c.line;
    call.callee = *cb;
    call.args = std::move(args);
    ++callback_depth_;
    apply_summary(cb->text, call, nullptr);
    --callback_depth_;
  }
}

}  // namespace sandboxrun::assess::detail
