#include "hangscope/capture/sockets.h"

#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <set>

#include "hangscope/common/error.h"
#include "hangscope/common/sock_diag.h"
#include "hangscope/common/tcp_connection.h"
#include "hangscope/facts/network.h"
#include "socket_tables.h"

namespace hangscope::capture {
namespace {

constexpr std::size_t kUnixDiagMessage = sizeof(unix_diag_msg);
constexpr std::size_t kAttributeHeader = 4;  // struct rtattr / nlattr: u16 length, u16 type
constexpr std::size_t kNetlinkHeader = sizeof(nlmsghdr);

std::size_t align4(std::size_t n) {
  return (n + 3) & ~std::size_t{3};
}

template <typename T>
T read_at(std::string_view bytes, std::size_t offset) {
  return netlink_value<T>(bytes, offset);
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
  std::vector<model::Socket> out;
  sock_diag_dump(&message, sizeof message, "unix sockets", [&](std::string_view bytes) {
    auto answer = parse_unix_diag(bytes);
    out.insert(out.end(), std::make_move_iterator(answer.sockets.begin()),
               std::make_move_iterator(answer.sockets.end()));
    return answer.done;
  });
  return out;
}

std::string namespace_key(pid_t pid) {
  char ns[64] = {};
  const auto path = "/proc/" + std::to_string(pid) + "/ns/net";
  const auto n = ::readlink(path.c_str(), ns, sizeof ns - 1);
  return std::string(ns, n > 0 ? static_cast<std::size_t>(n) : 0);
}

// Reads into `tables` what it lacks of the namespace of `pid`: its unix sockets, and its TCP
// sockets when `tcp` (sock_diag, in the namespace; else the process's net/tcp and tcp6).
void read_namespace(pid_t pid, bool tcp, NamespaceSockets& tables) {
  const bool unix_wanted = !tables.unix_read;
  const bool tcp_wanted = tcp && !tables.tcp_read;
  if (!unix_wanted && !tcp_wanted) return;
  std::vector<model::Socket> unix_sockets;
  std::string unix_error, tcp_error;
  bool tcp_done = false;
  const std::string entered = run_in_network_namespace(pid, [&] {
    if (unix_wanted) {
      try {
        unix_sockets = dump_unix_sockets();
      } catch (const std::exception& e) {
        unix_error = e.what();
      }
    }
    if (tcp_wanted) {
      try {
        tables.tcp = facts::dump_tcp_sockets();
        tcp_done = true;
      } catch (const std::exception& e) {
        tcp_error = e.what();
      }
    }
  });
  if (unix_wanted) {
    tables.unix_read = true;
    const std::string error = entered.empty() ? unix_error : entered;
    if (!error.empty()) tables.unix_notes.push_back("unix sockets not described: " + error);
    for (auto& s : unix_sockets) tables.unix_sockets[s.inode] = std::move(s);
  }
  if (tcp_wanted) {
    tables.tcp_read = true;
    if (tcp_done) {
      tables.tcp_source = "sock_diag";
      return;
    }
    spdlog::debug("sockets of pid {}: TCP from /proc, not sock_diag: {}", pid,
                  entered.empty() ? tcp_error : entered);
    const std::string proc_dir = "/proc/" + std::to_string(pid);
    tables.tcp_source = proc_dir + "/net/tcp";
    tables.tcp = facts::read_tcp_tables(proc_dir, tables.tcp_notes);
    std::erase_if(tables.tcp, [](const facts::TcpSocket& s) { return s.inode == 0; });
  }
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
  answer.done =
      walk_sock_diag_answer(bytes, "unix_diag answer", "sock_diag refused the unix socket dump",
                            [&](std::string_view body, std::size_t offset) {
                              answer.sockets.push_back(parse_unix_message(body, offset));
                            });
  return answer;
}

std::shared_ptr<const NamespaceSockets> SocketTables::of(pid_t pid, bool tcp) {
  const std::string key = namespace_key(pid);
  std::lock_guard lock(mutex_);
  std::shared_ptr<const NamespaceSockets>& entry = namespaces_[key];
  if (key.empty() || !entry || !entry->unix_read || (tcp && !entry->tcp_read)) {
    // Extended in a copy: a process of the namespace may be reading the tables given before.
    auto tables = key.empty() || !entry ? std::make_shared<NamespaceSockets>()
                                        : std::make_shared<NamespaceSockets>(*entry);
    const auto begin = std::chrono::steady_clock::now();
    read_namespace(pid, tcp, *tables);
    spdlog::debug(
        "sockets: network namespace {} read through pid {} in {:.1f} ms ({} unix, {} TCP{})", key,
        pid,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count(),
        tables->unix_sockets.size(), tables->tcp.size(),
        tables->tcp_read ? " from " + tables->tcp_source : "");
    ++namespace_reads_;
    entry = std::move(tables);
  }
  return entry;
}

std::shared_ptr<const HeldSockets> SocketTables::held_by(pid_t pid) {
  {
    std::lock_guard lock(mutex_);
    if (const auto it = held_.find(pid); it != held_.end()) return it->second;
  }
  std::vector<std::pair<int, std::uint64_t>> held;
  std::size_t left_out = 0;
  const bool listed = facts::socket_descriptors("/proc/" + std::to_string(pid),
                                                static_cast<std::size_t>(-1), held, left_out);
  auto entry =
      std::make_shared<const HeldSockets>(listed ? HeldSockets(std::move(held)) : HeldSockets());
  std::lock_guard lock(mutex_);
  ++descriptor_reads_;
  return held_.emplace(pid, std::move(entry)).first->second;
}

std::size_t SocketTables::namespace_reads() const {
  std::lock_guard lock(mutex_);
  return namespace_reads_;
}

std::size_t SocketTables::descriptor_reads() const {
  std::lock_guard lock(mutex_);
  return descriptor_reads_;
}

std::vector<model::Socket> read_sockets(pid_t pid, std::vector<std::string>& notes, std::size_t max,
                                        SocketTables* tables) {
  SocketTables own;
  if (tables == nullptr) tables = &own;
  std::vector<model::Socket> out;
  try {
    const auto listed = tables->held_by(pid);
    if (!listed->has_value()) {
      notes.push_back("sockets: cannot list /proc/" + std::to_string(pid) +
                      "/fd (no permission, or it exited)");
      return out;
    }
    const auto& all = **listed;
    const std::size_t kept = std::min(all.size(), max);
    if (all.size() > kept) {
      notes.push_back("sockets: " + std::to_string(all.size() - kept) +
                      " more sockets past the first " + std::to_string(max) + " left out");
    }
    if (kept == 0) return out;
    std::set<std::uint64_t> wanted;
    for (std::size_t i = 0; i < kept; ++i) wanted.insert(all[i].second);
    std::map<std::uint64_t, model::Socket> described;
    auto ns = tables->of(pid, /*tcp=*/false);
    for (const auto& n : ns->unix_notes) notes.push_back("sockets: " + n);
    for (const auto inode : wanted) {
      if (const auto it = ns->unix_sockets.find(inode); it != ns->unix_sockets.end()) {
        described.emplace(inode, it->second);
      }
    }
    if (described.size() < wanted.size()) {
      ns = tables->of(pid, /*tcp=*/true);
      for (const auto& t : ns->tcp) {
        if (!wanted.count(t.inode) || described.count(t.inode)) continue;
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
        described.emplace(t.inode, std::move(s));
      }
      for (const auto& n : ns->tcp_notes) notes.push_back("sockets: " + n);
    }
    for (std::size_t i = 0; i < kept; ++i) {
      const auto it = described.find(all[i].second);
      if (it == described.end()) continue;  // UDP, netlink, …: not what links processes here
      it->second.fd = all[i].first;
      out.push_back(std::move(it->second));
    }
  } catch (const std::exception& e) {
    notes.push_back(std::string("sockets: ") + e.what());
  }
  return out;
}

}  // namespace hangscope::capture
