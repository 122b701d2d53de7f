// PEM in memory to OpenSSL objects, for the client's TLS settings and for
// checking a kubeconfig's certificates where they are read. Internal to
// src/kube.
#pragma once

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"

namespace tessera::kube::tls {

struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using KeyPtr = std::unique_ptr<EVP_PKEY, KeyFree>;

// Every certificate of a PEM bundle, in order. Errors (Errc::parse): no
// certificate in it, or a certificate block OpenSSL cannot read.
[[nodiscard]] Result<std::vector<X509Ptr>> parse_certificates(std::string_view pem);

// The private key of a PEM block (PKCS#8, or the RSA and EC forms). An
// encrypted key is refused: nothing here can ask for its passphrase.
[[nodiscard]] Result<KeyPtr> parse_private_key(std::string_view pem);

// Whether `key` is the private half of `cert`'s public key.
bool key_matches(X509* cert, EVP_PKEY* key);

// OpenSSL's queued errors as one line ("" when none), and the queue cleared.
std::string take_errors();

}  // namespace tessera::kube::tls
