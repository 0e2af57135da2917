// libcrypto (OpenSSL 3), opened the first time something needs it: a keyed (HMAC) audit chain,
// an image blob's digest, a streamed SHA-256 of a large file, base64 (binary program output, session files). Linked into the binary, its
// tables (340 KB of pointers the loader relocates) cost every start of every command about 80
// page copies, ~0.2 ms on the development VM, for code that a plain `run` or `assess` never
// calls. systemd opens its optional libraries the same way. The functions keep OpenSSL's own
// declared types (decltype), so a call through the table is checked like a direct one.
#pragma once

#include <openssl/evp.h>
#include <openssl/params.h>

namespace sandboxrun {

struct LibCrypto {
  decltype(&::EVP_MD_CTX_new) EVP_MD_CTX_new;
  decltype(&::EVP_MD_CTX_free) EVP_MD_CTX_free;
  decltype(&::EVP_DigestInit_ex) EVP_DigestInit_ex;
  decltype(&::EVP_DigestUpdate) EVP_DigestUpdate;
  decltype(&::EVP_DigestFinal_ex) EVP_DigestFinal_ex;
  decltype(&::EVP_sha256) EVP_sha256;
  decltype(&::EVP_sha512) EVP_sha512;
  decltype(&::EVP_MAC_fetch) EVP_MAC_fetch;
  decltype(&::EVP_MAC_free) EVP_MAC_free;
  decltype(&::EVP_MAC_CTX_new) EVP_MAC_CTX_new;
  decltype(&::EVP_MAC_CTX_free) EVP_MAC_CTX_free;
  decltype(&::EVP_MAC_init) EVP_MAC_init;
  decltype(&::EVP_MAC_update) EVP_MAC_update;
  decltype(&::EVP_MAC_final) EVP_MAC_final;
  decltype(&::OSSL_PARAM_construct_utf8_string) OSSL_PARAM_construct_utf8_string;
  decltype(&::OSSL_PARAM_construct_end) OSSL_PARAM_construct_end;
  decltype(&::EVP_EncodeBlock) EVP_EncodeBlock;
  decltype(&::EVP_DecodeBlock) EVP_DecodeBlock;
};

// The library, loaded (and initialised without reading openssl.cnf) on the first call; the
// same table afterwards, from any thread. Throws sandboxrun::Error naming the library and the
// fix when it is missing or lacks a function; a later call tries again.
const LibCrypto& libcrypto();

}  // namespace sandboxrun
