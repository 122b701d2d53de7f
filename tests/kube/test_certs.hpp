// Certificates made in the test with OpenSSL: CAs, server certificates for
// 127.0.0.1 and client certificates. EC P-256 keys, so that making them is quick.
#pragma once

#include <string>
#include <vector>

#include "kube/tls.hpp"

namespace tessera::kube::testing {

struct Issued {
  tls::KeyPtr key;
  tls::X509Ptr cert;
  std::string cert_pem() const;
  std::string key_pem() const;
};

// A self-signed CA.
Issued make_ca(const std::string& common_name);

// A certificate signed by `ca`. `sans` are subjectAltName entries in
// OpenSSL's form ("IP:127.0.0.1", "DNS:localhost"); `server` chooses the
// extended key usage (serverAuth or clientAuth).
Issued make_leaf(const Issued& ca, const std::string& common_name, const std::vector<std::string>& sans, bool server);

// The certificates the TLS tests share, made once per process.
struct TestPki {
  Issued ca;          // signs server, wrong_host and client
  Issued other_ca;    // unrelated
  Issued server;      // CN apiserver, SAN IP:127.0.0.1
  Issued wrong_host;  // SAN IP:10.1.2.3 only
  Issued client;      // CN system:node:gpu-1, clientAuth
};
const TestPki& pki();

}  // namespace tessera::kube::testing
