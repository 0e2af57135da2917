#include "image_resolve.hpp"

#include <cctype>
#include <cstdlib>

#include "sandboxrun/error.hpp"
#include "sandboxrun/executor.hpp"
#include "sandboxrun/fd.hpp"
#include "sandboxrun/launch.hpp"
#include "image/image.hpp"
#include "common/install_paths.hpp"
#include "net/egress_proxy.hpp"

namespace sandboxrun::core {

namespace {

bool present(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::exists(p, ec);
}

ResolvedImage from_path(const std::string& where) {
  image::ImageRef ref = image::parse_image_ref(where);
  if (present(ref.layout / "oci-layout")) {
    image::CachedImage cached = image::ensure_image(ref, image::default_cache_dir());
    return {cached.rootfs, cached.manifest_digest, cached.config.env};
  }
  const std::filesystem::path dir = std::filesystem::absolute(where);
  ResolvedImage r{dir, "dir:" + dir.string(), {}};
  // build-image.sh records the manifest digest a rootfs was unpacked from beside it.
  const std::filesystem::path stamp = dir.parent_path() / ("." + dir.filename().string() + ".digest");
  if (present(stamp)) {
    std::string d = read_file(stamp.string());
    while (!d.empty() && std::isspace(static_cast<unsigned char>(d.back()))) d.pop_back();
    if (!d.empty()) r.digest = d;
  }
  return r;
}

}  // namespace

ResolvedImage resolve_image(const std::string& where) {
  if (where.find('/') != std::string::npos) return from_path(where);
  const auto colon = where.find(':');
  const std::string name = where.substr(0, colon);
  const std::string tag = colon == std::string::npos ? "" : where.substr(colon);
  std::vector<std::filesystem::path> stores;
  if (const char* s = std::getenv("SANDBOXRUN_IMAGE_STORE"); s && *s) stores.emplace_back(s);
  stores.push_back(install_paths().state_dir);
  std::string tried;
  for (const auto& store : stores) {
    if (tag.empty() && present(store / "rootfs" / name / "usr")) return from_path((store / "rootfs" / name).string());
    if (present(store / "images" / name / "oci-layout")) return from_path((store / "images" / name).string() + tag);
    tried += (tried.empty() ? "" : ", ") + (store / "rootfs" / name).string() + ", " + (store / "images" / name).string();
  }
  // The images `image build-default` makes (scripts/build-image.sh) can be built by name.
  const bool buildable = name == "default" || name == "science";
  throw Error("no image named '" + where + "' (looked at " + tried + ")",
              buildable ? "build it with `sandboxrun image build-default" + (name == "default" ? "" : " " + name) +
                              "` (or scripts/build-image.sh " + name + " in a checkout)"
                        : "pass a rootfs directory or an OCI layout path, or put the layout in an image store")
      .as(ErrorKind::image);
}

void apply_image(SandboxSpec& spec, const ResolvedImage& img) {
  spec.rootfs = img.rootfs;
  for (const auto& kv : img.env) {
    auto eq = kv.find('=');
    if (eq == std::string::npos) continue;
    std::string key = kv.substr(0, eq);
    if (key == "PATH" || key == "LANG" || key.rfind("PYTHON", 0) == 0 || !spec.env.count(key))
      spec.env[key] = kv.substr(eq + 1);
  }
  if (!present(spec.rootfs / "usr/bin/python3") && present(spec.rootfs / "usr/local/bin/python3"))
    spec.python = "/usr/local/bin/python3";
}

SandboxSpec finalize_spec(SandboxSpec spec, const std::map<std::string, std::string>& env, const ResolvedImage& img,
                          const std::optional<RunBind>& deps) {
  for (const auto& [k, v] : env) spec.env[k] = v;
  apply_image(spec, img);
  if (spec.network.mode == NetworkMode::allowlist) {
    net::validate_network_settings(spec.network);
    for (const char* k : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "PIP_PROXY"})
      spec.env[k] = "http://127.0.0.1:3128";
    spec.env["NO_PROXY"] = "";
    spec.env["no_proxy"] = "";
  }
  if (deps) {
    spec.run_binds.push_back(*deps);
    const std::string site = "/run/" + deps->name;
    auto it = spec.env.find("PYTHONPATH");
    spec.env["PYTHONPATH"] = it == spec.env.end() || it->second.empty() ? site : site + ":" + it->second;
  }
  return spec;
}

}  // namespace sandboxrun::core

namespace sandboxrun {

std::filesystem::path check_image(const std::string& where) {
  SandboxSpec spec;
  core::apply_image(spec, core::resolve_image(where));
  validate_rootfs(spec.rootfs.string(), spec.python);
  return spec.rootfs;
}

}  // namespace sandboxrun
