// OCI image layout, index, manifest and config: parsing (nlohmann-json) and blob verification.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <set>

#include "confined.hpp"
#include "sandboxrun/error.hpp"
#include "image/image_oci.hpp"

namespace sandboxrun::image {

using nlohmann::json;

namespace {

constexpr size_t max_layers = 1024;
constexpr int max_index_depth = 4;

json parse_json(std::string_view text, const std::string& what) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw Error(what + ": invalid JSON: " + e.what());
  }
}

const json& require(const json& obj, const char* key, json::value_t type, const std::string& what) {
  const auto it = obj.find(key);
  if (it == obj.end()) throw Error(what + ": missing \"" + key + "\"");
  const bool ok = type == json::value_t::number_unsigned ? it->is_number_unsigned()
                                                         : it->type() == type;
  if (!ok) throw Error(what + ": \"" + key + "\" has the wrong type (" + it->type_name() + ")");
  return *it;
}

std::string optional_string(const json& obj, const char* key, const std::string& what) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_string()) throw Error(what + ": \"" + key + "\" must be a string");
  return it->get<std::string>();
}

std::vector<std::string> optional_strings(const json& obj, const char* key, const std::string& what) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return {};
  if (!it->is_array()) throw Error(what + ": \"" + key + "\" must be an array of strings");
  std::vector<std::string> out;
  for (const auto& v : *it) {
    if (!v.is_string()) throw Error(what + ": \"" + key + "\" must be an array of strings");
    out.push_back(v.get<std::string>());
  }
  return out;
}

void check_schema_version(const json& doc, const std::string& what) {
  const auto& v = require(doc, "schemaVersion", json::value_t::number_unsigned, what);
  if (v.get<uint64_t>() != 2) throw Error(what + ": schemaVersion must be 2");
}

// The document's own mediaType, when present, must be one of `allowed`.
void check_media_type(const json& doc, const std::string& what,
                      std::initializer_list<std::string_view> allowed) {
  const std::string mt = optional_string(doc, "mediaType", what);
  if (mt.empty()) return;
  for (const auto a : allowed)
    if (mt == a) return;
  throw Error(what + ": unexpected mediaType '" + mt + "'");
}

Descriptor parse_descriptor(const json& j, const std::string& what) {
  if (!j.is_object()) throw Error(what + ": a descriptor must be an object");
  Descriptor d;
  d.media_type = require(j, "mediaType", json::value_t::string, what).get<std::string>();
  d.digest = Digest::parse(require(j, "digest", json::value_t::string, what).get<std::string>(),
                           what + " digest");
  d.size = require(j, "size", json::value_t::number_unsigned, what).get<uint64_t>();
  if (const auto it = j.find("annotations"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) throw Error(what + ": \"annotations\" must be an object");
    for (const auto& [k, v] : it->items()) {
      if (!v.is_string()) throw Error(what + ": annotation '" + k + "' must be a string");
      d.annotations[k] = v.get<std::string>();
    }
  }
  if (const auto it = j.find("platform"); it != j.end() && !it->is_null()) {
    if (!it->is_object()) throw Error(what + ": \"platform\" must be an object");
    d.platform.os = optional_string(*it, "os", what + " platform");
    d.platform.architecture = optional_string(*it, "architecture", what + " platform");
    d.platform.variant = optional_string(*it, "variant", what + " platform");
  }
  return d;
}

bool is_index_type(std::string_view mt) {
  return mt == media_type::oci_index || mt == media_type::docker_list;
}
bool is_manifest_type(std::string_view mt) {
  return mt == media_type::oci_manifest || mt == media_type::docker_manifest;
}

std::string tag_of(const Descriptor& d) {
  const auto it = d.annotations.find(std::string(ref_name_annotation));
  return it == d.annotations.end() ? std::string() : it->second;
}

std::string list_tags(const std::vector<Descriptor>& manifests) {
  std::set<std::string> tags;
  for (const auto& d : manifests)
    if (auto t = tag_of(d); !t.empty()) tags.insert(t);
  if (tags.empty()) return "the index has no tagged manifests";
  std::string out = "tags in this layout: ";
  for (const auto& t : tags) out += (out.back() == ' ' ? "" : ", ") + t;
  return out;
}

bool platform_matches(const Platform& p) {
  return (p.os.empty() || p.os == "linux") &&
         (p.architecture.empty() || p.architecture == host_architecture());
}

}  // namespace

const char* to_string(Compression c) {
  switch (c) {
    case Compression::none: return "uncompressed";
    case Compression::gzip: return "gzip";
    case Compression::zstd: return "zstd";
  }
  return "?";
}

Compression layer_compression(std::string_view mt) {
  // The nondistributable ("foreign") variants are deprecated but still seen in the wild.
  if (mt == media_type::oci_layer || mt == "application/vnd.oci.image.layer.nondistributable.v1.tar")
    return Compression::none;
  if (mt == media_type::oci_layer_gzip || mt == media_type::docker_layer_gzip ||
      mt == "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip" ||
      mt == "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip")
    return Compression::gzip;
  if (mt == media_type::oci_layer_zstd ||
      mt == "application/vnd.oci.image.layer.nondistributable.v1.tar+zstd")
    return Compression::zstd;
  throw Error("unsupported layer media type '" + std::string(mt) + "'",
              "supported: OCI layer tar, tar+gzip, tar+zstd and Docker's tar.gzip");
}

std::vector<Descriptor> parse_index(std::string_view text, const std::string& what) {
  const json doc = parse_json(text, what);
  if (!doc.is_object()) throw Error(what + ": must be a JSON object");
  check_schema_version(doc, what);
  check_media_type(doc, what, {media_type::oci_index, media_type::docker_list});
  const auto& list = require(doc, "manifests", json::value_t::array, what);
  std::vector<Descriptor> out;
  for (size_t i = 0; i < list.size(); ++i)
    out.push_back(parse_descriptor(list[i], what + " manifests[" + std::to_string(i) + "]"));
  return out;
}

Manifest parse_manifest(std::string_view text, const std::string& what) {
  const json doc = parse_json(text, what);
  if (!doc.is_object()) throw Error(what + ": must be a JSON object");
  check_schema_version(doc, what);
  check_media_type(doc, what, {media_type::oci_manifest, media_type::docker_manifest});
  Manifest m;
  m.config = parse_descriptor(require(doc, "config", json::value_t::object, what), what + " config");
  if (m.config.media_type != media_type::oci_config && m.config.media_type != media_type::docker_config)
    throw Error(what + ": config media type '" + m.config.media_type +
                    "' is not a container image config",
                "this layout holds an artifact, not a runnable image");
  const auto& layers = require(doc, "layers", json::value_t::array, what);
  if (layers.size() > max_layers)
    throw Error(what + ": " + std::to_string(layers.size()) + " layers, more than " +
                std::to_string(max_layers));
  for (size_t i = 0; i < layers.size(); ++i) {
    auto d = parse_descriptor(layers[i], what + " layers[" + std::to_string(i) + "]");
    layer_compression(d.media_type);  // throws for non-layer types
    m.layers.push_back(std::move(d));
  }
  return m;
}

std::vector<Digest> parse_config(std::string_view text, const std::string& what, ImageConfig& config) {
  const json doc = parse_json(text, what);
  if (!doc.is_object()) throw Error(what + ": must be a JSON object");
  config.os = optional_string(doc, "os", what);
  config.architecture = optional_string(doc, "architecture", what);
  if (const auto it = doc.find("config"); it != doc.end() && !it->is_null()) {
    if (!it->is_object()) throw Error(what + ": \"config\" must be an object");
    const std::string w = what + " config";
    config.env = optional_strings(*it, "Env", w);
    config.entrypoint = optional_strings(*it, "Entrypoint", w);
    config.cmd = optional_strings(*it, "Cmd", w);
    config.working_dir = optional_string(*it, "WorkingDir", w);
    config.user = optional_string(*it, "User", w);
  }
  const auto& rootfs = require(doc, "rootfs", json::value_t::object, what);
  if (require(rootfs, "type", json::value_t::string, what + " rootfs").get<std::string>() != "layers")
    throw Error(what + ": rootfs.type must be \"layers\"");
  const auto& ids = require(rootfs, "diff_ids", json::value_t::array, what + " rootfs");
  std::vector<Digest> out;
  for (const auto& id : ids) {
    if (!id.is_string()) throw Error(what + ": rootfs.diff_ids must hold strings");
    out.push_back(Digest::parse(id.get<std::string>(), what + " diff_id"));
  }
  return out;
}

std::string host_architecture() {
  utsname u{};
  uname(&u);
  const std::string m = u.machine;
  if (m == "x86_64") return "amd64";
  if (m == "aarch64") return "arm64";
  if (m.starts_with("armv")) return "arm";
  if (m == "i686" || m == "i386") return "386";
  return m;  // ppc64le, s390x, riscv64 are spelled the same
}

Layout::Layout(const std::filesystem::path& dir) : path_(dir) {
  dir_.reset(open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir_)
    throw_errno("image layout " + dir.string(),
                "give the directory of an OCI image layout (oci-layout, index.json, blobs/)");
  const std::string what = "image layout " + dir.string() + ": oci-layout";
  const json doc = parse_json(detail::read_small_file(dir_.get(), "oci-layout", 64 << 10, what), what);
  if (!doc.is_object()) throw Error(what + ": must be a JSON object");
  const auto version =
      require(doc, "imageLayoutVersion", json::value_t::string, what).get<std::string>();
  if (!version.starts_with("1.")) throw Error(what + ": unsupported imageLayoutVersion " + version);
}

std::vector<Descriptor> Layout::index() const {
  const std::string what = "image layout " + path_.string() + ": index.json";
  return parse_index(detail::read_small_file(dir_.get(), "index.json", max_document_bytes, what), what);
}

UniqueFd Layout::open_blob(const Descriptor& d) const {
  const std::string rel = "blobs/" + d.digest.algorithm + "/" + d.digest.hex;
  const std::string what = "image layout " + path_.string() + ": blob " + d.digest.str();
  UniqueFd fd(detail::openat2_fd(dir_.get(), rel.c_str(), O_RDONLY | O_NOCTTY | O_NONBLOCK,
                                 detail::resolve_beneath));
  if (!fd) {
    if (errno == ENOENT)
      throw Error(what + " (" + d.media_type + ") is missing",
                  "the layout is incomplete; copy the image again (e.g. skopeo copy)");
    throw_errno(what);
  }
  struct stat st {};
  if (fstat(fd.get(), &st) != 0) throw_errno(what);
  if (!S_ISREG(st.st_mode)) throw Error(what + " is not a regular file");
  if (static_cast<uint64_t>(st.st_size) != d.size)
    throw Error(what + " is " + std::to_string(st.st_size) + " bytes but its descriptor says " +
                    std::to_string(d.size),
                "the layout is corrupt; copy the image again");
  return fd;
}

std::string Layout::read_blob(const Descriptor& d, uint64_t max_size) const {
  const std::string what = "image layout " + path_.string() + ": blob " + d.digest.str();
  if (d.size > max_size)
    throw Error(what + " declares " + std::to_string(d.size) + " bytes, more than the " +
                std::to_string(max_size) + " allowed for a " + d.media_type);
  UniqueFd fd = open_blob(d);
  Hasher h(d.digest.algorithm);
  std::string data = read_fd(fd.get(), d.size, what);
  if (data.size() != d.size) throw Error(what + " changed size while it was read");
  h.update(data.data(), data.size());
  const Digest actual = h.finish();
  if (actual != d.digest)
    throw Error(what + " does not match its digest (its content hashes to " + actual.str() + ")",
                "the layout is corrupt or was tampered with; copy the image again");
  return data;
}

void Layout::verify_blob(const Descriptor& d) const {
  const std::string what = "image layout " + path_.string() + ": blob " + d.digest.str();
  UniqueFd fd = open_blob(d);
  Hasher h(d.digest.algorithm);
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  while (true) {
    const ssize_t n = read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot read " + what);
    if (n == 0) break;
    h.update(buf.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  if (total != d.size) throw Error(what + " changed size while it was read");
  const Digest actual = h.finish();
  if (actual != d.digest)
    throw Error(what + " does not match its digest (its content hashes to " + actual.str() + ")",
                "the layout is corrupt or was tampered with; copy the image again");
}

ResolvedImage resolve_image(const Layout& layout, const std::string& tag) {
  const std::string where = "image layout " + layout.path().string();
  std::vector<Descriptor> manifests = layout.index();
  if (manifests.empty()) throw Error(where + ": index.json lists no manifests");

  std::vector<Descriptor> candidates;
  if (tag.empty() && manifests.size() == 1) {
    candidates = manifests;
  } else if (tag.empty()) {
    // Docker and skopeo read a missing tag as `latest`; without one the choice is ambiguous.
    for (const auto& d : manifests)
      if (tag_of(d) == "latest") candidates.push_back(d);
    if (candidates.empty())
      throw Error(where + " holds " + std::to_string(manifests.size()) +
                      " manifests and none is tagged 'latest'; name one as LAYOUT:TAG",
                  list_tags(manifests));
  } else {
    for (const auto& d : manifests)
      if (tag_of(d) == tag) candidates.push_back(d);
    if (candidates.empty()) throw Error(where + ": no manifest is tagged '" + tag + "'", list_tags(manifests));
  }

  // Several entries under one tag, or a nested index: pick this host's platform.
  auto pick = [&](std::vector<Descriptor>& list, const std::string& what) {
    if (list.size() == 1) return list.front();
    for (const auto& d : list)
      if (platform_matches(d.platform)) return d;
    throw Error(what + ": no manifest for linux/" + host_architecture());
  };
  Descriptor chosen = pick(candidates, where + (tag.empty() ? "" : ":" + tag));
  for (int depth = 0; is_index_type(chosen.media_type); ++depth) {
    if (depth == max_index_depth) throw Error(where + ": indexes nested too deeply");
    const std::string what = where + ": index " + chosen.digest.str();
    auto nested = parse_index(layout.read_blob(chosen), what);
    if (nested.empty()) throw Error(what + " lists no manifests");
    chosen = pick(nested, what);
  }
  if (!is_manifest_type(chosen.media_type))
    throw Error(where + ": " + chosen.digest.str() + " has unsupported media type '" +
                chosen.media_type + "'",
                "expected an OCI image manifest or index (or Docker's v2 equivalents)");

  ResolvedImage img;
  img.manifest = chosen;
  const Manifest m = parse_manifest(layout.read_blob(chosen), where + ": manifest " + chosen.digest.str());
  img.config_json = layout.read_blob(m.config);
  const auto diff_ids = parse_config(img.config_json, where + ": config " + m.config.digest.str(), img.config);
  if (!img.config.os.empty() && img.config.os != "linux")
    throw Error(where + ": the image is for " + img.config.os + ", not linux");
  if (diff_ids.size() != m.layers.size())
    throw Error(where + ": the manifest has " + std::to_string(m.layers.size()) +
                " layers but the config lists " + std::to_string(diff_ids.size()) + " diff_ids");
  for (size_t i = 0; i < m.layers.size(); ++i)
    img.layers.push_back(Layer{m.layers[i], layer_compression(m.layers[i].media_type), diff_ids[i]});
  return img;
}

std::string manifest_digest(const ImageRef& ref) {
  return resolve_image(Layout(ref.layout), ref.tag).manifest.digest.str();
}

}  // namespace sandboxrun::image
