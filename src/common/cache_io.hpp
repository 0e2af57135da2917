// Caches of parsed and compiled inputs (the assessor's rules, security.yaml, sandbox.yaml): a directory private to the
// user, and entries in it that are verified before use. An entry is: magic, the hex digest of
// what it was built from (its key), payload length, the payload's CRC-32C, payload. The
// directory's checks keep other users out; the CRC catches accidental damage (a short file
// after a crash, a flipped bit), and costs ~15 us on the ~110 KB of compiled rules that every
// start reads, where a SHA-256 cost ~80 (crc32c.hpp). Files are opened
// without following symlinks, must belong to the user and be writable by nobody else, and are
// written to a temporary name, then renamed into place. Any failed check is a cache miss.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sandboxrun/fd.hpp"

namespace sandboxrun::cache {

// The cache directory (its last two levels created 0700 when missing), or an invalid fd and
// `why` it cannot be trusted: a symlink on its path, a directory on it that others can write
// (open_trusted_dir), or itself not the user's own and private.
UniqueFd open_dir(const std::filesystem::path& dir, std::string& why);

// A verified entry, mapped read-only: its payload is read from the page cache in place, so a
// load copies nothing and grows no heap (reading it into memory cost ~40 page faults of a
// 1.5 ms start).
class Entry {
 public:
  Entry(void* base, size_t size, std::string_view payload) noexcept : base_(base), size_(size), payload_(payload) {}
  Entry(Entry&& o) noexcept : Entry(std::move(o), o.payload_) {}
  // The same mapping, with `payload` a part of it.
  Entry(Entry&& o, std::string_view payload) noexcept
      : base_(std::exchange(o.base_, nullptr)), size_(o.size_), payload_(payload) {}
  Entry& operator=(Entry&&) = delete;
  ~Entry();
  std::string_view payload() const noexcept { return payload_; }

 private:
  void* base_;
  size_t size_;
  std::string_view payload_;
};

// Entry `name` when it is complete and was built from `key`; `rejected` says that an entry was
// there but failed verification.
std::optional<Entry> read_entry(int dirfd, const std::string& name, std::string_view magic, std::string_view key,
                                bool& rejected);
// Writes entry `name` (which holds `key`, a hex digest) and then keeps the newest 16 entries of
// its kind (`name` without the digest), this one always among them.
bool write_entry(int dirfd, const std::string& name, std::string_view magic, std::string_view key,
                 std::string_view payload);

// Keeps the newest kKeepPerKind (16) entries named `kind` + hex digest + `suffix` in `dirfd`,
// never `keep`, and removes writers' temporary files ("." + kind ... ".tmp") older than ten
// minutes. write_entry calls it; so does any cache that names its entries the same way.
void prune(int dirfd, std::string_view kind, std::string_view suffix, const std::string& keep);

// The same for entry `kind` + key + ".bin" in `cache_dir` (opened with open_dir): nullopt for a
// missing, unusable or rejected entry; a write is best effort.
std::optional<Entry> read_keyed(const std::filesystem::path& cache_dir, std::string_view kind, std::string_view magic,
                                const std::string& key);
void write_keyed(const std::filesystem::path& cache_dir, std::string_view kind, std::string_view magic,
                 const std::string& key, std::string_view payload);

// An array of trivially copyable records in an encoding (Writer::packed), read where it lies:
// each element is copied out on access, so the bytes need no alignment and hold no C++ object.
template <class T>
class Packed {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = T;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = T;
    Iterator() = default;
    Iterator(const char* at) noexcept : at_(at) {}
    T operator*() const noexcept {
      T v;
      std::memcpy(&v, at_, sizeof v);
      return v;
    }
    Iterator& operator++() noexcept {
      at_ += sizeof(T);
      return *this;
    }
    Iterator operator++(int) noexcept {
      Iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const Iterator&) const = default;

   private:
    const char* at_ = nullptr;
  };

  Packed() = default;
  Packed(const char* data, size_t n) noexcept : data_(data), n_(n) {}
  size_t size() const noexcept { return n_; }
  bool empty() const noexcept { return n_ == 0; }
  T operator[](size_t i) const noexcept { return *Iterator(data_ + i * sizeof(T)); }
  Iterator begin() const noexcept { return Iterator(data_); }
  Iterator end() const noexcept { return Iterator(data_ + n_ * sizeof(T)); }
  friend bool operator==(const Packed& a, const Packed& b) noexcept {
    return a.n_ == b.n_ && (a.n_ == 0 || std::memcmp(a.data_, b.data_, a.n_ * sizeof(T)) == 0);
  }

 private:
  const char* data_ = nullptr;
  size_t n_ = 0;
};

// A length-prefixed binary encoding.
class Writer {
 public:
  size_t size() const noexcept { return out_.size(); }
  void u32(uint32_t v) { raw(&v, sizeof v); }
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void f64(double v) { raw(&v, sizeof v); }
  void str(std::string_view s) {
    u32(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  void strs(const std::vector<std::string>& v) {
    u32(static_cast<uint32_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  void opt_bool(const std::optional<bool>& b) { u32(b ? (*b ? 2 : 1) : 0); }
  // A count, then the records' bytes (read back in place with Reader::packed).
  template <class T>
  void packed(const std::vector<T>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    u32(static_cast<uint32_t>(v.size()));
    raw(v.data(), v.size() * sizeof(T));
  }
  std::string take() { return std::move(out_); }

 private:
  void raw(const void* p, size_t n) { out_.append(static_cast<const char*>(p), n); }
  std::string out_;
};

// Every read is bounds-checked; the first failure makes ok() false and later reads no-ops.
class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool ok() const noexcept { return ok_; }
  bool done() const noexcept { return ok_ && in_.empty(); }
  uint32_t u32() { return fixed<uint32_t>(); }
  uint64_t u64() { return fixed<uint64_t>(); }
  double f64() { return fixed<double>(); }
  // A string of the input, in place.
  std::string_view view() {
    const uint32_t n = u32();
    if (!need(n)) return {};
    const std::string_view s = in_.substr(0, n);
    in_.remove_prefix(n);
    return s;
  }
  std::string str() { return std::string(view()); }
  std::vector<std::string> strs() {
    std::vector<std::string> v(count());
    for (auto& s : v) s = str();
    return v;
  }
  // A count of items that each take at least 4 bytes: larger than the input means corruption.
  uint32_t count() {
    const uint32_t n = u32();
    if (n > in_.size() / 4) ok_ = false;
    return ok_ ? n : 0;
  }
  std::optional<bool> opt_bool() {
    const uint32_t v = u32();
    if (v > 2) ok_ = false;
    return v == 0 ? std::nullopt : std::optional<bool>(v == 2);
  }
  template <class T>
  Packed<T> packed() {
    const uint32_t n = u32();
    if (!ok_ || n > in_.size() / sizeof(T)) {
      ok_ = false;
      return {};
    }
    Packed<T> p(in_.data(), n);
    in_.remove_prefix(n * sizeof(T));
    return p;
  }
  uint32_t below(uint32_t limit) {
    const uint32_t v = u32();
    if (v >= limit) ok_ = false;
    return v;
  }

 private:
  template <class T>
  T fixed() {
    T v{};
    if (!need(sizeof v)) return v;
    std::memcpy(&v, in_.data(), sizeof v);
    in_.remove_prefix(sizeof v);
    return v;
  }
  bool need(size_t n) {
    if (ok_ && in_.size() >= n) return true;
    ok_ = false;
    return false;
  }
  std::string_view in_;
  bool ok_ = true;
};

}  // namespace sandboxrun::cache
