// A small recursive-descent reading of ECMAScript syntax that computes, for each part of an
// expression, either the exact set of strings it matches (when small) or a set of literals
// that every match of it contains, as RE2's and codesearch's prefilters do. Anything it does
// not know gives up on the whole expression (no filter), which is always safe.
#include "assess/regex_prefilter.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <optional>
#include <set>

#include "assess/assess_tokenizer.hpp"
#include "common/ascii.hpp"

namespace sandboxrun::assess {

namespace {

constexpr size_t kMaxSet = 64;    // exact sets larger than this become "contains one of"
constexpr int kMaxDepth = 64;     // deeper nesting: no filter
constexpr size_t kInf = std::numeric_limits<size_t>::max();

// exact: `set` is every string the part matches. Otherwise every match contains one of `set`;
// an empty `set` is "no literal known". min: the shortest match's length.
struct Info {
  bool exact = false;
  std::set<std::string> set;
  size_t min = 0;
};

// std::regex's icase folds with the "C" locale's tolower: ASCII letters only.

size_t add(size_t a, size_t b) { return a > kInf - b ? kInf : a + b; }
size_t mul(size_t a, size_t n) { return n != 0 && a > kInf / n ? kInf : a * n; }

Info exact(std::string s) {
  Info i;
  i.exact = true;
  i.min = s.size();
  i.set.insert(std::move(s));
  return i;
}
Info any(size_t min) {
  Info i;
  i.min = min;
  return i;
}

// The "every match contains one of" form.
Info needs(const Info& x) {
  if (!x.exact) return x;
  Info r = any(x.min);
  if (x.set.count("") == 0) r.set = x.set;
  return r;
}

// Which of two requirement sets filters better: the longer shortest literal, then fewer.
bool better(const std::set<std::string>& a, const std::set<std::string>& b) {
  if (b.empty()) return true;
  if (a.empty()) return false;
  auto shortest = [](const std::set<std::string>& s) {
    size_t m = kInf;
    for (const auto& x : s) m = std::min(m, x.size());
    return m;
  };
  const size_t la = shortest(a), lb = shortest(b);
  return la != lb ? la > lb : a.size() <= b.size();
}

// Two exactly known parts one after the other: every pairing.
Info product(const Info& a, const Info& b) {
  Info r;
  r.exact = true;
  for (const auto& x : a.set)
    for (const auto& y : b.set) r.set.insert(x + y);
  r.min = add(a.min, b.min);
  return r;
}

Info alternate(const Info& a, const Info& b) {
  if (a.exact && b.exact) {
    Info r = a;
    r.set.insert(b.set.begin(), b.set.end());
    r.min = std::min(a.min, b.min);
    if (r.set.size() <= kMaxSet) return r;
    return needs(r);
  }
  Info na = needs(a), nb = needs(b);
  Info r = any(std::min(a.min, b.min));
  if (!na.set.empty() && !nb.set.empty()) {
    r.set = std::move(na.set);
    r.set.insert(nb.set.begin(), nb.set.end());
  }
  return r;
}

Info repeat(const Info& x, size_t lo, size_t hi) {
  if (lo == 1 && hi == 1) return x;
  if (lo == 0 && hi == 1 && x.exact && x.set.size() < kMaxSet) {
    Info r = x;
    r.set.insert("");
    r.min = 0;
    return r;
  }
  if (lo == 0) return any(0);
  Info r = needs(x);  // at least one copy of x is in every match
  r.min = mul(x.min, lo);
  return r;
}

class Parser {
 public:
  Parser(std::string_view re, bool icase) : re_(re), icase_(icase) {}

  std::optional<Info> parse() {
    std::optional<Info> r = disjunction(0);
    if (!r || pos_ != re_.size()) return std::nullopt;
    return r;
  }

 private:
  bool at_end() const { return pos_ >= re_.size(); }
  char peek() const { return re_[pos_]; }

  std::optional<Info> disjunction(int depth) {
    if (depth > kMaxDepth) return std::nullopt;
    std::optional<Info> r = alternative(depth);
    while (r && !at_end() && peek() == '|') {
      ++pos_;
      std::optional<Info> next = alternative(depth);
      if (!next) return std::nullopt;
      r = alternate(*r, *next);
    }
    return r;
  }

  // A sequence of parts. Runs of exactly known parts are multiplied out ("\\.pth" after a
  // class gives ".pth", not "."); each run, and each other part's own needs, is a candidate,
  // and the best candidate is what the sequence needs (every match contains all of them).
  std::optional<Info> alternative(int depth) {
    Info run = exact(""), best = any(0);
    bool all_exact = true;
    size_t min = 0;
    auto keep = [&](Info candidate) {
      if (better(candidate.set, best.set)) best.set = std::move(candidate.set);
    };
    while (!at_end() && peek() != '|' && peek() != ')') {
      std::optional<Info> t = term(depth);
      if (!t) return std::nullopt;
      min = add(min, t->min);
      if (t->exact && run.set.size() * t->set.size() <= kMaxSet) {
        run = product(run, *t);
        continue;
      }
      all_exact = false;
      keep(needs(run));
      run = t->exact ? *t : exact("");
      if (!t->exact) keep(*t);
    }
    if (all_exact) return run;
    keep(needs(run));
    best.min = min;
    return best;
  }

  std::optional<Info> term(int depth) {
    const char c = peek();
    if (c == '^' || c == '$') {
      ++pos_;
      return exact("");
    }
    if (c == '\\' && pos_ + 1 < re_.size() && (re_[pos_ + 1] == 'b' || re_[pos_ + 1] == 'B')) {
      pos_ += 2;
      return exact("");
    }
    if (re_.substr(pos_).starts_with("(?=") || re_.substr(pos_).starts_with("(?!")) {
      pos_ += 3;  // a lookahead consumes nothing: what it needs need not be in the match
      if (!disjunction(depth + 1) || at_end() || peek() != ')') return std::nullopt;
      ++pos_;
      return exact("");
    }
    std::optional<Info> a = atom(depth);
    if (!a) return std::nullopt;
    return quantified(*a);
  }

  std::optional<Info> quantified(const Info& a) {
    if (at_end()) return a;
    size_t lo = 1, hi = 1;
    switch (peek()) {
      case '*': lo = 0, hi = kInf, ++pos_; break;
      case '+': lo = 1, hi = kInf, ++pos_; break;
      case '?': lo = 0, hi = 1, ++pos_; break;
      case '{': {
        ++pos_;
        std::optional<size_t> n = number();
        if (!n) return std::nullopt;
        lo = hi = *n;
        if (!at_end() && peek() == ',') {
          ++pos_;
          hi = kInf;
          if (!at_end() && peek() != '}') {
            std::optional<size_t> m = number();
            if (!m || *m < lo) return std::nullopt;
            hi = *m;
          }
        }
        if (at_end() || peek() != '}') return std::nullopt;
        ++pos_;
        break;
      }
      default: return a;
    }
    if (!at_end() && peek() == '?') ++pos_;  // lazy: the same strings
    return repeat(a, lo, hi);
  }

  std::optional<size_t> number() {
    size_t n = 0, digits = 0;
    while (!at_end() && std::isdigit(static_cast<unsigned char>(peek())) && digits < 6) {
      n = n * 10 + static_cast<size_t>(peek() - '0');
      ++pos_, ++digits;
    }
    if (digits == 0 || (!at_end() && std::isdigit(static_cast<unsigned char>(peek())))) return std::nullopt;
    return n;
  }

  std::optional<Info> atom(int depth) {
    const char c = peek();
    switch (c) {
      case '.': ++pos_; return any(1);
      case '[': return char_class();
      case '(': {
        ++pos_;
        if (!at_end() && peek() == '?') {
          if (pos_ + 1 >= re_.size() || re_[pos_ + 1] != ':') return std::nullopt;
          pos_ += 2;
        }
        std::optional<Info> r = disjunction(depth + 1);
        if (!r || at_end() || peek() != ')') return std::nullopt;
        ++pos_;
        return r;
      }
      case '\\': return escape();
      case ')': case ']': case '{': case '}': case '*': case '+': case '?': case '|':
        return std::nullopt;
      default: ++pos_; return literal(c);
    }
  }

  std::optional<Info> escape() {
    if (pos_ + 1 >= re_.size()) return std::nullopt;
    const char e = re_[pos_ + 1];
    pos_ += 2;
    switch (e) {
      case 'd': case 'D': case 's': case 'S': case 'w': case 'W': return any(1);
      case 'f': return literal('\f');
      case 'n': return literal('\n');
      case 'r': return literal('\r');
      case 't': return literal('\t');
      case 'v': return literal('\v');
      case 'x': {  // \xHH: the character with that code
        const int hi = pos_ < re_.size() ? hex_digit(re_[pos_]) : -1;
        const int lo = pos_ + 1 < re_.size() ? hex_digit(re_[pos_ + 1]) : -1;
        if (hi < 0 || lo < 0) return std::nullopt;
        pos_ += 2;
        return literal(static_cast<char>(hi * 16 + lo));
      }
      default: break;
    }
    // \1..\9 (back-references), \0, \u, \c and unknown letters: not read here.
    if (std::isalnum(static_cast<unsigned char>(e))) return std::nullopt;
    return literal(e);  // an escaped punctuation character stands for itself
  }

  // A bracket expression is one character we do not track; [[:alpha:]] and friends: give up.
  std::optional<Info> char_class() {
    ++pos_;
    if (!at_end() && peek() == '^') ++pos_;
    while (!at_end()) {
      const char c = peek();
      if (c == ']') {  // in ECMAScript even a first ']' ends it: "[]" matches nothing
        ++pos_;
        return any(1);
      }
      if (c == '[') return std::nullopt;
      pos_ += c == '\\' ? 2 : 1;
    }
    return std::nullopt;
  }

  Info literal(char c) const { return exact(std::string(1, icase_ ? ascii_lower(c) : c)); }

  std::string_view re_;
  bool icase_;
  size_t pos_ = 0;
};

}  // namespace

RegexPrefilter regex_prefilter(std::string_view expression, bool icase) {
  RegexPrefilter f;
  f.icase = icase;
  std::optional<Info> info = Parser(expression, icase).parse();
  if (!info) return f;
  f.min_length = info->min;
  const Info n = needs(*info);
  // A needle that contains another adds nothing: a text with it has the shorter one too
  // ("sh" for "bash", "zsh" and "/sh"), and each needle left is one more search of the text.
  for (const auto& x : n.set)
    if (std::none_of(n.set.begin(), n.set.end(), [&](const std::string& y) { return y != x && x.find(y) != std::string::npos; }))
      f.needles.push_back(x);
  return f;
}

bool RegexPrefilter::may_match(std::string_view text) const {
  if (text.size() < min_length) return false;
  if (needles.empty()) return true;
  if (!icase) {
    for (const auto& n : needles)
      if (text.find(n) != std::string_view::npos) return true;
    return false;
  }
  for (const auto& n : needles) {
    const auto hit = std::search(text.begin(), text.end(), n.begin(), n.end(),
                                 [](char a, char b) { return ascii_lower(a) == b; });
    if (hit != text.end()) return true;
  }
  return false;
}

}  // namespace sandboxrun::assess
