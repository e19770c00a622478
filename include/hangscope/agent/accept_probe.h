// Whether this process still takes connections off its own listening port: the agent's
// self-check, since a gRPC server that ran out of descriptors may stop accepting for good.
#pragma once

#include <chrono>
#include <string>

namespace hangscope::agent {

class AcceptProbe {
 public:
  // The address the server listens on ("0.0.0.0:7447", "[::]:0" are probed on loopback) and
  // the port it bound.
  AcceptProbe(const std::string& listen_address, int port);

  // Connects once and waits up to `patience` for the server to accept the connection (read
  // from this network namespace's TCP tables: a connection still on the accept queue has no
  // socket inode). "" when it was accepted, else why not.
  std::string check(std::chrono::milliseconds patience) const;

 private:
  std::string host_;  // a numeric address to dial
  int port_;
};

}  // namespace hangscope::agent
