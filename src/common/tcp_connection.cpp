#include "hangscope/common/tcp_connection.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <thread>

#include "hangscope/common/error.h"

namespace hangscope {
namespace {

std::string endpoint_text(const std::string& host, int port) {
  return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
         std::to_string(port);
}

}  // namespace

TcpConnection::TcpConnection(const std::string& host, int port, Clock::time_point deadline,
                             std::string peer)
    : deadline_(deadline), peer_(std::move(peer)) {
  sockaddr_storage address{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
  if (port <= 0 || port > 65535) {
    throw Error(peer_ + ": port " + std::to_string(port) + " is out of range");
  }
  if (::inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<std::uint16_t>(port));
    length = sizeof *v4;
  } else if (::inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<std::uint16_t>(port));
    length = sizeof *v6;
  } else {
    throw Error(peer_ + ": host " + host + " is not an IP address");
  }
  fd_ = ::socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw_errno(peer_ + ": socket", errno);
  const std::string where = "cannot connect to " + peer_ + " at " + endpoint_text(host, port);
  int error = 0;
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&address), length) != 0 && errno != EINPROGRESS) {
    error = errno;
  } else {
    try {
      wait_for(POLLOUT, "connecting");
    } catch (const Error&) {
      ::close(fd_);  // the destructor does not run for a constructor that throws
      throw;
    }
    socklen_t size = sizeof error;
    ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &size);
  }
  if (error != 0) {
    ::close(fd_);
    throw SystemError(where, error);
  }
}

TcpConnection::~TcpConnection() {
  ::close(fd_);
}

void TcpConnection::wait_for(short events, const std::string& what) {
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
    if (left <= 0) throw Error(peer_ + " did not answer in time (" + what + ")");
    pollfd p{fd_, events, 0};
    const int n = ::poll(&p, 1, static_cast<int>(left));
    if (n > 0) return;
    if (n < 0 && errno != EINTR) throw_errno(peer_ + ": poll", errno);
  }
}

void TcpConnection::send(const std::string& bytes, const std::string& what) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    wait_for(POLLOUT, what);
    const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno != EINTR && errno != EAGAIN) throw_errno(peer_ + ": " + what, errno);
    if (n > 0) done += static_cast<std::size_t>(n);
  }
}

bool TcpConnection::receive_some(std::string& buffer, const std::string& what) {
  if (!pending_.empty()) {
    buffer += pending_;
    pending_.clear();
    return true;
  }
  wait_for(POLLIN, what);
  char chunk[8192];
  const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
  if (n < 0) {
    if (errno == EINTR || errno == EAGAIN) return true;
    throw_errno(peer_ + ": receiving while " + what, errno);
  }
  if (n == 0) return false;
  buffer.append(chunk, static_cast<std::size_t>(n));
  return true;
}

std::string TcpConnection::receive_exact(std::size_t n, const std::string& what) {
  std::string buffer;
  while (buffer.size() < n) {
    if (!receive_some(buffer, what)) {
      throw Error(peer_ + " closed the connection while " + what + " (" +
                  std::to_string(buffer.size()) + " of " + std::to_string(n) + " bytes)");
    }
  }
  pending_ = buffer.substr(n);
  buffer.resize(n);
  return buffer;
}

std::string run_in_network_namespace(pid_t pid, const std::function<void()>& fn) {
  std::string error;
  const auto guarded = [&] {
    try {
      fn();
    } catch (const std::exception& e) {
      error = e.what();
    }
  };
  // Already there (the process shares this namespace): no setns, which needs CAP_SYS_ADMIN.
  const auto namespace_of = [](const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0
               ? std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino)
               : std::string();
  };
  if (pid == 0 || (!namespace_of("/proc/self/ns/net").empty() &&
                   namespace_of("/proc/self/ns/net") ==
                       namespace_of("/proc/" + std::to_string(pid) + "/ns/net"))) {
    guarded();
    return error;
  }
  const std::string ns = "/proc/" + std::to_string(pid) + "/ns/net";
  const int fd = ::open(ns.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno_message("cannot open " + ns, errno);
  // setns changes only the calling thread: a thread of its own, so this one stays outside.
  std::thread worker([&] {
    if (::setns(fd, CLONE_NEWNET) != 0) {
      error =
          errno_message("cannot enter the network namespace of pid " + std::to_string(pid), errno);
      return;
    }
    guarded();
  });
  worker.join();
  ::close(fd);
  return error;
}

}  // namespace hangscope
