// Fuzzes the audit line scanner and record parser, with an oracle: whatever the strict
// scanner accepts must be exactly what canonical() writes for the same JSON value.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "audit/audit_format.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view line(reinterpret_cast<const char*>(data), size);
  sandboxrun::audit::LineScanner scanner;
  sandboxrun::audit::RecordFields fields;
  std::string error;
  bool record = sandboxrun::audit::parse_record(line, scanner, fields, error);
  if (!scanner.scan(line)) {
    if (record) std::abort();  // a record is always a scannable object
    return 0;
  }
  nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
  if (j.is_discarded() || !j.is_object() || sandboxrun::audit::canonical(j) != line) std::abort();
  if (record) {
    auto [a, b] = sandboxrun::audit::hashed_spans(line, fields.hash_pos);
    nlohmann::json without = j;
    without.erase("hash");
    if (std::string(a) + std::string(b) != sandboxrun::audit::canonical(without)) std::abort();
  }
  return 0;
}
