#include "common/libcrypto.hpp"

#include <dlfcn.h>
#include <openssl/crypto.h>

#include <string>

#include "sandboxrun/error.hpp"

namespace sandboxrun {

namespace {

constexpr const char* kSoname = "libcrypto.so.3";
constexpr const char* kFix = "install OpenSSL 3's library (Debian: apt install libssl3)";

template <class Fn>
void bind(void* lib, Fn& fn, const char* name) {
  void* p = ::dlsym(lib, name);
  if (!p) throw Error(std::string(kSoname) + " has no " + name, kFix);
  fn = reinterpret_cast<Fn>(p);
}

LibCrypto load() {
  // Never unloaded: contexts and digests handed out stay valid until the process ends.
  void* lib = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!lib) {
    const char* why = ::dlerror();
    throw Error(std::string("cannot load ") + kSoname + (why ? std::string(": ") + why : std::string()), kFix);
  }
  // Only SHA-2 and HMAC from the default provider are used: not reading openssl.cnf keeps the
  // host's OpenSSL configuration from changing how the audit chain is hashed.
  decltype(&::OPENSSL_init_crypto) init = nullptr;
  bind(lib, init, "OPENSSL_init_crypto");
  if (init(OPENSSL_INIT_NO_LOAD_CONFIG, nullptr) != 1) throw Error(std::string(kSoname) + " failed to initialise", kFix);
  LibCrypto t{};
  bind(lib, t.EVP_MD_CTX_new, "EVP_MD_CTX_new");
  bind(lib, t.EVP_MD_CTX_free, "EVP_MD_CTX_free");
  bind(lib, t.EVP_DigestInit_ex, "EVP_DigestInit_ex");
  bind(lib, t.EVP_DigestUpdate, "EVP_DigestUpdate");
  bind(lib, t.EVP_DigestFinal_ex, "EVP_DigestFinal_ex");
  bind(lib, t.EVP_sha256, "EVP_sha256");
  bind(lib, t.EVP_sha512, "EVP_sha512");
  bind(lib, t.EVP_MAC_fetch, "EVP_MAC_fetch");
  bind(lib, t.EVP_MAC_free, "EVP_MAC_free");
  bind(lib, t.EVP_MAC_CTX_new, "EVP_MAC_CTX_new");
  bind(lib, t.EVP_MAC_CTX_free, "EVP_MAC_CTX_free");
  bind(lib, t.EVP_MAC_init, "EVP_MAC_init");
  bind(lib, t.EVP_MAC_update, "EVP_MAC_update");
  bind(lib, t.EVP_MAC_final, "EVP_MAC_final");
  bind(lib, t.OSSL_PARAM_construct_utf8_string, "OSSL_PARAM_construct_utf8_string");
  bind(lib, t.OSSL_PARAM_construct_end, "OSSL_PARAM_construct_end");
  bind(lib, t.EVP_EncodeBlock, "EVP_EncodeBlock");
  bind(lib, t.EVP_DecodeBlock, "EVP_DecodeBlock");
  return t;
}

}  // namespace

const LibCrypto& libcrypto() {
  // A function-local static: initialised once, thread-safe, and tried again after a throw.
  static const LibCrypto table = load();
  return table;
}

}  // namespace sandboxrun
