#include "config/config_cache.hpp"

#include "common/cache_io.hpp"
#include "common/install_paths.hpp"
#include "common/sha256.hpp"

namespace sandboxrun::config_cache {

namespace {

constexpr std::string_view kMagic = "SRSANDBOX\x03";  // bump the last byte when the encoding changes
constexpr std::string_view kKind = "sandbox-config-";

// Every setting must be written and read below. A changed size means a field was added or
// removed: add it to put()/get() and bump kMagic, then update the sizes here (the unit test's
// kEverySetting sets every key, so a field added into padding shows there).
static_assert(sizeof(SandboxConfig) == 824 && sizeof(LevelSettings) == 424 && sizeof(PackageIndex) == 56 &&
                  sizeof(CgroupSettings) == 40 && sizeof(IdRanges) == 12,
              "SandboxConfig changed: store the new setting in config_cache.cpp");

std::string key_of(const std::filesystem::path& file, const std::string& text) {
  std::string material(kMagic);
  material += file.string();
  material += '\0';
  material += install_paths().data_dir.string();
  material += '\0';
  material += text;
  return sha256_hex(material);
}

template <class T, class Put>
void put_opt(cache::Writer& w, const std::optional<T>& v, Put put) {
  w.u32(v ? 1 : 0);
  if (v) put(*v);
}

template <class T, class Get>
std::optional<T> get_opt(cache::Reader& in, Get get) {
  if (in.below(2) == 0) return std::nullopt;
  return std::optional<T>(get());
}

void put_map(cache::Writer& w, const std::map<std::string, std::string>& m) {
  w.u32(static_cast<uint32_t>(m.size()));
  for (const auto& [k, v] : m) {
    w.str(k);
    w.str(v);
  }
}

std::map<std::string, std::string> get_map(cache::Reader& in) {
  std::map<std::string, std::string> m;
  for (uint32_t n = in.count(); n > 0 && in.ok(); --n) {
    std::string k = in.str();
    m[std::move(k)] = in.str();
  }
  return m;
}

void put_level(cache::Writer& w, const LevelSettings& l) {
  auto f64 = [&](double v) { w.f64(v); };
  auto u64 = [&](uint64_t v) { w.u64(v); };
  auto u32 = [&](uint32_t v) { w.u32(v); };
  auto strs = [&](const std::vector<std::string>& v) { w.strs(v); };
  auto map = [&](const std::map<std::string, std::string>& m) { put_map(w, m); };
  put_opt(w, l.cpu_count, f64);
  for (const auto* v : {&l.mem_limit, &l.pids_limit}) put_opt(w, *v, u64);
  put_opt(w, l.timeout, f64);
  for (const auto* v : {&l.tmp_size, &l.output_limit, &l.work_size, &l.output_files_limit, &l.output_bytes_limit})
    put_opt(w, *v, u64);
  put_opt(w, l.seccomp_profile, [&](const std::filesystem::path& p) { w.str(p.string()); });
  for (const auto* v : {&l.uid, &l.gid}) put_opt(w, *v, u32);
  put_opt(w, l.network_mode, [&](NetworkMode m) { w.u32(static_cast<uint32_t>(m)); });
  put_opt(w, l.network_allowlist, strs);
  put_opt(w, l.extra_hosts, map);
  put_opt(w, l.allow_networks, strs);
  put_opt(w, l.environment, map);
  put_opt(w, l.requirements, strs);
}

LevelSettings get_level(cache::Reader& in) {
  auto f64 = [&] { return in.f64(); };
  auto u64 = [&] { return in.u64(); };
  auto u32 = [&] { return in.u32(); };
  auto strs = [&] { return in.strs(); };
  auto map = [&] { return get_map(in); };
  LevelSettings l;
  l.cpu_count = get_opt<double>(in, f64);
  for (auto* v : {&l.mem_limit, &l.pids_limit}) *v = get_opt<uint64_t>(in, u64);
  l.timeout = get_opt<double>(in, f64);
  for (auto* v : {&l.tmp_size, &l.output_limit, &l.work_size, &l.output_files_limit, &l.output_bytes_limit})
    *v = get_opt<uint64_t>(in, u64);
  l.seccomp_profile = get_opt<std::filesystem::path>(in, [&] { return std::filesystem::path(in.str()); });
  for (auto* v : {&l.uid, &l.gid}) *v = get_opt<uint32_t>(in, u32);
  l.network_mode = get_opt<NetworkMode>(in, [&] { return static_cast<NetworkMode>(in.below(2)); });
  l.network_allowlist = get_opt<std::vector<std::string>>(in, strs);
  l.extra_hosts = get_opt<std::map<std::string, std::string>>(in, map);
  l.allow_networks = get_opt<std::vector<std::string>>(in, strs);
  l.environment = get_opt<std::map<std::string, std::string>>(in, map);
  l.requirements = get_opt<std::vector<std::string>>(in, strs);
  return l;
}

std::string put(const SandboxConfig& c) {
  cache::Writer w;
  w.u32(static_cast<uint32_t>(c.default_trust));
  w.str(c.image);
  w.f64(c.host_memory_share);
  put_level(w, c.base);
  w.u32(static_cast<uint32_t>(c.levels.size()));
  for (const auto& [t, l] : c.levels) {
    w.u32(static_cast<uint32_t>(t));
    put_level(w, l);
  }
  w.str(c.cgroup.parent);
  w.u32(c.cgroup.allow_degraded);
  w.u32(static_cast<uint32_t>(c.landlock));
  for (uint32_t v : {c.id_ranges.base, c.id_ranges.size, c.id_ranges.slot_size}) w.u32(v);
  w.u32(c.monitoring);
  w.u32(c.monitor_interval_ms);
  w.u64(c.input_limit);
  w.u64(c.input_files_limit);
  w.str(c.package_index.url);
  w.strs(c.package_index.hosts);
  put_opt(w, c.cache_dir, [&](const std::filesystem::path& p) { w.str(p.string()); });
  w.u64(c.cache_max_size);
  return w.take();
}

std::optional<SandboxConfig> get(std::string_view payload) {
  cache::Reader in(payload);
  SandboxConfig c;
  c.default_trust = static_cast<Trust>(in.below(3));
  c.image = in.str();
  c.host_memory_share = in.f64();
  c.base = get_level(in);
  for (uint32_t n = in.count(); n > 0 && in.ok(); --n) {
    const auto t = static_cast<Trust>(in.below(3));
    c.levels[t] = get_level(in);
  }
  c.cgroup.parent = in.str();
  c.cgroup.allow_degraded = in.below(2) != 0;
  c.landlock = static_cast<LandlockMode>(in.below(3));
  for (uint32_t* v : {&c.id_ranges.base, &c.id_ranges.size, &c.id_ranges.slot_size}) *v = in.u32();
  c.monitoring = in.below(2) != 0;
  c.monitor_interval_ms = in.u32();
  c.input_limit = in.u64();
  c.input_files_limit = in.u64();
  c.package_index.url = in.str();
  c.package_index.hosts = in.strs();
  c.cache_dir = get_opt<std::filesystem::path>(in, [&] { return std::filesystem::path(in.str()); });
  c.cache_max_size = in.u64();
  if (!in.done()) return std::nullopt;
  return c;
}

// A profile found in the data directory while the same name beside sandbox.yaml did not exist:
// if that file exists now, the parser would pick it instead. A profile that is gone is the
// parser's error to report.
bool same_profile(const std::filesystem::path& dir, const std::optional<std::filesystem::path>& profile) {
  if (!profile) return true;
  std::error_code ec;
  if (!std::filesystem::exists(*profile, ec)) return false;
  const std::filesystem::path& data = install_paths().data_dir;
  if (data.empty()) return true;
  const std::filesystem::path rel = profile->lexically_relative(data);
  if (rel.empty() || *rel.begin() == "..") return true;
  return !std::filesystem::exists((dir / rel).lexically_normal(), ec);
}

}  // namespace

std::string encode(const SandboxConfig& cfg) { return put(cfg); }

std::optional<SandboxConfig> load(const std::filesystem::path& file, const std::string& text,
                                  const std::filesystem::path& cache_dir) {
  const std::optional<cache::Entry> entry = cache::read_keyed(cache_dir, kKind, kMagic, key_of(file, text));
  std::optional<SandboxConfig> c = entry ? get(entry->payload()) : std::nullopt;
  if (!c) return std::nullopt;
  c->file = file;
  c->dir = file.parent_path();
  c->digest = sha256_hex(text);
  if (!same_profile(c->dir, c->base.seccomp_profile)) return std::nullopt;
  for (const auto& [t, l] : c->levels)
    if (!same_profile(c->dir, l.seccomp_profile)) return std::nullopt;
  return c;
}

void store(const std::filesystem::path& file, const std::string& text, const std::filesystem::path& cache_dir,
           const SandboxConfig& cfg) {
  cache::write_keyed(cache_dir, kKind, kMagic, key_of(file, text), put(cfg));
}

}  // namespace sandboxrun::config_cache
