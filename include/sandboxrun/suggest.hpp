// "Did you mean": the known name a mistyped one most likely meant, for messages about unknown
// keys, commands and options.
#pragma once

#include <span>
#include <string_view>

namespace sandboxrun {

// The name in `known` that `word` is most likely a typo of (at most a third of its letters off),
// or "" when none is that close.
std::string_view nearest_name(std::string_view word, std::span<const std::string_view> known);

}  // namespace sandboxrun
