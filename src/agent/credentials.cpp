#include "hangscope/agent/credentials.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <memory>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"

namespace hangscope::agent {
namespace {

constexpr std::size_t kMaxPemBytes = std::size_t{1} << 20;

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct KeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Certificate = std::unique_ptr<X509, X509Free>;
using PrivateKey = std::unique_ptr<EVP_PKEY, KeyFree>;

Bio memory_bio(const std::string& text) {
  return Bio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// Never asks for a passphrase on the terminal: an encrypted key is refused instead.
int no_passphrase(char*, int, int, void*) {
  return -1;
}

std::string named(const std::string& option, const std::string& path) {
  return option + " " + printable(path);
}

// Every certificate in a PEM file; the file must hold at least one.
std::vector<Certificate> read_certificates(const std::string& path, const std::string& option) {
  const std::string text = read_pem_file(path, option);
  const Bio bio = memory_bio(text);
  std::vector<Certificate> certificates;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, no_passphrase, nullptr)) {
    certificates.emplace_back(cert);
  }
  ERR_clear_error();  // the read that ends the loop leaves "no start line"
  if (certificates.empty()) {
    throw Error(named(option, path) + ": holds no PEM certificate (-----BEGIN CERTIFICATE-----)");
  }
  return certificates;
}

PrivateKey read_private_key(const std::string& path, const std::string& option) {
  const std::string text = read_pem_file(path, option);
  const Bio bio = memory_bio(text);
  PrivateKey key(PEM_read_bio_PrivateKey(bio.get(), nullptr, no_passphrase, nullptr));
  ERR_clear_error();
  if (!key) {
    throw Error(named(option, path) +
                ": holds no unencrypted PEM private key (an encrypted key cannot be used: the "
                "agent runs unattended)");
  }
  return key;
}

// "expired" / "not yet valid" for a certificate outside its validity now, else "".
std::string validity_problem(X509* cert) {
  if (X509_cmp_current_time(X509_get0_notAfter(cert)) < 0) return "has expired";
  if (X509_cmp_current_time(X509_get0_notBefore(cert)) > 0) return "is not valid yet";
  return "";
}

// The leaf certificate and key of one side, checked to belong together.
void check_certificate_and_key(const std::string& cert_path, const std::string& cert_option,
                               const std::string& key_path, const std::string& key_option,
                               std::vector<std::string>& warnings) {
  const auto certificates = read_certificates(cert_path, cert_option);
  const auto key = read_private_key(key_path, key_option);
  if (X509_check_private_key(certificates.front().get(), key.get()) != 1) {
    ERR_clear_error();
    throw Error(named(key_option, key_path) + " is not the key of the certificate in " +
                named(cert_option, cert_path));
  }
  if (const auto problem = validity_problem(certificates.front().get()); !problem.empty()) {
    warnings.push_back(named(cert_option, cert_path) + ": the certificate " + problem +
                       "; peers will refuse it");
  }
}

// Why a token file is readable by others than its owner ("" when it is not, or is a pipe).
std::string token_file_exposure(const std::string& path) {
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  if ((st.st_mode & 077) == 0) return "";
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return "--token-file " + printable(path) + " is readable by group or others (mode " + mode +
         "): chmod 600 it";
}

}  // namespace

bool same_secret(std::string_view presented, std::string_view expected) {
  unsigned char diff = presented.size() == expected.size() ? 0 : 1;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const char p = i < presented.size() ? presented[i] : '\0';
    diff |= static_cast<unsigned char>(p ^ expected[i]);
  }
  return diff == 0;
}

std::string read_pem_file(const std::string& path, const std::string& option) {
  return read_input_file(path, option, kMaxPemBytes, InputKind::kRegularFile);
}

void check_tls_combination(const std::string& tls_cert, const std::string& tls_key,
                           const std::string& tls_ca) {
  if (tls_cert.empty() != tls_key.empty()) throw Error("--tls-cert and --tls-key go together");
  if (!tls_ca.empty() && tls_cert.empty()) {
    throw Error(
        "--tls-ca requires the agent's own certificate (--tls-cert and --tls-key): client "
        "certificates are only checked over TLS, and without it the agent would serve "
        "plaintext to anyone");
  }
}

CredentialCheck check_server_credentials(const ServerCredentialFiles& files) {
  check_tls_combination(files.tls_cert, files.tls_key, files.tls_ca);
  CredentialCheck check;
  if (!files.tls_cert.empty()) {
    check_certificate_and_key(files.tls_cert, "--tls-cert", files.tls_key, "--tls-key",
                              check.warnings);
    check.tls = true;
  }
  if (!files.tls_ca.empty()) {
    read_certificates(files.tls_ca, "--tls-ca");
    check.client_certificates = true;
  }
  if (!files.token.empty()) {
    check.token = true;
    if (files.token.size() < kMinTokenBytes) {
      check.weaknesses.push_back("the token is " + std::to_string(files.token.size()) +
                                 " bytes; use at least " + std::to_string(kMinTokenBytes) +
                                 " (for example `openssl rand -hex 32`)");
    }
    if (const auto exposure = token_file_exposure(files.token_file); !exposure.empty()) {
      check.weaknesses.push_back(exposure);
    }
    if (!check.tls) {
      check.warnings.push_back(
          "the token travels in clear text: give --tls-cert and --tls-key to encrypt it");
    }
  }
  return check;
}

void check_client_credentials(const std::string& tls_ca, const std::string& tls_cert,
                              const std::string& tls_key) {
  if (tls_cert.empty() != tls_key.empty()) throw Error("--tls-cert and --tls-key go together");
  if (!tls_cert.empty() && tls_ca.empty()) {
    throw Error(
        "--tls-cert and --tls-key need --tls-ca (the CA that signed the agents' certificates): "
        "without it diagnose would dial the agents in plaintext");
  }
  if (!tls_ca.empty()) read_certificates(tls_ca, "--tls-ca");
  std::vector<std::string> ignored;
  if (!tls_cert.empty()) {
    check_certificate_and_key(tls_cert, "--tls-cert", tls_key, "--tls-key", ignored);
  }
}

}  // namespace hangscope::agent
