#include "hangscope/capture/sockets.h"

#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include "hangscope/common/error.h"
#include "hangscope/common/tcp_connection.h"
#include "hangscope/facts/network.h"

namespace hangscope::capture {
namespace {

constexpr std::size_t kNetlinkHeader = sizeof(nlmsghdr);
constexpr std::size_t kUnixDiagMessage = sizeof(unix_diag_msg);
constexpr std::size_t kAttributeHeader = 4;  // struct rtattr / nlattr: u16 length, u16 type

std::size_t align4(std::size_t n) {
  return (n + 3) & ~std::size_t{3};
}

// A native-endian integer at `offset` (netlink speaks the host's byte order).
template <typename T>
T read_at(std::string_view bytes, std::size_t offset) {
  T value{};
  std::memcpy(&value, bytes.data() + offset, sizeof value);
  return value;
}

std::string type_name(unsigned type) {
  switch (type) {
    case SOCK_STREAM:
      return "stream";
    case SOCK_DGRAM:
      return "dgram";
    case SOCK_SEQPACKET:
      return "seqpacket";
    default:
      return "type " + std::to_string(type);
  }
}

// One unix_diag_msg and its attributes (`body`: the message after its netlink header).
model::Socket parse_unix_message(std::string_view body, std::size_t at) {
  if (body.size() < kUnixDiagMessage) {
    throw Error("unix_diag answer at byte " + std::to_string(at) + ": a message of " +
                std::to_string(body.size()) + " bytes, shorter than unix_diag_msg");
  }
  model::Socket s;
  s.family = model::Socket::Family::kUnix;
  s.type = type_name(static_cast<unsigned char>(body[1]));
  s.state = model::socket_state_from_kernel(static_cast<unsigned char>(body[2]));  // TCP's numbers
  s.inode = read_at<std::uint32_t>(body, 4);
  for (std::size_t offset = kUnixDiagMessage; offset + kAttributeHeader <= body.size();) {
    const auto length = read_at<std::uint16_t>(body, offset);
    const auto type = read_at<std::uint16_t>(body, offset + 2);
    if (length < kAttributeHeader || offset + length > body.size()) {
      throw Error("unix_diag answer at byte " + std::to_string(at + kNetlinkHeader + offset) +
                  ": an attribute of " + std::to_string(length) + " bytes where " +
                  std::to_string(body.size() - offset) + " remain");
    }
    const auto payload = body.substr(offset + kAttributeHeader, length - kAttributeHeader);
    if (type == UNIX_DIAG_NAME) {
      s.path = unix_socket_name(payload);
    } else if (type == UNIX_DIAG_PEER && payload.size() >= 4) {
      s.peer_inode = read_at<std::uint32_t>(payload, 0);
    }
    offset += align4(length);
  }
  return s;
}

// Every unix socket of the calling thread's network namespace, with its name and peer.
std::vector<model::Socket> dump_unix_sockets() {
  const int fd = ::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (fd < 0) throw_errno("cannot open a NETLINK_SOCK_DIAG socket", errno);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  timeval timeout{1, 0};  // a kernel answer; bounded all the same
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  struct {
    nlmsghdr header;
    unix_diag_req request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message.header.nlmsg_seq = 1;
  message.request.sdiag_family = AF_UNIX;
  message.request.udiag_states = ~0u;
  message.request.udiag_show = UDIAG_SHOW_NAME | UDIAG_SHOW_PEER;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (::sendto(fd, &message, sizeof message, 0, reinterpret_cast<sockaddr*>(&kernel),
               sizeof kernel) < 0) {
    throw_errno("cannot ask sock_diag for unix sockets", errno);
  }
  std::vector<model::Socket> out;
  std::string buffer(64 * 1024, '\0');
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw_errno("cannot read sock_diag's answer", errno);
    auto answer = parse_unix_diag(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
    out.insert(out.end(), std::make_move_iterator(answer.sockets.begin()),
               std::make_move_iterator(answer.sockets.end()));
    if (answer.done || n == 0) return out;
  }
  throw Error("sock_diag's answer did not end within 5 s");
}

}  // namespace

std::string unix_socket_name(std::string_view sun_path) {
  if (!sun_path.empty() && sun_path.front() == '\0') {
    std::string name = "@" + std::string(sun_path.substr(1));
    std::replace(name.begin(), name.end(), '\0', '@');
    return name;
  }
  const auto end = sun_path.find('\0');  // a path ends at its NUL
  return std::string(sun_path.substr(0, end));
}

UnixDiagAnswer parse_unix_diag(std::string_view bytes) {
  UnixDiagAnswer answer;
  for (std::size_t offset = 0; offset < bytes.size();) {
    if (bytes.size() - offset < kNetlinkHeader) {
      throw Error("unix_diag answer at byte " + std::to_string(offset) + ": " +
                  std::to_string(bytes.size() - offset) + " bytes, shorter than a netlink header");
    }
    const auto length = read_at<std::uint32_t>(bytes, offset);
    const auto type = read_at<std::uint16_t>(bytes, offset + 4);
    if (length < kNetlinkHeader || length > bytes.size() - offset) {
      throw Error("unix_diag answer at byte " + std::to_string(offset) + ": a message of " +
                  std::to_string(length) + " bytes where " + std::to_string(bytes.size() - offset) +
                  " remain");
    }
    const auto body = bytes.substr(offset + kNetlinkHeader, length - kNetlinkHeader);
    if (type == NLMSG_DONE) {
      answer.done = true;
      return answer;
    }
    if (type == NLMSG_ERROR) {
      const int error = body.size() >= 4 ? -read_at<std::int32_t>(body, 0) : EPROTO;
      throw SystemError("sock_diag refused the unix socket dump", error);
    }
    if (type == SOCK_DIAG_BY_FAMILY) answer.sockets.push_back(parse_unix_message(body, offset));
    offset += align4(length);
  }
  return answer;
}

std::vector<model::Socket> read_sockets(pid_t pid, std::vector<std::string>& notes,
                                        std::size_t max) {
  const std::string proc_dir = "/proc/" + std::to_string(pid);
  std::vector<model::Socket> out;
  try {
    std::vector<std::pair<int, std::uint64_t>> held;
    std::size_t left_out = 0;
    if (!facts::socket_descriptors(proc_dir, max, held, left_out)) {
      notes.push_back("sockets: cannot list " + proc_dir + "/fd (no permission, or it exited)");
      return out;
    }
    if (left_out > 0) {
      notes.push_back("sockets: " + std::to_string(left_out) + " more sockets past the first " +
                      std::to_string(max) + " left out");
    }
    if (held.empty()) return out;
    std::map<std::uint64_t, model::Socket> described;
    std::set<std::uint64_t> wanted;
    for (const auto& [fd, inode] : held) wanted.insert(inode);
    std::vector<model::Socket> unix_sockets;
    const std::string error =
        run_in_network_namespace(pid, [&] { unix_sockets = dump_unix_sockets(); });
    if (!error.empty()) notes.push_back("sockets: unix sockets not described: " + error);
    for (auto& s : unix_sockets) {
      if (wanted.count(s.inode)) described[s.inode] = std::move(s);
    }
    if (described.size() < wanted.size()) {
      std::vector<std::string> tcp_notes;
      for (const auto& t : facts::read_tcp_tables(proc_dir, tcp_notes)) {
        if (t.inode == 0 || !wanted.count(t.inode) || described.count(t.inode)) continue;
        model::Socket s;
        s.family = model::Socket::Family::kTcp;
        s.inode = t.inode;
        s.type = "stream";
        s.state = t.state;
        s.local = t.local();
        s.remote = t.remote();
        s.tx_queue = t.tx_queue;
        s.rx_queue = t.rx_queue;
        s.retransmits = t.retransmits;
        described[t.inode] = std::move(s);
      }
      for (const auto& n : tcp_notes) notes.push_back("sockets: " + n);
    }
    for (const auto& [fd, inode] : held) {
      const auto it = described.find(inode);
      if (it == described.end()) continue;  // UDP, netlink, …: not what links processes here
      it->second.fd = fd;
      out.push_back(std::move(it->second));
    }
  } catch (const std::exception& e) {
    notes.push_back(std::string("sockets: ") + e.what());
  }
  return out;
}

}  // namespace hangscope::capture
