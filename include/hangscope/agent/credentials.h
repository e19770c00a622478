// The agent's credentials checked before anything listens or dials: which combinations of
// --tls-*, --token-file and --insecure give authentication, and whether each PEM file holds
// what its option promises.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace hangscope::agent {

// A token shorter than this is refused on a non-loopback listener (unless --insecure).
inline constexpr std::size_t kMinTokenBytes = 16;

// The credentials `hangscope collect` was given.
struct ServerCredentialFiles {
  std::string tls_cert, tls_key, tls_ca;
  std::string token;       // the token itself (from --token-file or HANGSCOPE_TOKEN)
  std::string token_file;  // where it came from; empty for HANGSCOPE_TOKEN
};

// What a set of server credentials gives, once checked.
struct CredentialCheck {
  bool tls = false;                     // the connection is encrypted
  bool client_certificates = false;     // clients must present a certificate --tls-ca signed
  bool token = false;                   // clients must present the token
  std::vector<std::string> weaknesses;  // refused on a non-loopback listener unless --insecure
  std::vector<std::string> warnings;    // logged, never refused
  bool authenticated() const { return client_certificates || token; }
};

// The combination alone, before any file is read: the certificate and key go together, and a
// CA needs them (client certificates are only checked over TLS). Throws hangscope::Error.
void check_tls_combination(const std::string& tls_cert, const std::string& tls_key,
                           const std::string& tls_ca);

// Checks the combination and every file (readable regular files holding a certificate, a key
// that matches it, a CA): throws hangscope::Error naming the option, the file and the reason.
// A CA without the agent's own certificate is refused: client certificates need TLS, and the
// agent would otherwise serve plaintext to anyone.
CredentialCheck check_server_credentials(const ServerCredentialFiles& files);

// The same for the client side (`hangscope diagnose --tls-ca/--tls-cert/--tls-key`): a client
// certificate without the CA that signed the agents' certificates is refused (it would dial
// in plaintext).
void check_client_credentials(const std::string& tls_ca, const std::string& tls_cert,
                              const std::string& tls_key);

// Whether a presented token equals the expected one, compared in a time that depends on the
// expected one's length only (no early exit at the first differing byte): the agent's bearer
// tokens and watch's metrics password.
bool same_secret(std::string_view presented, std::string_view expected);

// The text of a PEM file an option names (regular file, at most 1 MiB): hangscope::Error
// "OPTION PATH: reason" otherwise.
std::string read_pem_file(const std::string& path, const std::string& option);

}  // namespace hangscope::agent
