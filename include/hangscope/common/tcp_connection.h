// A client TCP connection where every step (connect, send, receive) is bounded by one deadline,
// and a helper that runs a function inside another process's network namespace.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

namespace hangscope {

class TcpConnection {
 public:
  using Clock = std::chrono::steady_clock;

  // Connects to an IPv4 or IPv6 literal; `peer` names the server in messages ("NCCL RAS",
  // "the c10d store"). Throws Error when the address is bad, refused or the deadline passes.
  TcpConnection(const std::string& host, int port, Clock::time_point deadline, std::string peer);
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;
  ~TcpConnection();

  void send(const std::string& bytes, const std::string& what);
  // Appends what arrives to `buffer`; false when the server closed the connection.
  bool receive_some(std::string& buffer, const std::string& what);
  // Exactly `n` bytes; throws when the server closes first or the deadline passes.
  std::string receive_exact(std::size_t n, const std::string& what);

  const std::string& peer() const { return peer_; }

 private:
  void wait_for(short events, const std::string& what);

  int fd_ = -1;
  Clock::time_point deadline_;
  std::string peer_;
  std::string pending_;  // bytes received beyond what receive_exact returned
};

// Runs `fn` on a thread that joined the network namespace of `pid` (0: this one), so that the
// process's own localhost and addresses are reachable. Returns "", or why it could not run
// (or what `fn` threw).
std::string run_in_network_namespace(pid_t pid, const std::function<void()>& fn);

}  // namespace hangscope
