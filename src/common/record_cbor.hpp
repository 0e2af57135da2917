// A record (sandboxrun/record.hpp) in a cache entry: CBOR of its JSON form, so that what is
// stored is exactly the type's `fields` list and nothing kept by hand beside it. Decoding the
// ~1 KB of a parsed sandbox.yaml takes ~30 us; yaml-cpp takes ~500 us to parse the file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "sandboxrun/record.hpp"

namespace sandboxrun::cache {

template <class T>
std::string encode_record(const T& value) {
  const std::vector<uint8_t> bytes = nlohmann::json::to_cbor(nlohmann::json(value));
  return {bytes.begin(), bytes.end()};
}

// nullopt when the bytes are no CBOR, or not a T (an entry of an older layout reads as one with
// the fields it has; a field of the wrong type is a miss).
template <class T>
std::optional<T> decode_record(std::string_view bytes) {
  const nlohmann::json j = nlohmann::json::from_cbor(bytes.begin(), bytes.end(), true, false);
  if (j.is_discarded()) return std::nullopt;
  return record::read<T>(j);
}

// The layout of the records T...: each field's name and type, for a cache key, so that an entry
// written before a field was added, renamed or retyped is a miss instead of a record read with a
// default in its place (reading is lenient about missing fields). Nested records count only
// when listed.
template <class... T>
std::string layout_of() {
  std::string out;
  auto add = [&](const auto& schema) {
    for (const auto& [name, type] : schema) out += name + ':' + type + ';';
    out += '|';
  };
  (add(record::schema<T>()), ...);
  return out;
}

}  // namespace sandboxrun::cache
