#include "kube/test_certs.hpp"

#include <openssl/bio.h>
#include <openssl/ec.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <stdexcept>

namespace tessera::kube::testing {
namespace {

[[noreturn]] void die(const std::string& what) { throw std::runtime_error(what + ": " + tls::take_errors()); }

tls::KeyPtr new_key() {
  tls::KeyPtr key(EVP_EC_gen("P-256"));
  if (!key) die("EVP_EC_gen");
  return key;
}

void add_extension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) die("X509V3_EXT_conf_nid " + value);
  X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
}

tls::X509Ptr new_cert(EVP_PKEY* key, const std::string& common_name, long serial) {
  tls::X509Ptr cert(X509_new());
  if (!cert) die("X509_new");
  X509_set_version(cert.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert.get()), serial);
  X509_gmtime_adj(X509_getm_notBefore(cert.get()), -3600);
  X509_gmtime_adj(X509_getm_notAfter(cert.get()), 7L * 24 * 3600);
  X509_set_pubkey(cert.get(), key);
  X509_NAME* name = X509_get_subject_name(cert.get());
  X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, reinterpret_cast<const unsigned char*>(common_name.c_str()),
                             -1, -1, 0);
  return cert;
}

long next_serial() {
  static long serial = 1000;
  return ++serial;
}

}  // namespace

std::string Issued::cert_pem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert.get());
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(size));
  BIO_free(bio);
  return pem;
}

std::string Issued::key_pem() const {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long size = BIO_get_mem_data(bio, &data);
  std::string pem(data, static_cast<size_t>(size));
  BIO_free(bio);
  return pem;
}

Issued make_ca(const std::string& common_name) {
  Issued ca;
  ca.key = new_key();
  ca.cert = new_cert(ca.key.get(), common_name, next_serial());
  X509_set_issuer_name(ca.cert.get(), X509_get_subject_name(ca.cert.get()));
  add_extension(ca.cert.get(), ca.cert.get(), NID_basic_constraints, "critical,CA:TRUE");
  add_extension(ca.cert.get(), ca.cert.get(), NID_key_usage, "critical,keyCertSign,cRLSign");
  add_extension(ca.cert.get(), ca.cert.get(), NID_subject_key_identifier, "hash");
  if (X509_sign(ca.cert.get(), ca.key.get(), EVP_sha256()) == 0) die("X509_sign");
  return ca;
}

Issued make_leaf(const Issued& ca, const std::string& common_name, const std::vector<std::string>& sans,
                 bool server) {
  Issued leaf;
  leaf.key = new_key();
  leaf.cert = new_cert(leaf.key.get(), common_name, next_serial());
  X509_set_issuer_name(leaf.cert.get(), X509_get_subject_name(ca.cert.get()));
  add_extension(leaf.cert.get(), ca.cert.get(), NID_basic_constraints, "critical,CA:FALSE");
  add_extension(leaf.cert.get(), ca.cert.get(), NID_key_usage, "critical,digitalSignature,keyEncipherment");
  add_extension(leaf.cert.get(), ca.cert.get(), NID_ext_key_usage, server ? "serverAuth" : "clientAuth");
  add_extension(leaf.cert.get(), ca.cert.get(), NID_authority_key_identifier, "keyid");
  if (!sans.empty()) {
    std::string value;
    for (const auto& san : sans) value += (value.empty() ? "" : ",") + san;
    add_extension(leaf.cert.get(), ca.cert.get(), NID_subject_alt_name, value);
  }
  if (X509_sign(leaf.cert.get(), ca.key.get(), EVP_sha256()) == 0) die("X509_sign");
  return leaf;
}

const TestPki& pki() {
  static const TestPki made = [] {
    TestPki p;
    p.ca = make_ca("tessera test CA");
    p.other_ca = make_ca("unrelated CA");
    p.server = make_leaf(p.ca, "apiserver", {"IP:127.0.0.1"}, true);
    p.wrong_host = make_leaf(p.ca, "elsewhere", {"IP:10.1.2.3"}, true);
    p.client = make_leaf(p.ca, "system:node:gpu-1", {}, false);
    return p;
  }();
  return made;
}

}  // namespace tessera::kube::testing
