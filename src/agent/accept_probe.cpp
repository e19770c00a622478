#include "hangscope/agent/accept_probe.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "hangscope/common/files.h"
#include "hangscope/facts/network.h"

namespace hangscope::agent {
namespace {

// The host of "host:port" / "[v6]:port", as a numeric address to dial.
std::string dial_host(const std::string& listen_address) {
  std::string host = listen_address.substr(0, listen_address.rfind(':'));
  if (!host.empty() && host.front() == '[') host = host.substr(1, host.size() - 2);
  if (host.empty() || host == "0.0.0.0" || host == "localhost") return "127.0.0.1";
  if (host == "::") return "::1";
  return host;
}

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Connects the non-blocking socket to host:port and sets its local port; "" or why not.
std::string connect_to(const Socket& socket, const std::string& host, int port,
                       std::chrono::milliseconds patience, int& local_port) {
  sockaddr_storage address{};
  socklen_t length = 0;
  if (host.find(':') != std::string::npos) {
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) != 1) return "cannot dial " + host;
    length = sizeof *v6;
  } else {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) != 1) return "cannot dial " + host;
    length = sizeof *v4;
  }
  if (socket.get() < 0) return std::string("cannot open a socket: ") + std::strerror(errno);
  if (::connect(socket.get(), reinterpret_cast<sockaddr*>(&address), length) != 0 &&
      errno != EINPROGRESS) {
    return std::string("cannot connect: ") + std::strerror(errno);
  }
  pollfd p{socket.get(), POLLOUT, 0};
  if (::poll(&p, 1, static_cast<int>(patience.count())) <= 0) return "connect timed out";
  int error = 0;
  socklen_t error_length = sizeof error;
  ::getsockopt(socket.get(), SOL_SOCKET, SO_ERROR, &error, &error_length);
  if (error != 0) return std::string("cannot connect: ") + std::strerror(error);
  sockaddr_storage local{};
  socklen_t local_length = sizeof local;
  ::getsockname(socket.get(), reinterpret_cast<sockaddr*>(&local), &local_length);
  local_port =
      ntohs(local.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&local)->sin6_port
                                        : reinterpret_cast<sockaddr_in*>(&local)->sin_port);
  return "";
}

// The server side of the connection from client_port: accepted (has an inode), waiting on the
// accept queue (no inode yet, still established or being set up), or gone (the server accepted
// and closed it already: no socket, or an orphan in FIN-WAIT, TIME-WAIT, … without an inode).
enum class ServerSide { kAccepted, kQueued, kGone };

ServerSide server_side(int server_port, int client_port) {
  bool seen = false;
  for (const char* table : {"/proc/self/net/tcp", "/proc/self/net/tcp6"}) {
    const auto read = read_file(table);
    if (!read.text) continue;
    for (const auto& socket : facts::parse_proc_net_tcp(*read.text)) {
      if (socket.local_port != server_port || socket.remote_port != client_port) continue;
      if (socket.inode != 0) return ServerSide::kAccepted;
      if (socket.state == model::SocketState::kEstablished ||
          socket.state == model::SocketState::kSynRecv) {
        seen = true;
      }
    }
  }
  return seen ? ServerSide::kQueued : ServerSide::kGone;
}

}  // namespace

AcceptProbe::AcceptProbe(const std::string& listen_address, int port)
    : host_(dial_host(listen_address)), port_(port) {}

std::string AcceptProbe::check(std::chrono::milliseconds patience) const {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  Socket socket(::socket(host_.find(':') != std::string::npos ? AF_INET6 : AF_INET,
                         SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  int local_port = 0;
  if (auto failed = connect_to(socket, host_, port_, patience, local_port); !failed.empty()) {
    return failed;
  }
  try {
    while (std::chrono::steady_clock::now() < deadline) {
      if (server_side(port_, local_port) != ServerSide::kQueued) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  } catch (const std::exception& e) {
    return std::string("cannot read this namespace's TCP table: ") + e.what();
  }
  return "a connection to port " + std::to_string(port_) + " was not accepted within " +
         std::to_string(patience.count()) + " ms";
}

}  // namespace hangscope::agent
