// Analyzer internals shared by analyzer.cpp (tokens, statements, blocks), analyzer_imports.cpp,
// analyzer_iter.cpp (names bound by loops, comprehensions and classes), analyzer_values.cpp
// (bracket frames and the values that subscripts and containers produce), analyzer_calls.cpp
// (calls and the values they return), analyzer_flows.cpp (where host data and system paths go)
// and analyzer_returns.cpp (the file's own functions: returns and summaries).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "sandboxrun/assess_analyzer.hpp"
#include "assess/assess_tokenizer.hpp"
#include "assess/name_hash.hpp"

namespace sandboxrun::assess::detail {

constexpr size_t kMaxFrames = 256;        // brackets analyzed; deeper ones are only counted
constexpr size_t kMaxArgs = 32;           // arguments kept per call
constexpr size_t kMaxText = 16 * 1024;    // bytes an argument's text may grow to by joining pieces
constexpr size_t kMaxSymbolText = 1024;   // bytes of a string constant kept per name
constexpr size_t kMaxQual = 512;          // bytes of a qualified name
// The value of operator.attrgetter("NAME"): this prefix, then NAME (a call of it reads NAME).
constexpr std::string_view kGetterOf = "operator.attrgetter().";
constexpr size_t kMaxSymbols = 1 << 16;   // names bound per file
constexpr size_t kMaxBlocks = 1024;       // indentation blocks followed
constexpr size_t kMaxImportTokens = 4096; // tokens of one import statement
constexpr size_t kMaxDocBytes = 1 << 20;  // docstring bytes kept for __doc__ analysis

using Kind = ArgInfo::Kind;

enum class FrameKind : uint8_t { statement, call, group, list, subscript, brace, fstring, field };
enum class Header : uint8_t { none, while_, for_, def_, other };

struct Frame {
  FrameKind kind = FrameKind::statement;
  uint32_t line = 0;
  ArgInfo callee;      // call: what is called; subscript: the base
  std::string method;  // call of a method on a string constant ('..'.decode); fstring: its text, fields as "{}"
  std::vector<ArgInfo> args;
  ArgInfo cur;  // the argument being read
  bool after_plus = false;
  bool path_join = false;  // the operator was a Path's `/` (see on_op)
  bool in_spec = false;  // field: after the ':' of a format spec
  std::string sig;       // subscript: its tokens, to recognise [::-1]
  // `A if C else B` where A is a name (a callable chosen by a test): the argument is A.
  uint8_t cond = 0;  // 1: in C, 2: in B (or after `or`)
  ArgInfo cond_then;
  bool flag_chain = false;  // cur is NAME | NAME ...
  uint32_t key_mask = 0;     // brace: which args are a dict's keys (bit i: args[i])
  std::string receiver;      // call of NAME.method: NAME (see Primary::receiver)
  // A comprehension's names, bound when its bracket opened (see prebind_comprehension): what
  // they were bound to before, restored when it closes.
  std::vector<std::pair<std::string, std::optional<ArgInfo>>> comp_saved;
  // call: the positional arguments that were one name each (index in args, the name).
  std::vector<std::pair<uint8_t, std::string>> arg_names;
};

// The items of a list, tuple, set or dict literal (keys: the items, or a dict's keys).
struct Items {
  std::vector<ArgInfo> keys, values;
  bool dict = false;
};

struct Primary {
  bool active = false;
  ArgInfo val;
  std::string raw_name;  // the source spelling when the primary is one bare name
  std::string method;    // attribute read on a string constant
  uint32_t line = 0;
  uint32_t pieces = 0;   // string literals joined implicitly ('a' 'b')
  // NAME.attr: NAME, while the primary is one name and one attribute (a method's receiver).
  std::string receiver{};
  uint8_t attrs = 0;
  std::string item_of{};  // NAME[...]: NAME (an item assignment stores into it)
  std::string first_attr{};
};

// A call whose rules care about loops waits in its innermost loop or function block until
// that block ends and it is known whether the block repeats without end.
struct Deferred {
  std::string qual;
  uint32_t line;
  std::vector<ArgInfo> args;
  bool from_decoded;
};

enum class BlockKind : uint8_t { plain, loop, function };

inline constexpr size_t kNoKwargs = static_cast<size_t>(-1);

struct Block {
  BlockKind kind = BlockKind::plain;
  bool header_unbounded = false;  // loop: `while True:`, `for _ in itertools.count():`
  bool exits = false;             // loop: break/return/exit seen; function: return seen
  bool recursive = false;         // function: calls itself
  bool waits = false;             // loop: waits for input each pass (see CallEvent::waiting_loop)
  std::string name;               // function: its symbol ("local:f"); class body: "local:C"
  bool class_body = false;
  std::vector<Deferred> pending;
  std::vector<std::string> params;  // function: its parameters' names, in order
  size_t kwargs = kNoKwargs;         // which of them is `**kwargs`
  std::vector<std::string> defaults;  // and their string defaults ("" for none)
  std::vector<std::string> classes;   // and the file's own class each is annotated with ("local:C")
};

// A call inside a local function with an argument built from the function's parameters: where
// the function sends what it is given (analyzer_flows.cpp).
// A parameter the function fills with data (def fill(lst): lst.append(open(p).read())).
struct Mutation {
  uint8_t param;
  uint8_t flows;
  uint32_t line;
};

// pickle.loads of a function's parameter, in a file that pickles its own objects (see
// note_own_unpickle).
struct OwnUnpickle {
  std::string qual;
  uint8_t param;
};

struct ParamCall {
  std::string qual;
  uint32_t line;
  std::vector<ArgInfo> args;
};
constexpr size_t kMaxParamCalls = 32;     // per function
constexpr size_t kMaxParamCallArgs = 8;   // arguments kept per call
constexpr size_t kMaxParamCallText = 256; // bytes of each argument's text kept

constexpr size_t kMaxPending = 256;  // deferred calls per block; later ones are reported at once

struct Fragment {
  std::string text;
  uint32_t origin_line;
  uint32_t depth;
};

// Appends up to `cap` bytes in total; false when something was cut.
inline bool append_capped(std::string& dst, std::string_view src, size_t cap) {
  const bool all = dst.size() + src.size() <= cap;
  if (dst.size() < cap) dst.append(src.substr(0, cap - dst.size()));
  return all;
}

inline bool is_name_kind(Kind k) noexcept { return k == Kind::name || k == Kind::call; }

// The file's own function a call reaches: local:f(), obj.m() where obj = local:Cls(), and
// self.m() / cls.m(), whose receiver is the function's parameter 0. `name` is the def's symbol
// ("local:m"), the key of returns_ (with "()"), params_of_ and summaries_.
struct OwnCall {
  std::string name;
  bool receiver = false;
};
std::optional<OwnCall> own_call(std::string_view qual);

// Data flow (analyzer_flows.cpp): `v` now carries host data of kinds `flows`, read at `line`;
// `to` carries what `from` carries too.
void mark_flow(ArgInfo& v, uint8_t flows, uint32_t line);
// The host data a read of this argument's path (or of any of its items or values) gives.
uint8_t path_flows(const ArgInfo& a);
// Whether the source pickles a value that is not a literal: pickle.dumps(obj) (not marshal, whose
// dumps makes code payloads).
// Read before the analysis so that a cache loaded above the function that stores it is known
// to hold the program's own objects.
bool pickles_own_objects(std::string_view source);
void carry_flow(ArgInfo& to, const ArgInfo& from);
// A call whose value is still a path under the path it is given (join, Path, glob, walk, open,
// sorted ...), so that flow_system passes through it.
bool keeps_system_path(std::string_view qual);

class Analyzer {
 public:
  Analyzer(const AnalyzerLimits& limits, EventSink& sink) : limits_(limits), sink_(sink) {}

  void run(std::string_view source);

 private:
  // ---- per text --------------------------------------------------------------------------
  void analyze_text(std::string_view text, uint32_t origin_line, uint32_t depth);

  uint32_t line_of(const Token& t) const noexcept { return origin_line_ ? origin_line_ : t.line; }

  void start_statement();

  // ---- blocks: loops and functions --------------------------------------------------------
  void push_block(Block&& b);

  void pop_block();

  Block* candidate();

  void emit_deferred(const Deferred& d, bool endless, bool waiting);

  // break: leaves the innermost loop. return: leaves every loop up to the function.
  void mark_exit(bool is_return);

  void on_token(const Token& t);

  // ---- names -----------------------------------------------------------------------------
  void on_name(const Token& t, uint32_t line, bool was_dot);

  ArgInfo resolve(std::string_view name) const;

  void on_keyword(std::string_view kw, uint32_t line);
  void comprehension_iterable_end();
  // The primary is os.environ and is iterated: the whole environment is walked, as by .items().
  void report_environ_walk();

  void bind(const std::string& name, const ArgInfo& value);

  // ---- strings -----------------------------------------------------------------------------
  void on_string_token(const Token& t, uint32_t line, bool was_string);

  void emit_string(const std::string& v, uint32_t line) { sink_.on_string(v, line); }

  bool pattern_argument() const;

  // ---- operators ---------------------------------------------------------------------------
  void on_op(const Token& t, uint32_t line);

  void python2_statement(uint32_t line, bool before_name);

  void token_hooks(const Token& t, uint32_t line);

  void on_colon(Frame& top);

  void on_assign(Frame& top);

  void on_header_colon();

  // ---- frames ------------------------------------------------------------------------------
  void push(FrameKind k, uint32_t line);

  void push_call(uint32_t line);

  // The new top frame, or nullptr past kMaxFrames (only counted).
  Frame* push_frame(FrameKind k, uint32_t line);

  // Moves the finished primary into the current argument of the top frame.
  void flush();

  static void to_expr(ArgInfo& a);

  // `class Server(ThreadingMixIn, TCPServer):` binds Server to its base, so that `Server(...)`
  // reads as a call of TCPServer with those arguments.
  void bind_class_base(const std::vector<ArgInfo>& bases);

  static void add_operand(Frame& f, ArgInfo&& v);

  void finish_arg(Frame& f);

  void close_frame();

  static bool any_decoded(const std::vector<ArgInfo>& args);

  static ArgInfo container(std::vector<ArgInfo>& items);

  // The random module or a weak hash making a value the code names as a secret.
  void check_secret_use(std::string_view qual, const std::vector<ArgInfo>& args, uint32_t line);
  void note_wait(std::string_view qual);
  void check_syntax(const Token& t, uint32_t line, bool starts_statement);

  // ---- calls (analyzer_calls.cpp) ----------------------------------------------------------
  void report_call(const std::string& qual, const std::vector<ArgInfo>& args, uint32_t line);
  // A finished call: a method of a string constant, a call of a name (reported to the rules,
  // then valued) or of anything else (an expression); its value.
  ArgInfo close_call(Frame& f);
  // timeit's statement or setup built from the file's own names (f"fn({n})" with fn defined
  // here, "from __main__ import ..."): a benchmark of its own code, read as the callable it is.
  void own_benchmark(std::vector<ArgInfo>& args) const;
  // A method of a string constant: decode/encode/strip/lower/upper keep the value, join folds
  // it, path methods are pathlib calls, any other computes.
  ArgInfo string_method_value(Frame& f, bool decoded_args);
  // 'p'.write_text(...): reported as pathlib.Path().METHOD with the path as argument 0, so path
  // rules read it like open(); expanduser/resolve still return the path.
  ArgInfo path_method_value(ArgInfo path, const Frame& f, bool decoded_args);
  // SEP.join(ARG) in place: folded when ARG is reversed(), a constant or a list literal (short
  // separators only), else computed.
  void fold_join(ArgInfo& sep, const std::vector<ArgInfo>& args, uint32_t line);
  // What a call tells the blocks around it: a `for` over an endless iterator, an exit that
  // leaves the loops, a function that calls itself.
  void note_control_flow(std::string_view qual, const std::vector<ArgInfo>& args);
  // attrgetter("NAME")(obj): obj.NAME, reported as a reference (no call).
  ArgInfo getter_call_value(const std::string& qual_text, const std::vector<ArgInfo>& args, uint32_t line);
  // A call of the file's own function, or of a method of its class: what its def returns, when
  // known (else nullptr). Constant fragments passed to a local function are checked first.
  const ArgInfo* own_return_value(const std::string& qual_text, const std::vector<ArgInfo>& args, uint32_t line);
  // os.path.join(...) and the like: the path text built, when any of it is constant.
  static std::optional<ArgInfo> path_value(std::string_view qual, const std::vector<ArgInfo>& args,
                                           bool decoded_args);
  // Any other call of a name: the builtins below decide its value, else it is the call "q()".
  ArgInfo named_call_value(const Frame& f, const std::string& qual_text, bool decoded_args);
  // __import__/import_module: a constant name is an import and a module; anything else is a
  // dynamic import (nullopt: the plain call).
  std::optional<ArgInfo> import_value(std::string_view qual, const ArgInfo* a0, uint32_t line);
  // getattr(obj, NAME): obj.NAME when both are known; computed and non-constant names are
  // reported (nullopt: the plain call).
  std::optional<ArgInfo> getattr_value(const std::vector<ArgInfo>& args, uint32_t line);
  // attrgetter/methodcaller(NAME): as getattr; attrgetter of one name carries it to its call.
  std::optional<ArgInfo> attrgetter_value(std::string_view qual, const std::vector<ArgInfo>& args, uint32_t line);
  // globals()/locals()/vars(...): a namespace whose subscripts read names.
  std::optional<ArgInfo> namespace_value(std::string_view qual, const std::vector<ArgInfo>& args, uint32_t line);
  // reversed(constant) and chr(): text spelled backwards or as character codes.
  std::optional<ArgInfo> character_value(std::string_view qual, const ArgInfo* a0, uint32_t line);
  // A constant decoded at the call: the text, also analyzed as code when it looks like text.
  ArgInfo decoded_value(const std::string& qual_text, std::string text, uint32_t line);
  // exec/eval/compile of a constant: the constant is analyzed as code.
  void read_exec_constant(std::string_view qual, const ArgInfo* a0, uint32_t line);

  // A call that reads host data (a system file, secrets, the whole environment): its value is
  // marked as carrying it (analyzer_flows.cpp).
  void mark_read_source(std::string_view qual, const std::vector<ArgInfo>& args, ArgInfo& value, uint32_t line,
                        const ArgInfo* receiver = nullptr);
  // lines.append(x), buf.write(x), d.update(x): the receiver now holds what x carries.
  void mutate_receiver(const Frame& f);
  // p.unlink() of a p that holds a host path (a loop over Path("/etc").glob(...)): reported as
  // pathlib.Path().unlink with p as argument 0, as a constant path's method is.
  void path_method_of_value(const Frame& f, std::string_view qual);
  // `name` (and the object of `obj.attr`) now holds what `in` carries.
  void taint_name(const std::string& name, const ArgInfo& in);
  // shutil.copy(SRC, DST) of host data: DST holds it (a later read of DST is a read of SRC).
  void note_copy(std::string_view qual, const std::vector<ArgInfo>& args);
  // own_call(), and `c.collect()` on a name that holds nothing known (a loop's item, a
  // parameter) when the file's classes define `collect`: that method.
  std::optional<OwnCall> own_method(std::string_view qual) const;
  // threading.Thread(target=f, args=...), executor.submit(f, ...), run_in_executor(None, f, ...),
  // map(f, items): f is a function of the file's own called with those arguments, so its
  // summary meets them.
  void run_callable_argument(std::string_view qual, const Frame& f);
  // A call of a def decorated by the file's own decorators: `value` carries what their inner
  // functions return.
  void carry_decorated(std::string_view qual, ArgInfo& value) const;
  // An object of the file's own class made (local:C(...)) or a method of such a class called on
  // one (state.paths()): it keeps what it was given, and gives it back.
  bool own_holder(std::string_view qual) const;
  // parser.add_argument("--root", default="/var/log"): see arg_defaults_.
  void note_arg_default(std::string_view qual, const std::vector<ArgInfo>& args);
  // `args.root` of such an option: the unknown value or the default (nullopt: no default known).
  std::optional<ArgInfo> arg_default_value(const ArgInfo& name, uint32_t line) const;
  // Host data written to the file opened for writing last: a later read of it reads that data.
  void note_written(uint8_t flows);
  // A def header's parameters (`param_next_`: the next name is one), bound at the body's start
  // and forgotten at its end.
  void note_def_param_op(std::string_view op);
  void note_def_default(std::string_view value);
  void note_default_ref();
  // `param: C` in a def header, C a class of the file's: see Block::classes.
  void note_param_class(std::string_view name);
  void bind_params(const Block& b);
  // Parameter i of the function being read: a name of its own, or its path default.
  void bind_param(size_t i, const std::string& name, const std::string& path_default);
  // `NAME = lambda a, b: ...`: a and b are its parameters while its body is read, and NAME a
  // function of the file's own (local:NAME) with the summary of what it sends.
  void lambda_token(const Token& t);
  void end_lambda();
  void forget_params(const Block& b);
  // A call whose arguments are built from the enclosing function's parameters: kept in that
  // function's summary.
  void note_param_call(const std::string& qual, const std::vector<ArgInfo>& args, uint32_t line);
  void note_mutation(const std::string& receiver, const ArgInfo& in);
  const std::string* enclosing_def() const;  // the innermost def around the current token
  void apply_mutations(const std::string& fn, const Frame& f, bool receiver);
  // In a file that pickles its own objects, pickle.loads of what a helper is given (thaw(blob))
  // is no payload there; where the helper is called with bytes that pickle.dumps did not make
  // (a file's contents, the network), that call is reported with them (apply_own_unpickles).
  void note_own_unpickle(std::string_view qual, Frame& f);
  void apply_own_unpickles(const std::string& fn, const std::vector<const ArgInfo*>& given, uint32_t line);
  // A call of the file's own function (or method): the calls its summary holds are reported
  // again with what this call's arguments carry, and `ret` (what it returns) takes it too.
  void apply_summary(std::string_view qual, const Frame& f, ArgInfo* ret);

  // A finished subscript and its value (analyzer_values.cpp).
  ArgInfo close_subscript(Frame& f);
  static constexpr size_t kMaxOwnAlternatives = 8;
  static constexpr uint32_t kMaxAlternativeCalls = 2048;  // per file (see close_call)
  uint32_t alternative_calls_ = 0;
  std::optional<ArgInfo> own_function_item(const std::string& table, const ArgInfo& key) const;
  std::optional<ArgInfo> constant_item(const std::string& table, const ArgInfo& key) const;
  bool own_alternatives(std::string_view text) const;

  // What a `return`, `yield` or lambda body statement gives its function (analyzer_returns.cpp).
  void note_return(Frame& s);

  // ---- statements --------------------------------------------------------------------------
  // `suite_continues`: a ';' inside a one-line suite (`while 1: os.fork(); break`).
  void end_statement(bool suite_continues = false);

  // ---- code inside strings and names in pieces (analyzer_hidden.cpp) ----------------------
  // A completed string value: emitted whole when it was joined from pieces (`whole`), and the
  // code of a `python -c '...'` command line in it analyzed as code.
  void on_string_value(const ArgInfo& v, uint32_t line, bool whole);
  // A list or tuple of constant identifier fragments (['se', 'tu', 'id']): its join is reported
  // as the reference "<assembled>.NAME", so that rules can name what a hidden name reaches.
  void check_fragments(const std::vector<ArgInfo>& items, uint32_t line);
  // A list of three or more constant pieces that join into Python statements.
  void check_code_list(const std::vector<ArgInfo>& items, uint32_t line);
  // `["python3", "-c", CODE]`: CODE is analyzed as code.
  void check_python_c(const std::vector<ArgInfo>& items, uint32_t line);
  // `A if C else B`, `A or B` (the value is A) and `lambda`; true when the keyword was taken.
  bool value_keyword(std::string_view kw, Frame& f);
  // `name += piece` and `NAME | NAME` flag chains; true when the operator was taken.
  bool value_operator(std::string_view op, Frame& top);
  // `vars(mod)[key]`, `mod.__dict__[key]`, `globals()[key]` with a key that is not a constant.
  void namespace_key(const ArgInfo& key, uint32_t line);
  // An attribute or builtin reached by a name computed from constants (getattr(o, "sy" + "stem"),
  // attrgetter, vars(mod)[...]): the getattr_computed detector and the reference
  // "<computed>.NAME", so that rules can rate the call it reaches.
  void computed_name(const std::string& name, uint32_t line);

  void parse_import();

  // ---- for loops over literals (analyzer_iter.cpp) ----------------------------------------
  void for_header_token(const Token& t);
  void capture_items(Frame& f);
  void remember_items(const std::string& name, const ArgInfo& value);
  // At a `for` header's colon: its names take the items of the literal it iterates.
  void bind_loop_targets();
  // Or, over no literal, the paths the iterated value lists (a call of the file's own function).
  void bind_loop_to_value(const ArgInfo& iter);
  // What a loop over `v` gets: for an object of the file's own class, what its __iter__ yields.
  const ArgInfo& iterated(const ArgInfo& v) const;
  // `[open(p).read() for p in PATHS]`: the element comes before its `for`, so at the bracket the
  // tokens ahead are read for `for NAMES in ITERABLE` and the names bound as a `for` statement
  // binds them, until the bracket closes (restore_comprehension).
  // at: the opening bracket's byte in the text being read (see no_for_until_).
  void prebind_comprehension(Frame& f, const char* at);
  std::optional<ArgInfo> resolve_attribute(std::string_view s) const;
  // Each loop target now also carries what the iterated value carries.
  void carry_into_targets(const ArgInfo& iter);
  void restore_comprehension(Frame& f);

  // `name += value`: a string grows (folded when the piece is a constant), anything else is
  // no longer the constant it was bound to.
  void augment(const ArgInfo& piece);

  // ---- whole file --------------------------------------------------------------------------
  void scan_lines(std::string_view s);

  void enqueue(std::string text, uint32_t line, uint32_t depth);

  const AnalyzerLimits& limits_;
  EventSink& sink_;

  // File state, shared with the fragments (exec'd code runs in the same globals).
  std::unordered_map<std::string, ArgInfo, NameHash, std::equal_to<>> symbols_;
  // What a local function returns when that is a constant, folded or decoded string
  // ("local:f()"): a payload assembled in one function and executed in another keeps its kind.
  std::unordered_map<std::string, ArgInfo, NameHash, std::equal_to<>> returns_;
  // Modules bound by import statements: a subscript of one is a lookup in its namespace.
  std::unordered_set<std::string, NameHash, std::equal_to<>> modules_;
  // Names bound to a list, tuple, set or dict literal: its items.
  std::unordered_map<std::string, Items, NameHash, std::equal_to<>> items_;
  std::deque<Fragment> queue_;
  std::unordered_map<std::string, std::vector<ParamCall>, NameHash, std::equal_to<>> summaries_;
  std::unordered_map<std::string, std::vector<Mutation>, NameHash, std::equal_to<>> mutations_;
  std::unordered_map<std::string, std::vector<OwnUnpickle>, NameHash, std::equal_to<>> own_unpickles_;
  std::unordered_map<std::string, std::vector<std::string>, NameHash, std::equal_to<>> params_of_;
  // Which parameter of a function of the file collects the keywords no other is named for
  // (`**kwargs`), by the function's key in params_of_.
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> kwargs_of_;
  bool kwargs_next_ = false;                 // the next parameter name follows `**`
  size_t def_kwargs_ = kNoKwargs;            // of the def being read
  size_t lambda_kwargs_ = kNoKwargs;         // of the lambda being read
  std::unordered_set<std::string, NameHash, std::equal_to<>> applied_;  // see apply_summary
  uint32_t callback_depth_ = 0;  // apply_summary calling itself for a parameter given a function
  std::unordered_map<std::string, uint8_t, NameHash, std::equal_to<>> copied_;  // see note_copy
  // Methods declared @staticmethod ("local:m"): a call through an object gives them no self.
  std::unordered_set<std::string, NameHash, std::equal_to<>> static_methods_;
  bool static_pending_ = false;  // a @staticmethod decorator was read; the next def takes it
  // `@with_context` (a function of the file) before a def: a call of the def runs the wrapper
  // the decorator defines inside it, so it gives what that wrapper returns too.
  std::vector<std::string> decorators_pending_;
  std::unordered_map<std::string, std::vector<std::string>, NameHash, std::equal_to<>> decorated_;
  std::unordered_map<std::string, std::vector<std::string>, NameHash, std::equal_to<>> inner_;
  bool decorator_ = false;       // the statement being read is a decorator
  // The file's classes ("local:C").
  std::unordered_set<std::string, NameHash, std::equal_to<>> classes_;
  // argparse options whose default is a path, by dest: `args.root` is that path unless given.
  std::unordered_map<std::string, std::string, NameHash, std::equal_to<>> arg_defaults_;
  std::string last_write_path_;
  std::vector<std::string> def_params_;
  std::vector<std::string> def_defaults_;
  std::vector<std::string> def_classes_;  // see Block::classes
  bool annotation_next_ = false;          // after `param:` in a def header
  bool param_next_ = false;
  bool default_next_ = false;  // after `param=` in a def header
  bool default_in_path_ = false;  // inside `param=Path(` in a def header
  bool default_ref_ = false;      // reading a default that is a dotted name so far
  bool own_serialized_ = false;  // the file pickles objects of its own (see named_call_value)
  uint8_t lambda_state_ = 0;  // 1: reading a lambda's parameters, 2: its body
  size_t lambda_depth_ = 0;
  std::vector<std::string> lambda_params_;
  std::string lambda_fn_;
  uint64_t string_budget_ = 0;         // literal bytes on_string_value may still scan (see there)
  uint64_t whole_budget_ = 256 << 10;  // joined-value bytes it may still report and scan
  uint64_t fragment_bytes_ = 0;
  std::vector<std::pair<std::string, uint32_t>> docstrings_;
  size_t doc_bytes_ = 0;
  bool doc_referenced_ = false;

  // Text state.
  const Tokenizer* tok_ = nullptr;     // the text's tokenizer, copied to read ahead
  bool item_known_ = false;  // close_subscript found the item a constant key names
  const char* no_for_until_ = nullptr;  // the end of a bracket read ahead that holds no `for`
  uint64_t lookahead_budget_ = 0;      // tokens prebind_comprehension may still read (per file)
  uint32_t origin_line_ = 0;
  uint32_t depth_ = 0;
  std::vector<Frame> frames_;
  uint32_t overflow_ = 0;
  bool nesting_reported_ = false;
  Primary prim_;
  std::vector<Block> blocks_;
  uint32_t block_overflow_ = 0;
  std::optional<Block> header_block_;  // opened by the next INDENT, or a same-line suite
  bool suite_on_line_ = false;

  // Statement state.
  bool stmt_fresh_ = true;
  uint32_t stmt_line_ = 0;
  bool import_mode_ = false;
  std::vector<std::string> import_tokens_;
  Header header_ = Header::none;
  bool header_colon_ = false;
  bool header_unbounded_ = false;
  std::string def_name_;  // the function a `def` header names
  std::string class_name_;  // the class a `class` header names, until its bases are read
  std::string class_header_;  // the class a `class` header names, for its body's block
  bool dotted_symbols_ = false;  // some bound name has a dot: `self.run = ...`, a class attribute
  uint32_t last_line_ = 0;  // of the last token read
  bool def_is_function_ = false;
  std::string while_sig_;
  std::vector<std::string> targets_;
  // Growth of a value by itself within one statement (see end_statement).
  std::string aug_target_;  // the name before `+=`
  std::string annotated_;   // the name before `: TYPE =`
  uint32_t self_refs_ = 0;  // uses of the assigned name on the right-hand side
  bool saw_plus_ = false, saw_mul_ = false, doubles_ = false;
  bool def_pending_ = false;
  std::string return_fn_;  // `return` statement: the function it returns from
  bool yields_ = false;     // and it is a `yield`: an item of what a call gives
  size_t comp_for_depth_ = 0, comp_in_depth_ = 0;  // a comprehension's `for` / `in`, by frame depth
  // A `for` header: 0 reading its names, 1 its iterable (spelled in for_iter_sig_).
  uint8_t for_phase_ = 0;
  bool for_targets_ok_ = true;
  std::vector<std::string> for_targets_;
  std::string for_iter_sig_;
  Items stmt_items_;  // the last literal closed at statement level
  bool stmt_items_set_ = false;
  bool await_pending_ = false;  // after `await`: the next call reported is what is awaited
  // check_syntax: the previous token was a name that is no keyword; where it ended.
  bool prev_plain_name_ = false;
  const char* prev_end_ = nullptr;
  bool prev_lt_ = false;  // and it was the operator '<'
  bool syntax_reported_ = false;
  bool except_stmt_ = false;  // an `except` clause header
  uint8_t except_comma_ = 0;  // after its ',': 1, then 2 after a lower-case name
  bool unpack_env_ = false;   // after `**`: the operand may be os.environ
  std::vector<std::string> unpack_names_;  // names before ',' at statement level
  std::vector<std::string> unpack_;        // `a, b = ...`: the names assigned item by item
  bool as_pending_ = false;
  ArgInfo as_value_;
  bool bare_strings_ = true;
  std::vector<std::pair<std::string, uint32_t>> deferred_strings_;
  bool dot_pending_ = false;
  bool prev_string_ = false;
  std::string last_flushed_raw_;
  std::string last_flushed_item_of_;
  std::string item_target_;  // `NAME[key] = ...`: NAME
  bool last_flushed_single_ = false;
};

}  // namespace sandboxrun::assess::detail
