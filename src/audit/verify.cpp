// Streaming chain verification. Reads each file once with a fixed buffer; keeps only the last
// two records' sequence numbers and hashes (plus one record of lookahead), so memory does not
// grow with the log.
#include "sandboxrun/audit_verify.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "internal.hpp"
#include "audit/audit_format.hpp"
#include "audit/line_reader.hpp"
#include "audit/objects.hpp"
#include "sandboxrun/error.hpp"

namespace sandboxrun {

const char* to_string(AuditDamage d) {
  switch (d) {
    case AuditDamage::modified: return "modified";
    case AuditDamage::deleted: return "deleted";
    case AuditDamage::reordered: return "reordered";
    case AuditDamage::inserted: return "inserted";
    case AuditDamage::truncated_after_checkpoint: return "truncated-after-checkpoint";
    case AuditDamage::torn_last_line: return "torn-last-line";
    case AuditDamage::forged: return "forged";
    case AuditDamage::bad_key: return "bad-key";
    case AuditDamage::rolled_back: return "rolled-back";
    case AuditDamage::missing: return "missing";
  }
  return "?";
}

std::vector<std::filesystem::path> rotated_audit_files(const std::filesystem::path& log) {
  std::vector<std::pair<uint64_t, std::filesystem::path>> found;
  const std::string prefix = log.filename().string() + ".";
  std::error_code ec;
  auto dir = log.has_parent_path() ? log.parent_path() : std::filesystem::path(".");
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    uint64_t seq = 0;
    if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
        audit::parse_u64(std::string_view(name).substr(prefix.size()), seq))
      found.emplace_back(seq, entry.path());
  }
  if (ec && ec != std::errc::no_such_file_or_directory)
    throw Error("cannot list " + dir.string() + ": " + ec.message(), "", ec.value());
  std::sort(found.begin(), found.end());
  std::vector<std::filesystem::path> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

std::vector<std::filesystem::path> audit_log_files(const std::filesystem::path& log) {
  auto files = rotated_audit_files(log);
  files.emplace_back(log);
  return files;
}

namespace {

using audit::LineReader;

struct Checkpoint {
  uint64_t seq = 0;
  std::string hash;
};

// The checkpoints in the anchor file, in order. A torn final line (crash while anchoring) is
// ignored; anything else malformed is an error, since the anchor is the trust root.
class AnchorReader {
 public:
  explicit AnchorReader(const std::optional<std::filesystem::path>& anchor) {
    if (anchor && ::access(anchor->c_str(), F_OK) == 0) {
      path_ = *anchor;
      reader_.emplace(*anchor, 0);
    }
  }

  std::optional<Checkpoint> next() {
    if (!reader_) return std::nullopt;
    std::string_view line;
    auto st = reader_->next(line);
    if (st == LineReader::Status::eof || st == LineReader::Status::torn) return std::nullopt;
    const audit::Member* seq = nullptr;
    const audit::Member* hash = nullptr;
    Checkpoint cp;
    if (st == LineReader::Status::line && scanner_.scan(line)) {
      seq = scanner_.find("seq");
      hash = scanner_.find("hash");
    }
    if (!seq || !hash || !audit::parse_u64(seq->value, cp.seq) || hash->value.size() != audit::kHashHex + 2)
      throw Error("audit anchor " + path_.string() + " line " + std::to_string(reader_->line_no()) +
                      " is not a checkpoint",
                  "the anchor is damaged; compare it with the syslog checkpoints");
    if (cp.seq < last_seq_)
      throw Error("audit anchor " + path_.string() + " line " + std::to_string(reader_->line_no()) +
                      " goes back to seq " + std::to_string(cp.seq),
                  "the anchor is damaged; compare it with the syslog checkpoints");
    last_seq_ = cp.seq;
    cp.hash = std::string(hash->value.substr(1, audit::kHashHex));
    return cp;
  }

 private:
  std::filesystem::path path_;
  std::optional<LineReader> reader_;
  audit::LineScanner scanner_;
  uint64_t last_seq_ = 0;
};

// One line of the log, checked on its own (syntax, key, hash).
struct Rec {
  std::optional<AuditDamage> problem;
  std::string detail;
  size_t file = 0;
  uint64_t line = 0, offset = 0, end = 0;
  uint64_t seq = 0;
  audit::HexDigest prev{}, hash{};
  bool prune = false;
  uint64_t through_seq = 0;
  audit::HexDigest through_hash{};
};

std::string_view view(const audit::HexDigest& d) { return {d.data(), d.size()}; }

void copy_hex(std::string_view from, audit::HexDigest& to) { std::memcpy(to.data(), from.data(), to.size()); }

class Verifier {
 public:
  explicit Verifier(const AuditVerifyOptions& opt) : opt_(opt) {
    if (opt.key) {
      keyed_.emplace(*opt.key);
      kid_ = audit::key_id(*opt.key);
    }
  }

  AuditVerifyResult run() {
    if (::access(opt_.log.c_str(), F_OK) != 0) {
      result_.files.push_back(opt_.log);
      return damage(AuditDamage::missing, opt_.log, 0, 0, std::nullopt,
                    "the log file does not exist (deleted?)");
    }
    result_.files = audit_log_files(opt_.log);
    AnchorReader anchor(opt_.anchor);
    std::optional<Checkpoint> cp = anchor.next();

    while (std::optional<Rec> cur = read()) {
      Rec& r = *cur;
      if (r.problem) return damage(*r.problem, r, r.detail);
      if (!have_last_) {
        result_.first_seq = r.seq;
        if (r.seq == 1 && view(r.prev) != audit::kGenesisPrev)
          return damage(AuditDamage::modified, r, "the first record does not start a chain (prev is not zero)");
        if (r.seq > 1) start_gap_ = r;
        while (cp && cp->seq < r.seq) cp = anchor.next();  // checkpoints of pruned files
      } else if (r.seq == last_.seq + 1 && r.prev == last_.hash) {
        // linked
      } else if (have_last2_ && r.prev == last2_.hash && r.seq == last2_.seq + 1) {
        return damage(AuditDamage::inserted, last_,
                      "this record is not part of the chain: the next record (line " +
                          std::to_string(r.line) + ") links to the one before it");
      } else if (r.seq == last_.seq + 1) {
        return damage(AuditDamage::modified, last_,
                      "this record was replaced: the next record (line " + std::to_string(r.line) +
                          ") links to a different hash");
      } else if (r.seq > last_.seq + 1) {
        if (appears_later(r, last_.seq + 1, r.seq - 1))
          return damage(AuditDamage::reordered, r,
                        "seq " + std::to_string(r.seq) + " where " + std::to_string(last_.seq + 1) +
                            " was expected; the skipped records appear later");
        return damage(AuditDamage::deleted, r,
                      "records " + range(last_.seq + 1, r.seq - 1) + " are missing before this one");
      } else {
        return damage(AuditDamage::inserted, r,
                      "seq " + std::to_string(r.seq) + " repeats or precedes seq " +
                          std::to_string(last_.seq) + " (a replayed or forged record)");
      }
      if (cp && cp->seq == r.seq) {
        if (cp->hash != view(r.hash))
          return damage(AuditDamage::rolled_back, r,
                        "differs from the anchored checkpoint for seq " + std::to_string(r.seq) +
                            " (the log was rolled back, rewritten or replaced)");
        ++result_.checkpoints_matched;
        cp = anchor.next();
      }
      if (r.prune && start_gap_ && r.through_seq + 1 == start_gap_->seq &&
          r.through_hash == start_gap_->prev)
        start_gap_.reset();
      ++result_.records;
      last2_ = std::move(last_);
      have_last2_ = have_last_;
      last_ = std::move(r);
      have_last_ = true;
    }
    if (start_gap_)
      return damage(AuditDamage::deleted, *start_gap_,
                    "the chain starts at seq " + std::to_string(start_gap_->seq) + "; records " +
                        range(1, start_gap_->seq - 1) + " are missing and no prune record accounts for them");
    if (cp)
      return damage(AuditDamage::truncated_after_checkpoint, result_.files.back(), 0, 0, cp->seq,
                    "the anchor holds a checkpoint for seq " + std::to_string(cp->seq) +
                        " but the log ends at seq " + std::to_string(have_last_ ? last_.seq : 0));
    if (have_last_) {
      result_.last_seq = last_.seq;
      result_.last_hash = view(last_.hash);
    }
    return std::move(result_);
  }

  const audit::ObjectRefs& objects() const { return objects_; }

 private:
  static std::string range(uint64_t a, uint64_t b) {
    return a == b ? std::to_string(a) : std::to_string(a) + ".." + std::to_string(b);
  }

  AuditVerifyResult damage(AuditDamage kind, const Rec& r, std::string detail) {
    return damage(kind, result_.files[r.file], r.line, r.offset, r.seq ? std::optional(r.seq) : std::nullopt,
                  std::move(detail));
  }

  AuditVerifyResult damage(AuditDamage kind, const std::filesystem::path& file, uint64_t line,
                           uint64_t offset, std::optional<uint64_t> seq, std::string detail) {
    if (have_last_) {
      result_.last_seq = last_.seq;
      result_.last_hash = view(last_.hash);
    }
    result_.damage = AuditDamageReport{kind, file, line, offset, seq, std::move(detail)};
    return std::move(result_);
  }

  // The next line of the chain across files, checked on its own.
  std::optional<Rec> read() {
    for (;;) {
      if (!reader_) {
        if (file_ >= result_.files.size()) return std::nullopt;
        reader_.emplace(result_.files[file_], 0);
      }
      std::string_view line;
      auto st = reader_->next(line);
      if (st == LineReader::Status::eof) {
        struct stat sb {};
        if (::stat(result_.files[file_].c_str(), &sb) == 0) result_.bytes += static_cast<uint64_t>(sb.st_size);
        reader_.reset();
        ++file_;
        continue;
      }
      Rec r;
      r.file = file_;
      r.line = reader_->line_no();
      r.offset = reader_->offset();
      r.end = r.offset + line.size() + 1;
      check(st, line, r);
      return r;
    }
  }

  void check(LineReader::Status st, std::string_view line, Rec& r) {
    if (st == LineReader::Status::torn) {
      r.problem = AuditDamage::torn_last_line;
      r.detail = "the last " + std::to_string(line.size()) +
                 " bytes are an incomplete record (crash during an append); run `sandboxrun audit repair`";
      return;
    }
    if (st == LineReader::Status::too_long) {
      r.problem = AuditDamage::modified;
      r.detail = "line longer than " + std::to_string(audit::kMaxRecordBytes) + " bytes";
      return;
    }
    audit::RecordFields f;
    std::string err;
    if (!audit::parse_record(line, scanner_, f, err)) {
      r.problem = AuditDamage::modified;
      r.detail = "malformed record: " + err;
      return;
    }
    r.seq = f.seq;
    copy_hex(f.prev, r.prev);
    copy_hex(f.hash, r.hash);
    auto [a, b] = audit::hashed_spans(line, f.hash_pos);
    if (keyed_) {
      if (f.kid.empty()) {
        r.problem = AuditDamage::forged;
        r.detail = "record carries no key id: it was not written with the key";
        return;
      }
      if (f.kid != kid_) {
        r.problem = AuditDamage::bad_key;
        r.detail = "record was written with key id " + std::string(f.kid) + ", the given key is " + kid_;
        return;
      }
      audit::HexDigest mac = keyed_->digest(a, b);
      if (std::string_view(mac.data(), mac.size()) != f.hash) {
        audit::HexDigest plain = plain_.digest(a, b);
        bool recomputed = std::string_view(plain.data(), plain.size()) == f.hash;
        r.problem = recomputed ? AuditDamage::forged : AuditDamage::modified;
        r.detail = recomputed ? "hash was recomputed without the key (plain SHA-256, not the HMAC)"
                              : "content does not match its HMAC";
        return;
      }
    } else {
      if (!f.kid.empty()) {
        r.problem = AuditDamage::bad_key;
        r.detail = "this is a keyed log (key id " + std::string(f.kid) + "); pass --key or set key_file";
        return;
      }
      audit::HexDigest h = plain_.digest(a, b);
      if (std::string_view(h.data(), h.size()) != f.hash) {
        r.problem = AuditDamage::modified;
        r.detail = "content does not match its hash";
        return;
      }
    }
    if (opt_.objects) objects_.add(r.seq, f.run_id, scanner_);
    if (f.event == "prune") {
      const audit::Member* ts = scanner_.find("through_seq");
      const audit::Member* th = scanner_.find("through_hash");
      if (ts && th && audit::parse_u64(ts->value, r.through_seq) && th->value.size() == audit::kHashHex + 2) {
        r.prune = true;
        copy_hex(th->value.substr(1, audit::kHashHex), r.through_hash);
      }
    }
  }

  // Whether a record with lo <= seq <= hi follows `r` (a constant-memory forward scan, only
  // after a gap, to tell reordering from deletion).
  bool appears_later(const Rec& r, uint64_t lo, uint64_t hi) {
    audit::LineScanner scan;
    audit::RecordFields f;
    std::string err;
    uint64_t start = r.end;
    for (size_t i = r.file; i < result_.files.size(); ++i, start = 0) {
      LineReader reader(result_.files[i], start);
      std::string_view line;
      while (reader.next(line) == LineReader::Status::line)
        if (audit::parse_record(line, scan, f, err) && f.seq >= lo && f.seq <= hi) return true;
    }
    return false;
  }

  const AuditVerifyOptions& opt_;
  AuditVerifyResult result_;
  std::optional<audit::RecordHasher> keyed_;
  audit::RecordHasher plain_;
  std::string kid_;
  audit::LineScanner scanner_;
  std::optional<LineReader> reader_;
  size_t file_ = 0;
  Rec last_, last2_;
  bool have_last_ = false, have_last2_ = false;
  std::optional<Rec> start_gap_;
  audit::ObjectRefs objects_;
};

}  // namespace

AuditVerifyResult verify_audit_log(const AuditVerifyOptions& opt) {
  Verifier v(opt);
  AuditVerifyResult res = v.run();
  // Each distinct object once, after the chain: what the records read up to any damage name.
  if (opt.objects) res.objects = v.objects().check(audit::objects_dir(opt.log));
  return res;
}

}  // namespace sandboxrun
