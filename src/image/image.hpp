// What the other modules use of the image module besides its public API (sandboxrun/image.hpp).
#pragma once

#include <filesystem>

#include "sandboxrun/image.hpp"

namespace sandboxrun::image {

// Resolves ref to its manifest and returns the cached rootfs, unpacking it first if needed.
// Concurrent callers (threads or processes) serialise on cache_dir/<alg>-<hex>.lock: one
// unpacks, the others wait and reuse it. A cache entry appears only complete (tmp + rename).
CachedImage ensure_image(const ImageRef& ref, const std::filesystem::path& cache_dir);

}  // namespace sandboxrun::image
