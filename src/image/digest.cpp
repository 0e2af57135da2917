// Digests ("sha256:<hex>") and streaming hashing (common/sha256.hpp, common/sha512.hpp).
#include <algorithm>
#include <variant>

#include "common/sha256.hpp"
#include "common/sha512.hpp"

#include "sandboxrun/error.hpp"
#include "image/image_oci.hpp"

namespace sandboxrun::image {

namespace {

bool supported(std::string_view algorithm) { return algorithm == "sha256" || algorithm == "sha512"; }

size_t hex_length(std::string_view algorithm) { return algorithm == "sha256" ? 64 : 128; }

}  // namespace

Digest Digest::parse(std::string_view text, std::string_view what) {
  auto fail = [&]() -> Digest {
    throw Error(std::string(what) + ": '" + std::string(text.substr(0, 200)) +
                    "' is not a supported digest",
                "expected sha256:<64 lower-case hex digits> (or sha512:<128>)");
  };
  const auto colon = text.find(':');
  if (colon == std::string_view::npos) return fail();
  const auto algorithm = text.substr(0, colon);
  const auto hex = text.substr(colon + 1);
  if (!supported(algorithm) || hex.size() != hex_length(algorithm)) return fail();
  if (!std::all_of(hex.begin(), hex.end(),
                   [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }))
    return fail();
  return Digest{std::string(algorithm), std::string(hex)};
}

struct Hasher::Impl {
  std::string algorithm;
  std::variant<Sha256, Sha512> state;
};

Hasher::Hasher(std::string_view algorithm) : impl_(std::make_unique<Impl>()) {
  if (!supported(algorithm)) throw Error("unsupported digest algorithm '" + std::string(algorithm) + "'");
  impl_->algorithm = std::string(algorithm);
  if (algorithm == "sha512") impl_->state = Sha512();
}

Hasher::~Hasher() = default;
Hasher::Hasher(Hasher&&) noexcept = default;
Hasher& Hasher::operator=(Hasher&&) noexcept = default;

void Hasher::update(const void* data, size_t len) {
  const std::string_view bytes(static_cast<const char*>(data), len);
  std::visit([&](auto& h) { h.update(bytes); }, impl_->state);
}

Digest Hasher::finish() {
  return Digest{impl_->algorithm, to_hex(std::visit([](auto& h) { return h.final_raw(); }, impl_->state))};
}

}  // namespace sandboxrun::image
