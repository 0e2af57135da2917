// Which rootfs a run uses: a named image from the image store, a rootfs directory, or an OCI
// layout through the verified, cached unpack.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "sandboxrun/spec.hpp"

namespace sandboxrun::core {

struct ResolvedImage {
  std::filesystem::path rootfs;
  std::string digest;              // manifest digest, or "dir:PATH" for a plain directory
  std::vector<std::string> env;    // the image's Env (OCI config)
};

// `where`: NAME[:TAG] (no slash) is looked up in $SANDBOXRUN_IMAGE_STORE and the installation's
// image store (<store>/rootfs/NAME unpacked, else <store>/images/NAME an OCI layout); anything
// else is a rootfs directory or an OCI layout path[:TAG]. Throws Error listing what was tried.
ResolvedImage resolve_image(const std::string& where);

// The image's environment under the spec's (PATH, LANG and PYTHON* come from the image, since
// it knows where its python lives), and its interpreter.
void apply_image(SandboxSpec& spec, const ResolvedImage& img);

// The run's spec, decided once: nothing patches it afterwards. The trust level's settings
// (`resolved`, from resolve_spec), then in this order, later ones winning: the request's
// environment, the image (apply_image), the egress proxy's variables in allowlist mode (its
// settings checked first: fail closed before anything starts), and the installed dependencies
// (`deps`, bound at /run/NAME and put first on PYTHONPATH).
SandboxSpec finalize_spec(SandboxSpec resolved, const std::map<std::string, std::string>& env, const ResolvedImage& img,
                          const std::optional<RunBind>& deps);

}  // namespace sandboxrun::core
