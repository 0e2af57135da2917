// Myers' O(ND) line diff ("An O(ND) Difference Algorithm and Its Variations", 1986), forward
// search with one furthest-reaching x per diagonal kept for every edit count d, then traced
// back. Lines are interned to integers first, and the common prefix and suffix are cut off, so
// the usual edit of a script (a few lines) costs little more than reading it.
#include "audit/diff.hpp"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace sandboxrun::audit {

namespace {

enum class Op : char { keep, del, ins };

// The cost bound: at most kMaxEdits edits in the changed middle (the trace holds about
// kMaxEdits² ints, 16 MiB) and kMaxSteps diagonal steps (a few tenths of a second). A file
// pair past it is diffed approximately (LineDiffCounts::approximate).
constexpr int kMaxEdits = 2000;
constexpr uint64_t kMaxSteps = 20'000'000;

std::vector<std::string_view> split_lines(std::string_view t) {
  std::vector<std::string_view> out;
  for (size_t pos = 0; pos < t.size();) {
    size_t nl = t.find('\n', pos);
    size_t end = nl == std::string_view::npos ? t.size() : nl + 1;
    out.push_back(t.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

// Furthest x on diagonal k after d edits, from the row of d - 1 (-1 when none), and whether it
// is reached by a step down (one more line of b) rather than right (one more line of a).
struct Step {
  int x = -1;
  bool down = false;
};
Step step(const std::vector<int>& prev, int d, int k, int n, int m) {
  auto at = [&](int kk) { return kk < -(d - 1) || kk > d - 1 ? -1 : prev[static_cast<size_t>(kk + d - 1)]; };
  int down = at(k + 1);
  if (down >= 0 && down - k > m) down = -1;
  int right = at(k - 1);
  if (right >= 0 && ++right > n) right = -1;
  return down >= right ? Step{down, true} : Step{right, false};
}

// The edit script turning a[0,n) into b[0,m); false when the bound is hit.
bool myers(const uint32_t* a, int n, const uint32_t* b, int m, std::vector<Op>& out) {
  if (n == 0 || m == 0) {
    out.insert(out.end(), static_cast<size_t>(n), Op::del);
    out.insert(out.end(), static_cast<size_t>(m), Op::ins);
    return true;
  }
  std::vector<std::vector<int>> trace;  // trace[d][k + d]
  uint64_t steps = 0;
  const int max_d = std::min(n + m, kMaxEdits);
  for (int d = 0; d <= max_d; ++d) {
    std::vector<int> v(static_cast<size_t>(2 * d + 1), -1);
    for (int k = -d; k <= d; k += 2) {
      int x = d == 0 ? 0 : step(trace.back(), d, k, n, m).x;
      if (x < 0) continue;
      int y = x - k;
      while (x < n && y < m && a[x] == b[y]) ++x, ++y, ++steps;
      v[static_cast<size_t>(k + d)] = x;
      if (x != n || y != m) continue;
      trace.push_back(std::move(v));
      // Back from (n, m): each row says which diagonal the path came from.
      std::vector<Op> rev;
      for (int e = d; e > 0; --e) {
        Step s = step(trace[static_cast<size_t>(e - 1)], e, k, n, m);
        int pk = s.down ? k + 1 : k - 1;
        int px = trace[static_cast<size_t>(e - 1)][static_cast<size_t>(pk + e - 1)];
        for (int sx = s.down ? px : px + 1; x > sx; --x) rev.push_back(Op::keep);
        rev.push_back(s.down ? Op::ins : Op::del);
        x = px;
        k = pk;
      }
      rev.insert(rev.end(), static_cast<size_t>(x), Op::keep);
      out.insert(out.end(), rev.rbegin(), rev.rend());
      return true;
    }
    steps += static_cast<uint64_t>(d) + 1;
    if (steps > kMaxSteps) return false;
    trace.push_back(std::move(v));
  }
  return false;
}

struct Script {
  std::vector<std::string_view> a, b;
  std::vector<Op> ops;
  bool approximate = false;
};

Script diff_lines(std::string_view old_text, std::string_view new_text) {
  Script s{split_lines(old_text), split_lines(new_text), {}, false};
  std::unordered_map<std::string_view, uint32_t> ids;
  auto intern = [&](const std::vector<std::string_view>& lines) {
    std::vector<uint32_t> out;
    out.reserve(lines.size());
    for (auto l : lines) out.push_back(ids.try_emplace(l, static_cast<uint32_t>(ids.size())).first->second);
    return out;
  };
  const std::vector<uint32_t> a = intern(s.a), b = intern(s.b);
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre && a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) ++suf;
  const size_t n = a.size() - pre - suf, m = b.size() - pre - suf;
  s.ops.assign(pre, Op::keep);
  const bool small = n + m < static_cast<size_t>(1) << 30;
  if (!small || !myers(a.data() + pre, static_cast<int>(n), b.data() + pre, static_cast<int>(m), s.ops)) {
    s.ops.resize(pre);
    s.ops.insert(s.ops.end(), n, Op::del);
    s.ops.insert(s.ops.end(), m, Op::ins);
    s.approximate = true;
  }
  s.ops.insert(s.ops.end(), suf, Op::keep);
  return s;
}

std::string range(size_t start, size_t count) {
  // diff -u: "l,n"; ",1" left out; an empty range names the line before it.
  if (count == 1) return std::to_string(start + 1);
  return std::to_string(count == 0 ? start : start + 1) + "," + std::to_string(count);
}

void put_line(std::string& out, char prefix, std::string_view line) {
  out += prefix;
  out += line;
  if (line.empty() || line.back() != '\n') out += "\n\\ No newline at end of file\n";
}

}  // namespace

LineDiffCounts count_line_changes(std::string_view old_text, std::string_view new_text) {
  Script s = diff_lines(old_text, new_text);
  LineDiffCounts c;
  c.approximate = s.approximate;
  for (Op op : s.ops) {
    if (op == Op::del) ++c.removed;
    else if (op == Op::ins) ++c.added;
  }
  return c;
}

std::string unified_diff(std::string_view old_text, std::string_view new_text, const std::string& old_label,
                         const std::string& new_label, int context) {
  Script s = diff_lines(old_text, new_text);
  const auto ctx = static_cast<size_t>(std::max(context, 0));
  std::vector<size_t> changes;
  for (size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i] != Op::keep) changes.push_back(i);
  if (changes.empty()) return {};
  std::string out = "--- " + old_label + "\n+++ " + new_label + "\n";
  // Lines of a and b before op i, advanced as the hunks go.
  size_t op = 0, ai = 0, bi = 0;
  auto advance = [&](size_t to) {
    for (; op < to; ++op) {
      if (s.ops[op] != Op::ins) ++ai;
      if (s.ops[op] != Op::del) ++bi;
    }
  };
  for (size_t c = 0; c < changes.size();) {
    size_t last = c;
    while (last + 1 < changes.size() && changes[last + 1] - changes[last] - 1 <= 2 * ctx) ++last;
    const size_t begin = changes[c] > ctx ? changes[c] - ctx : 0;
    const size_t end = std::min(s.ops.size(), changes[last] + 1 + ctx);
    advance(begin);
    size_t old_count = 0, new_count = 0;
    for (size_t i = begin; i < end; ++i) {
      if (s.ops[i] != Op::ins) ++old_count;
      if (s.ops[i] != Op::del) ++new_count;
    }
    out += "@@ -" + range(ai, old_count) + " +" + range(bi, new_count) + " @@\n";
    for (size_t i = begin; i < end;) {
      if (s.ops[i] == Op::keep) {
        put_line(out, ' ', s.a[ai]);
        advance(++i);
        continue;
      }
      // One change: its removed lines, then its added ones.
      size_t j = i;
      while (j < end && s.ops[j] != Op::keep) ++j;
      size_t a_at = ai, b_at = bi;
      for (size_t x = i; x < j; ++x)
        if (s.ops[x] == Op::del) put_line(out, '-', s.a[a_at++]);
      for (size_t x = i; x < j; ++x)
        if (s.ops[x] == Op::ins) put_line(out, '+', s.b[b_at++]);
      advance(j);
      i = j;
    }
    c = last + 1;
  }
  return out;
}

}  // namespace sandboxrun::audit
