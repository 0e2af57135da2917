// The image cache: cache_dir/<alg>-<hex>/{rootfs/, image.json}, keyed by manifest digest.
// An entry is built in a temporary directory beside it and renamed into place, under an flock on
// cache_dir/<alg>-<hex>.lock, so an entry that exists is complete and is unpacked only once.
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "confined.hpp"
#include "sandboxrun/error.hpp"
#include "sandboxrun/image_oci.hpp"
#include "sandboxrun/safe_open.hpp"
#include "unpack.hpp"

namespace sandboxrun::image {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* info_file = "image.json";

class CacheLock {
 public:
  CacheLock(const fs::path& cache_dir, const Digest& digest) {
    const fs::path path = cache_dir / (digest.dirname() + ".lock");
    fd_ = open_trusted_file(path, O_RDWR | O_CREAT, 0600);
    while (flock(fd_.get(), LOCK_EX) != 0)
      if (errno != EINTR) throw_errno("cannot lock " + path.string());
  }

 private:
  UniqueFd fd_;  // closing it releases the lock
};

// Private: an unpacked image holds the image's setuid binaries, which local users must not
// reach through the cache. Trusted (safe_open.hpp): root unpacks here, and runs what it finds.
void make_cache_dir(const fs::path& dir) { open_trusted_dir(dir, true, 0700); }

bool is_entry_name(const std::string& name) {
  const auto dash = name.find('-');
  if (dash == std::string::npos) return false;
  try {
    Digest::parse(name.substr(0, dash) + ":" + name.substr(dash + 1));
    return true;
  } catch (const Error&) {
    return false;
  }
}

std::string now_utc() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

CachedImage load_entry(const fs::path& entry, const std::string& digest) {
  CachedImage img;
  img.manifest_digest = digest;
  img.rootfs = entry / "rootfs";
  const std::string what = "image cache entry " + entry.string() + ": " + info_file;
  UniqueFd dir(open(entry.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir) throw_errno("cannot open " + entry.string());
  const json info = json::parse(detail::read_small_file(dir.get(), info_file, max_document_bytes, what),
                                nullptr, false);
  if (!info.is_object()) throw Error(what + " is damaged", "remove the entry with `sandboxrun image rm`");
  img.source = info.value("source", "");
  img.unpacked_at = info.value("unpacked_at", "");
  img.bytes = info.value("bytes", uint64_t{0});
  if (const auto it = info.find("config"); it != info.end() && it->is_object())
    parse_config(it->dump(), what, img.config);
  return img;
}

fs::path entry_path(const fs::path& cache_dir, const Digest& d) { return cache_dir / d.dirname(); }

// Leftovers of an unpack that was killed: only their digest's lock holder may remove them.
void remove_stale_temporaries(const fs::path& cache_dir, const Digest& d) {
  const std::string prefix = d.dirname() + ".tmp-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(cache_dir, ec))
    if (e.path().filename().string().starts_with(prefix)) detail::remove_tree(e.path());
}

}  // namespace

fs::path default_cache_dir() {
  if (geteuid() == 0) return "/var/lib/sandboxrun/images";
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg == '/')
    return fs::path(xdg) / "sandboxrun" / "images";
  const char* home = std::getenv("HOME");
  if (!home || *home != '/') {
    const passwd* pw = getpwuid(geteuid());
    home = pw ? pw->pw_dir : nullptr;
  }
  if (!home || *home != '/')
    throw Error("cannot find a directory for the image cache", "set XDG_CACHE_HOME or HOME, or pass --cache DIR");
  return fs::path(home) / ".cache" / "sandboxrun" / "images";
}

CachedImage ensure_image(const ImageRef& ref, const fs::path& cache_dir) {
  const Layout layout(ref.layout);
  const ResolvedImage image = resolve_image(layout, ref.tag);
  const Digest& digest = image.manifest.digest;
  const fs::path entry = entry_path(cache_dir, digest);
  auto done = [&] {
    CachedImage c = load_entry(entry, digest.str());
    c.config = image.config;
    return c;
  };
  // Checked before the first look: a cache reached through a symlink or another user's
  // directory could hand us a rootfs someone else prepared.
  make_cache_dir(cache_dir);
  std::error_code ec;
  if (fs::is_directory(entry / "rootfs", ec)) return done();

  const CacheLock lock(cache_dir, digest);
  if (fs::is_directory(entry / "rootfs", ec)) return done();  // another process unpacked it
  remove_stale_temporaries(cache_dir, digest);

  detail::TempDir tmp(entry);
  const UnpackResult result = unpack_resolved(layout, image, tmp.path() / "rootfs", {});
  const json info = {
      {"manifest_digest", digest.str()},
      {"source", ImageRef{fs::absolute(ref.layout, ec), ref.tag}.str()},
      {"unpacked_at", now_utc()},
      {"bytes", result.stats.bytes},
      {"files", result.stats.files},
      {"config", json::parse(image.config_json)},
  };
  const fs::path info_path = tmp.path() / info_file;
  const std::string text = info.dump(2) + "\n";
  UniqueFd out(open(info_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out || !write_all(out.get(), text.data(), text.size())) throw_errno("cannot write " + info_path.string());
  out.reset();
  if (chmod(tmp.path().c_str(), 0755) != 0) throw_errno("cannot chmod " + tmp.path().string());
  if (rename(tmp.path().c_str(), entry.c_str()) != 0)
    throw_errno("cannot move the unpacked image into the cache at " + entry.string());
  tmp.release();
  return done();
}

std::vector<CachedImage> list_cached_images(const fs::path& cache_dir) {
  std::vector<CachedImage> out;
  std::error_code ec;
  if (!fs::exists(cache_dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(cache_dir)) {
    const std::string name = e.path().filename();
    if (!is_entry_name(name) || !fs::is_directory(e.path() / "rootfs", ec)) continue;
    const auto dash = name.find('-');
    out.push_back(load_entry(e.path(), name.substr(0, dash) + ":" + name.substr(dash + 1)));
  }
  std::sort(out.begin(), out.end(),
            [](const CachedImage& a, const CachedImage& b) { return a.manifest_digest < b.manifest_digest; });
  return out;
}

std::string remove_cached_image(const fs::path& cache_dir, const std::string& digest) {
  std::string algorithm;
  std::string hex = digest;
  if (const auto sep = digest.find_first_of(":-"); sep != std::string::npos) {
    algorithm = digest.substr(0, sep);
    hex = digest.substr(sep + 1);
  }
  const bool is_hex = !hex.empty() && std::all_of(hex.begin(), hex.end(), [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  });
  if (!is_hex || hex.size() < 12)
    throw Error("'" + digest + "' is not an image digest",
                "give sha256:<hex> (at least 12 hex digits) as `sandboxrun image ls` shows it");

  std::vector<Digest> matches;
  std::error_code ec;
  if (fs::exists(cache_dir, ec))
    for (const auto& e : fs::directory_iterator(cache_dir)) {
      const std::string name = e.path().filename();
      if (!is_entry_name(name)) continue;
      const auto dash = name.find('-');
      Digest d{name.substr(0, dash), name.substr(dash + 1)};
      if ((algorithm.empty() || algorithm == d.algorithm) && d.hex.starts_with(hex))
        matches.push_back(std::move(d));
    }
  if (matches.empty()) throw Error("no cached image matches '" + digest + "' in " + cache_dir.string());
  if (matches.size() > 1)
    throw Error("'" + digest + "' matches " + std::to_string(matches.size()) + " cached images",
                "give more digits");

  const Digest& d = matches.front();
  const CacheLock lock(cache_dir, d);
  const fs::path entry = entry_path(cache_dir, d);
  // Rename first: a reader never sees a half-removed entry.
  const fs::path doomed = cache_dir / (d.dirname() + ".tmp-removing");
  detail::remove_tree(doomed);
  if (rename(entry.c_str(), doomed.c_str()) != 0) throw_errno("cannot remove " + entry.string());
  if (!detail::remove_tree(doomed)) throw Error("cannot remove " + doomed.string() + " completely");
  return d.str();
}

}  // namespace sandboxrun::image
