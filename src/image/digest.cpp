// Digests ("sha256:<hex>") and streaming hashing with OpenSSL EVP.

#include <algorithm>
#include <array>

#include "common/libcrypto.hpp"
#include "common/sha256.hpp"
#include "sandboxrun/error.hpp"
#include "image/image_oci.hpp"

namespace sandboxrun::image {

namespace {

bool supported(std::string_view algorithm) { return algorithm == "sha256" || algorithm == "sha512"; }

const EVP_MD* evp_for(std::string_view algorithm) {
  if (algorithm == "sha256") return libcrypto().EVP_sha256();
  if (algorithm == "sha512") return libcrypto().EVP_sha512();
  return nullptr;
}

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
  EVP_MD_CTX* ctx = nullptr;
  ~Impl() {
    if (ctx) libcrypto().EVP_MD_CTX_free(ctx);
  }
};

Hasher::Hasher(std::string_view algorithm) : impl_(std::make_unique<Impl>()) {
  if (!supported(algorithm)) throw Error("unsupported digest algorithm '" + std::string(algorithm) + "'");
  impl_->algorithm = std::string(algorithm);
  impl_->ctx = libcrypto().EVP_MD_CTX_new();
  if (!impl_->ctx || libcrypto().EVP_DigestInit_ex(impl_->ctx, evp_for(algorithm), nullptr) != 1)
    throw Error("OpenSSL: cannot initialise " + impl_->algorithm);
}

Hasher::~Hasher() = default;
Hasher::Hasher(Hasher&&) noexcept = default;
Hasher& Hasher::operator=(Hasher&&) noexcept = default;

void Hasher::update(const void* data, size_t len) {
  if (len && libcrypto().EVP_DigestUpdate(impl_->ctx, data, len) != 1)
    throw Error("OpenSSL: " + impl_->algorithm + " update failed");
}

Digest Hasher::finish() {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  if (libcrypto().EVP_DigestFinal_ex(impl_->ctx, md.data(), &len) != 1)
    throw Error("OpenSSL: " + impl_->algorithm + " final failed");
  return Digest{impl_->algorithm, hex_of(std::string_view(reinterpret_cast<const char*>(md.data()), len))};
}

}  // namespace sandboxrun::image
