// Facts that no rule can read off a single call: whether the file compiles as Python 3 at all,
// and whether the random module makes a value the code names as a secret.
#include "analyzer_impl.hpp"
#include "common/ascii.hpp"
#include "common/printable.hpp"
#include "internal.hpp"

namespace sandboxrun::assess::detail {

// What CPython's tokenizer and parser reject at once, in code that is not Python 3 (PHP, Perl,
// shell, C, HTML, Python 2): a character Python has no use for ($ ? `), `<>`, a decimal with a
// leading zero (Python 2's octal), two names side by side (`echo "hi"`, `use strict`, `int
// main`), a statement that starts with an operator no expression starts with (`<html>`).
// Only the file itself is checked (not text decoded from it), and only the first error is said.
void Analyzer::check_syntax(const Token& t, uint32_t line, bool starts_statement) {
  if (depth_ > 0 || syntax_reported_) return;
  auto report = [&](const std::string& why) {
    syntax_reported_ = true;
    sink_.on_detector(Detector::syntax_error, line, why);
  };
  // Soft keywords and Python 2's statements (the python2 detector's) may precede a name.
  auto plain = [](std::string_view n) {
    return !is_keyword(n) && n != "match" && n != "case" && n != "type" && n != "print" && n != "exec";
  };
  const bool name = t.kind == TokKind::name && plain(t.text);
  if (t.kind == TokKind::error) {
    // Generated code often comes wrapped in a Markdown fence (```python ... ```). Details stay
    // short: the rule engine cuts them at 60 characters.
    report(t.text == "`" ? std::string("'`' outside a string: a Markdown code fence?")
                         : "'" + printable(t.text.substr(0, 8)) + "' outside strings and comments");
  } else if (t.kind == TokKind::number && t.text.size() > 1 && t.text[0] == '0' &&
             t.text.find_first_not_of("0123456789_") == std::string_view::npos &&
             t.text.find_first_not_of("0_") != std::string_view::npos) {
    report("leading zero in " + std::string(t.text.substr(0, 16)) + " (Python 2's octal)");
  } else if (starts_statement && t.kind == TokKind::op && t.text != "(" && t.text != "[" && t.text != "{" &&
             t.text != "-" && t.text != "+" && t.text != "~" && t.text != "*" && t.text != "@" && t.text != "...") {
    report("a statement that starts with " + std::string(t.text.substr(0, 3)));
  } else if (t.kind == TokKind::op && t.text == ">" && prev_lt_ && t.text.data() == prev_end_) {
    report("the operator <> (Python 2's !=)");
  } else if (prev_plain_name_ && (name || t.kind == TokKind::string || t.kind == TokKind::fstring_start)) {
    report("a name, then " + printable(t.text.substr(0, 24)) + " with nothing between");
  }
  prev_plain_name_ = name;
  prev_lt_ = t.kind == TokKind::op && t.text == "<";
  prev_end_ = t.text.data() + t.text.size();
}

namespace {

// Words that name a secret in an identifier (lower case). Not bare "token" (a tokenizer's),
// "secret" (a guessing game's number), "reset" or "key" (a game's reset, a sort key): random
// numbers for those are no secrets.
bool names_secret(std::string_view name) {
  static constexpr std::string_view kWords[] = {
      "passw", "passphrase", "secret_key", "secretkey", "client_secret", "shared_secret", "app_secret",
      "secret_token", "jwt_secret", "reset_code", "resetcode", "reset_token", "reset_link", "otp", "one_time",
      "nonce", "salt", "api_key", "apikey", "auth_token", "access_token", "refresh_token", "session_token",
      "session_key", "session_id", "sessionid", "csrf", "verification_code", "verify_code", "confirm_code",
      "activation_code", "activation_key", "license_key", "mfa_code", "2fa"};
  const std::string low = ascii_lower(name.substr(0, 128));
  for (std::string_view w : kWords)
    if (low.find(w) != std::string::npos) return true;
  return false;
}

// A password, for hashes: a nonce or a session id hashed with MD5 is a protocol's (HTTP digest).
bool names_password(std::string_view name) {
  const std::string low = ascii_lower(name.substr(0, 128));
  return low.find("passw") != std::string::npos || low.find("passphrase") != std::string::npos ||
         low.find("pwd_hash") != std::string::npos || low.find("pw_hash") != std::string::npos;
}

}  // namespace

// random.choice(...) in `def make_reset_code` or assigned to `api_key`, hashlib.md5(...) in `def
// hash_password`: the policy's "weak crypto or random used for secrets" (MEDIUM), told by what
// the code names the value, as a reviewer would. An MD5 that says usedforsecurity=False is a
// cache key, whatever its function is called.
void Analyzer::check_secret_use(std::string_view qual, const std::vector<ArgInfo>& args, uint32_t line) {
  Detector d;
  if (qual.starts_with("random.") && !qual.starts_with("random.SystemRandom") && qual != "random.seed") {
    d = Detector::secret_random;
  } else if (qual == "hashlib.md5" || qual == "hashlib.sha1" ||
             (qual == "hashlib.new" && !args.empty() && args[0].kind == Kind::string &&
              (ascii_lower(args[0].text) == "md5" || ascii_lower(args[0].text) == "sha1"))) {
    for (const auto& a : args)
      if (a.keyword == "usedforsecurity" && a.text == "False") return;
    d = Detector::secret_weak_hash;
  } else {
    return;
  }
  auto says = [&](std::string_view n) { return d == Detector::secret_random ? names_secret(n) : names_password(n); };
  for (const auto& t : targets_)
    if (says(t)) return sink_.on_detector(d, line, t);
  for (auto it = blocks_.rbegin(); it != blocks_.rend(); ++it)
    if (it->kind == BlockKind::function) {
      std::string_view fn = it->name;
      if (fn.starts_with("local:")) fn.remove_prefix(6);
      if (says(fn)) sink_.on_detector(d, line, fn);
      return;
    }
}

}  // namespace sandboxrun::assess::detail
