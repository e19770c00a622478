#include "hangscope/common/sock_diag.h"

#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <string>

#include "hangscope/common/error.h"

namespace hangscope {
namespace {

constexpr std::size_t kNetlinkHeader = sizeof(nlmsghdr);

std::size_t align4(std::size_t n) {
  return (n + 3) & ~std::size_t{3};
}

}  // namespace

void sock_diag_dump(const void* request, std::size_t size, const char* what,
                    const std::function<bool(std::string_view answer)>& answer) {
  const int fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) throw_errno("cannot open a NETLINK_SOCK_DIAG socket", errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  timeval timeout{1, 0};  // a kernel answer; bounded all the same
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd, request, size, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    throw_errno(std::string("cannot ask sock_diag for ") + what, errno);
  }
  // The kernel fills at most 32 KiB per answer (netlink_dump): a 64 KiB buffer never cuts one.
  std::string buffer(64 * 1024, '\0');
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot read sock_diag's answer", errno);
    if (n == 0 || answer(std::string_view(buffer.data(), static_cast<std::size_t>(n)))) return;
  }
  throw Error(std::string("sock_diag's answer (") + what + ") did not end within 5 s");
}

bool walk_sock_diag_answer(
    std::string_view bytes, const char* name, const char* refusal,
    const std::function<void(std::string_view body, std::size_t offset)>& message) {
  for (std::size_t offset = 0; offset < bytes.size();) {
    if (bytes.size() - offset < kNetlinkHeader) {
      throw Error(std::string(name) + " at byte " + std::to_string(offset) + ": " +
                  std::to_string(bytes.size() - offset) + " bytes, shorter than a netlink header");
    }
    const auto length = netlink_value<std::uint32_t>(bytes, offset);
    const auto type = netlink_value<std::uint16_t>(bytes, offset + 4);
    if (length < kNetlinkHeader || length > bytes.size() - offset) {
      throw Error(std::string(name) + " at byte " + std::to_string(offset) + ": a message of " +
                  std::to_string(length) + " bytes where " + std::to_string(bytes.size() - offset) +
                  " remain");
    }
    const auto body = bytes.substr(offset + kNetlinkHeader, length - kNetlinkHeader);
    if (type == NLMSG_DONE) return true;
    if (type == NLMSG_ERROR) {
      const int error = body.size() >= 4 ? -netlink_value<std::int32_t>(body, 0) : EPROTO;
      throw SystemError(refusal, error);
    }
    if (type == SOCK_DIAG_BY_FAMILY || type == TCPDIAG_GETSOCK) message(body, offset);
    offset += align4(length);
  }
  return false;
}

}  // namespace hangscope
