#include "kube/tls.hpp"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>

#include <climits>

namespace tessera::kube::tls {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

// Without a callback OpenSSL would prompt on the terminal for an encrypted
// key's passphrase; this one answers "no passphrase", so reading fails instead.
int no_passphrase(char*, int, int, void*) { return 0; }

Result<BioPtr> memory_bio(std::string_view pem) {
  if (pem.size() > static_cast<size_t>(INT_MAX)) return fail(Errc::invalid_argument, "PEM text is too large");
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return fail(Errc::internal, "cannot allocate a memory BIO: " + take_errors());
  return bio;
}

// The last error is "no start line" when reading stopped at the end of the text.
bool at_end_of_pem() {
  unsigned long err = ERR_peek_last_error();
  return ERR_GET_LIB(err) == ERR_LIB_PEM && ERR_GET_REASON(err) == PEM_R_NO_START_LINE;
}

}  // namespace

std::string take_errors() {
  std::string text;
  while (unsigned long err = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(err, buf, sizeof buf);
    if (!text.empty()) text += "; ";
    text += buf;
  }
  return text;
}

Result<std::vector<X509Ptr>> parse_certificates(std::string_view pem) {
  ERR_clear_error();
  auto bio = memory_bio(pem);
  if (!bio) return unexpected(bio.error());
  std::vector<X509Ptr> certs;
  for (;;) {
    X509Ptr cert(PEM_read_bio_X509(bio->get(), nullptr, no_passphrase, nullptr));
    if (!cert) break;
    certs.push_back(std::move(cert));
  }
  if (at_end_of_pem()) {
    ERR_clear_error();
    if (certs.empty()) return fail(Errc::parse, "no PEM certificate in it");
    return certs;
  }
  std::string why = take_errors();
  return fail(Errc::parse, "certificate " + std::to_string(certs.size() + 1) + " cannot be read" +
                               (why.empty() ? std::string() : ": " + why));
}

Result<KeyPtr> parse_private_key(std::string_view pem) {
  ERR_clear_error();
  auto bio = memory_bio(pem);
  if (!bio) return unexpected(bio.error());
  KeyPtr key(PEM_read_bio_PrivateKey(bio->get(), nullptr, no_passphrase, nullptr));
  if (key) {
    ERR_clear_error();
    return key;
  }
  // OpenSSL 3 reports text without any PEM block as a decoder error, not as "no start line".
  if (at_end_of_pem() || pem.find("-----BEGIN") == std::string_view::npos) {
    ERR_clear_error();
    return fail(Errc::parse, "no PEM private key in it");
  }
  std::string why = take_errors();
  return fail(Errc::parse, "the private key cannot be read (an encrypted key is not supported)" +
                               (why.empty() ? std::string() : ": " + why));
}

bool key_matches(X509* cert, EVP_PKEY* key) {
  bool ok = X509_check_private_key(cert, key) == 1;
  ERR_clear_error();
  return ok;
}

}  // namespace tessera::kube::tls
