// A one-connection TCP server on 127.0.0.1 for client tests: `serve` runs on its own thread
// with the accepted socket; the peer closes it when `serve` returns.
#pragma once

#include <functional>
#include <string>
#include <thread>

namespace hangscope::testing {

class LoopbackPeer {
 public:
  explicit LoopbackPeer(std::function<void(int)> serve);
  LoopbackPeer(const LoopbackPeer&) = delete;
  LoopbackPeer& operator=(const LoopbackPeer&) = delete;
  ~LoopbackPeer();

  int port() const { return port_; }

  static std::string read_line(int fd);                  // without its newline
  static std::string read_exact(int fd, std::size_t n);  // shorter when the client closes
  static void write(int fd, const std::string& bytes);

 private:
  int listener_ = -1;
  int port_ = 0;
  std::thread thread_;
};

}  // namespace hangscope::testing
