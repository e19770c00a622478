#include "loopback_peer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace hangscope::testing {

LoopbackPeer::LoopbackPeer(std::function<void(int)> serve) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof address;
  ::bind(listener_, reinterpret_cast<sockaddr*>(&address), length);
  ::listen(listener_, 1);
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
  port_ = ntohs(address.sin_port);
  thread_ = std::thread([this, serve] {
    const int fd = ::accept(listener_, nullptr, nullptr);
    if (fd < 0) return;
    serve(fd);
    ::close(fd);
  });
}

LoopbackPeer::~LoopbackPeer() {
  ::shutdown(listener_, SHUT_RDWR);
  ::close(listener_);
  thread_.join();
}

std::string LoopbackPeer::read_line(int fd) {
  std::string line;
  char c = 0;
  while (::recv(fd, &c, 1, 0) == 1 && c != '\n') line += c;
  return line;
}

std::string LoopbackPeer::read_exact(int fd, std::size_t n) {
  std::string out(n, '\0');
  std::size_t done = 0;
  while (done < n) {
    const ssize_t got = ::recv(fd, out.data() + done, n - done, 0);
    if (got <= 0) break;
    done += static_cast<std::size_t>(got);
  }
  out.resize(done);
  return out;
}

void LoopbackPeer::write(int fd, const std::string& bytes) {
  ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
}

}  // namespace hangscope::testing
