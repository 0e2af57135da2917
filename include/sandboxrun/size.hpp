// Docker-style sizes ("512m", "1g", "1.5GiB", "1048576"), as options and sandbox.yaml give them
// and as messages show them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sandboxrun {

// Parses a byte size: a number (integer or decimal) and an optional unit b, k, m, g, t
// (case-insensitive, optional trailing "b"/"ib"; binary multiples as Docker uses).
// Returns nullopt for anything else ("1x", "", "-1", overflow); throws nothing.
std::optional<uint64_t> parse_size(std::string_view text);

// "268435456" -> "256MiB" for messages; throws nothing but std::bad_alloc.
std::string format_size(uint64_t bytes);

}  // namespace sandboxrun
