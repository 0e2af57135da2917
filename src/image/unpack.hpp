// Internal: unpack an already resolved image (the cache resolves first to find its key).
#pragma once

#include <filesystem>

#include "image/image.hpp"
#include "image/image_oci.hpp"

namespace sandboxrun::image {

UnpackResult unpack_resolved(const Layout& layout, const ResolvedImage& image,
                             const std::filesystem::path& dest, const UnpackOptions& options);

}  // namespace sandboxrun::image
