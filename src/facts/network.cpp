#include "hangscope/facts/network.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "hangscope/common/address.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/sock_diag.h"
#include "hangscope/common/text.h"
#include "hangscope/model/fact_keys.h"

namespace hangscope::facts {
namespace {

// Connections kept in model::fact_keys::kNetTcp: a gloo rank of a 4,096-rank job has thousands.
constexpr std::size_t kMaxRecordedConnections = 4096;
constexpr std::size_t kMaxListed = 16;

// "0100007F" (a host-order u32 printed by the kernel) → "127.0.0.1".
std::string ipv4_from_hex(const std::string& hex) {
  const auto v = static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16));
  return std::to_string(v & 0xff) + "." + std::to_string((v >> 8) & 0xff) + "." +
         std::to_string((v >> 16) & 0xff) + "." + std::to_string(v >> 24);
}

// 32 hex digits, four host-order u32 words → IPv6 text; IPv4-mapped addresses as IPv4.
std::string ipv6_from_hex(const std::string& hex) {
  unsigned char bytes[16];
  for (int w = 0; w < 4; ++w) {
    const auto v = static_cast<std::uint32_t>(std::stoul(hex.substr(w * 8, 8), nullptr, 16));
    for (int b = 0; b < 4; ++b) bytes[w * 4 + b] = static_cast<unsigned char>(v >> (8 * b));
  }
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  if (std::memcmp(bytes, mapped, 12) == 0) {
    return std::to_string(bytes[12]) + "." + std::to_string(bytes[13]) + "." +
           std::to_string(bytes[14]) + "." + std::to_string(bytes[15]);
  }
  char text[INET6_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET6, bytes, text, sizeof text);
  return text;
}

// "0100007F:1F90" → ("127.0.0.1", 8080).
std::pair<std::string, int> endpoint_from_hex(const std::string& field) {
  const auto colon = field.find(':');
  if (colon == std::string::npos) throw Error("no ':' in address " + field);
  const std::string ip = field.substr(0, colon);
  const int port = static_cast<int>(std::stoul(field.substr(colon + 1), nullptr, 16));
  if (ip.size() == 8) return {ipv4_from_hex(ip), port};
  if (ip.size() == 32) return {ipv6_from_hex(ip), port};
  throw Error("address " + field + " is neither IPv4 nor IPv6");
}

std::string endpoint(const std::string& ip, int port) {
  const bool v6 = ip.find(':') != std::string::npos;
  return (v6 ? "[" + ip + "]" : ip) + ":" + std::to_string(port);
}

bool is_unspecified(const std::string& ip) {
  return ip == "0.0.0.0" || ip == "::";
}

std::uint32_t ipv4_value(const std::string& ip) {
  in_addr a{};
  return ::inet_pton(AF_INET, ip.c_str(), &a) == 1 ? ntohl(a.s_addr) : 0;
}

// The interface names of PROC_PID/net/dev.
std::vector<std::string> device_names(const std::string& dev_text) {
  std::vector<std::string> names;
  for (const auto& line : split_lines(dev_text)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos || line.find('|') != std::string::npos) continue;
    std::string name = line.substr(0, colon);
    name.erase(0, name.find_first_not_of(' '));
    if (!name.empty()) names.push_back(name);
  }
  return names;
}

// IPv6 addresses per interface from PROC_PID/net/if_inet6 (link-local left out).
std::map<std::string, std::vector<std::string>> ipv6_addresses(const std::string& text) {
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& line : split_lines(text)) {
    std::istringstream in(line);
    std::string hex, index, prefix, scope, flags, name;
    if (!(in >> hex >> index >> prefix >> scope >> flags >> name) || hex.size() != 32) continue;
    unsigned char bytes[16];
    for (int i = 0; i < 16; ++i) {
      bytes[i] = static_cast<unsigned char>(std::stoul(hex.substr(i * 2, 2), nullptr, 16));
    }
    if (bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80) continue;  // fe80::/10
    char text6[INET6_ADDRSTRLEN] = {};
    ::inet_ntop(AF_INET6, bytes, text6, sizeof text6);
    out[name].push_back(text6);
  }
  return out;
}

// The distinct local addresses a process's sockets use (unspecified ones left out).
std::vector<std::string> used_addresses(const std::vector<TcpSocket>& sockets) {
  std::set<std::string> set;
  for (const auto& s : sockets) {
    if (!is_unspecified(s.local_ip)) set.insert(s.local_ip);
  }
  return {set.begin(), set.end()};
}

// GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME against the interfaces and the addresses in use.
std::string check_ifname(const std::string& setting, const NetworkFacts& n) {
  std::vector<std::string> selected, names, allowed;
  for (const auto& i : n.interfaces) {
    names.push_back(i.name);
    if (!interface_selected(i.name, setting)) continue;
    selected.push_back(i.name);
    allowed.insert(allowed.end(), i.addresses.begin(), i.addresses.end());
  }
  if (selected.empty()) {
    return "mismatch: " + setting + " names no interface of the rank's network namespace (it has " +
           join(names, ", ", kMaxListed) + ")";
  }
  std::vector<std::string> outside;
  for (const auto& ip : used_addresses(n.sockets)) {
    const bool store_or_local = is_loopback_ip(ip);
    if (!store_or_local && std::find(allowed.begin(), allowed.end(), ip) == allowed.end()) {
      outside.push_back(ip);
    }
  }
  const std::string chosen =
      join(selected, ", ", kMaxListed) + " (" + join(allowed, ", ", kMaxListed) + ")";
  if (!outside.empty()) {
    return "mismatch: " + setting + " selects " + chosen + ", but the rank's sockets also use " +
           join(outside, ", ", kMaxListed);
  }
  return "ok: " + setting + " selects " + chosen;
}

std::string check_host_ip(const std::string& host_ip, const NetworkFacts& n) {
  for (const auto& i : n.interfaces) {
    if (std::find(i.addresses.begin(), i.addresses.end(), host_ip) != i.addresses.end()) {
      return "ok: " + host_ip + " is an address of " + i.name;
    }
  }
  return "mismatch: " + host_ip + " is not an address of the rank's network namespace";
}

// Whether the rank talks to its c10d store (MASTER_ADDR:MASTER_PORT) or hosts it.
std::string check_store(const std::string& addr, const std::string& port, const NetworkFacts& n) {
  const int p = std::atoi(port.c_str());
  for (const auto& s : n.sockets) {
    if (s.state == model::SocketState::kListen && s.local_port == p) {
      return "ok: hosts the store (listening on " + s.local() + ")";
    }
  }
  const std::string store = endpoint(addr, p);
  bool connecting = false;
  for (const auto& s : n.sockets) {
    if (s.remote_port != p || s.remote_ip != addr) continue;
    if (s.state == model::SocketState::kEstablished)
      return "ok: connected to the store at " + store;
    connecting = connecting || s.state == model::SocketState::kSynSent;
  }
  return connecting ? "mismatch: still connecting to the store at " + store
                    : "mismatch: no TCP connection to the store at " + store;
}

}  // namespace

std::string TcpSocket::local() const {
  return endpoint(local_ip, local_port);
}
std::string TcpSocket::remote() const {
  return endpoint(remote_ip, remote_port);
}

std::vector<TcpSocket> parse_proc_net_tcp(const std::string& text) {
  std::vector<TcpSocket> out;
  int line_number = 0;
  for (const auto& line : split_lines(text)) {
    ++line_number;
    if (line_number == 1 || line.find_first_not_of(' ') == std::string::npos) continue;
    std::istringstream in(line);
    std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout;
    std::uint64_t inode = 0;
    if (!(in >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >>
          timeout >> inode)) {
      throw Error("line " + std::to_string(line_number) + ": not a /proc/net/tcp row: " + line);
    }
    try {
      TcpSocket s;
      std::tie(s.local_ip, s.local_port) = endpoint_from_hex(local);
      std::tie(s.remote_ip, s.remote_port) = endpoint_from_hex(remote);
      s.state =
          model::socket_state_from_kernel(static_cast<unsigned>(std::stoul(state, nullptr, 16)));
      s.inode = inode;
      const auto colon = queues.find(':');
      if (colon == std::string::npos) throw Error("no tx_queue:rx_queue in " + queues);
      s.tx_queue = static_cast<std::uint32_t>(std::stoul(queues.substr(0, colon), nullptr, 16));
      s.rx_queue = static_cast<std::uint32_t>(std::stoul(queues.substr(colon + 1), nullptr, 16));
      s.retransmits = static_cast<std::uint32_t>(std::stoul(retransmits, nullptr, 16));
      out.push_back(std::move(s));
    } catch (const std::exception& e) {
      throw Error("line " + std::to_string(line_number) + ": " + e.what() + ": " + line);
    }
  }
  return out;
}

std::vector<std::string> local_ipv4_addresses(const std::string& fib_trie) {
  std::set<std::string> found;
  std::string last;
  for (const auto& line : split_lines(fib_trie)) {
    const auto leaf = line.find("|-- ");
    if (leaf != std::string::npos) {
      last = line.substr(leaf + 4);
      continue;
    }
    if (!last.empty() && line.find("/32 host LOCAL") != std::string::npos) found.insert(last);
  }
  return {found.begin(), found.end()};
}

std::map<std::string, std::string> interfaces_of_addresses(const std::vector<std::string>& ipv4,
                                                           const std::string& route_table) {
  struct Route {
    std::string iface;
    std::uint32_t destination, mask;
  };
  std::vector<Route> routes;
  for (const auto& line : split_lines(route_table)) {
    std::istringstream in(line);
    std::string iface, destination, gateway, flags, refcnt, use, metric, mask;
    if (!(in >> iface >> destination >> gateway >> flags >> refcnt >> use >> metric >> mask) ||
        iface == "Iface") {
      continue;
    }
    // Little-endian hex like tcp's addresses; compare in host order after conversion.
    routes.push_back(
        {iface, ipv4_value(ipv4_from_hex(destination)), ipv4_value(ipv4_from_hex(mask))});
  }
  std::map<std::string, std::string> out;
  for (const auto& ip : ipv4) {
    if (is_loopback_ip(ip)) {
      out[ip] = "lo";
      continue;
    }
    const std::uint32_t v = ipv4_value(ip);
    const Route* best = nullptr;
    for (const auto& r : routes) {
      if ((v & r.mask) == r.destination && (!best || r.mask > best->mask)) best = &r;
    }
    if (best) out[ip] = best->iface;
  }
  return out;
}

std::vector<NetworkInterface> network_interfaces(const std::string& proc_pid_dir) {
  const std::string net = proc_pid_dir + "/net";
  std::vector<NetworkInterface> interfaces;
  for (const auto& name : device_names(read_file(net + "/dev").text.value_or(""))) {
    interfaces.push_back({name, {}});
  }
  const auto ipv4 = local_ipv4_addresses(read_file(net + "/fib_trie").text.value_or(""));
  const auto owners = interfaces_of_addresses(ipv4, read_file(net + "/route").text.value_or(""));
  const auto ipv6 = ipv6_addresses(read_file(net + "/if_inet6").text.value_or(""));
  for (auto& i : interfaces) {
    for (const auto& ip : ipv4) {
      if (auto it = owners.find(ip); it != owners.end() && it->second == i.name) {
        i.addresses.push_back(ip);
      }
    }
    if (auto it = ipv6.find(i.name); it != ipv6.end()) {
      i.addresses.insert(i.addresses.end(), it->second.begin(), it->second.end());
    }
  }
  return interfaces;
}

bool socket_descriptors(const std::string& proc_pid_dir, std::size_t max,
                        std::vector<std::pair<int, std::uint64_t>>& out, std::size_t& left_out) {
  const std::string fd_dir = proc_pid_dir + "/fd";
  const auto entries = list_directory(fd_dir);
  if (!entries) return false;
  std::vector<std::pair<int, std::uint64_t>> found;
  for (const auto& entry : *entries) {
    char target[128] = {};
    const ssize_t n = ::readlink((fd_dir + "/" + entry).c_str(), target, sizeof target - 1);
    if (n <= 0 || std::strncmp(target, "socket:[", 8) != 0) continue;
    found.emplace_back(std::atoi(entry.c_str()), std::strtoull(target + 8, nullptr, 10));
  }
  std::sort(found.begin(), found.end());  // list_directory sorts names: "10" before "9"
  std::set<std::uint64_t> seen;
  left_out = 0;
  for (const auto& [fd, inode] : found) {
    if (!seen.insert(inode).second) continue;  // dup'ed: its first descriptor says it
    if (out.size() >= max) {
      ++left_out;
      continue;
    }
    out.emplace_back(fd, inode);
  }
  return true;
}

std::set<std::uint64_t> socket_inodes(const std::string& proc_pid_dir) {
  std::vector<std::pair<int, std::uint64_t>> held;
  std::size_t left_out = 0;
  socket_descriptors(proc_pid_dir, static_cast<std::size_t>(-1), held, left_out);
  std::set<std::uint64_t> inodes;
  for (const auto& [fd, inode] : held) inodes.insert(inode);
  return inodes;
}

bool interface_selected(const std::string& name, const std::string& setting) {
  std::string list = setting;
  const bool exclude = !list.empty() && list.front() == '^';
  if (exclude) list.erase(0, 1);
  const bool exact = !list.empty() && list.front() == '=';
  if (exact) list.erase(0, 1);
  bool match = false;
  std::istringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) continue;
    match = match || (exact ? name == item : name.rfind(item, 0) == 0);
  }
  return exclude ? !match : match;
}

std::vector<TcpSocket> read_tcp_tables(const std::string& proc_pid_dir,
                                       std::vector<std::string>& notes) {
  std::vector<TcpSocket> out;
  for (const char* table : {"/net/tcp", "/net/tcp6"}) {
    const auto read = read_file(proc_pid_dir + table);
    if (!read.text) {
      if (read.error != ENOENT)
        notes.push_back(errno_message("cannot read " + proc_pid_dir + table, read.error));
      continue;
    }
    try {
      auto rows = parse_proc_net_tcp(*read.text);
      out.insert(out.end(), std::make_move_iterator(rows.begin()),
                 std::make_move_iterator(rows.end()));
    } catch (const Error& e) {
      notes.push_back(proc_pid_dir + table + ": " + e.what());
    }
  }
  return out;
}

namespace {

// An address of inet_diag's socket id (network byte order, 4 or 16 bytes) as the /proc parser
// writes it: dotted IPv4, IPv6 text, an IPv4-mapped IPv6 address as IPv4.
std::string diag_address(int family, const void* address) {
  static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  const auto* bytes = static_cast<const unsigned char*>(address);
  char text[INET6_ADDRSTRLEN] = {};
  if (family == AF_INET6 && std::memcmp(bytes, mapped, sizeof mapped) == 0) {
    ::inet_ntop(AF_INET, bytes + 12, text, sizeof text);
  } else {
    ::inet_ntop(family, bytes, text, sizeof text);
  }
  return text;
}

TcpSocket parse_inet_message(std::string_view body, std::size_t at) {
  if (body.size() < sizeof(inet_diag_msg)) {
    throw Error("inet_diag answer at byte " + std::to_string(at) + ": a message of " +
                std::to_string(body.size()) + " bytes, shorter than inet_diag_msg");
  }
  inet_diag_msg m{};
  std::memcpy(&m, body.data(), sizeof m);
  if (m.idiag_family != AF_INET && m.idiag_family != AF_INET6) {
    throw Error("inet_diag answer at byte " + std::to_string(at) + ": address family " +
                std::to_string(m.idiag_family) + ", neither IPv4 nor IPv6");
  }
  TcpSocket s;
  s.local_ip = diag_address(m.idiag_family, m.id.idiag_src);
  s.remote_ip = diag_address(m.idiag_family, m.id.idiag_dst);
  s.local_port = ntohs(m.id.idiag_sport);
  s.remote_port = ntohs(m.id.idiag_dport);
  s.state = model::socket_state_from_kernel(m.idiag_state);
  s.inode = m.idiag_inode;
  s.rx_queue = m.idiag_rqueue;
  // A listener's wqueue is its backlog limit; /proc/net/tcp shows 0 there.
  s.tx_queue = s.state == model::SocketState::kListen ? 0 : m.idiag_wqueue;
  // idiag_retrans is icsk_retransmits while the retransmission timer runs (timer 1); under the
  // keepalive or zero-window timers it counts probes.
  s.retransmits = m.idiag_timer == 1 ? m.idiag_retrans : 0;
  return s;
}

}  // namespace

InetDiagAnswer parse_inet_diag(std::string_view bytes) {
  InetDiagAnswer answer;
  answer.done = walk_sock_diag_answer(
      bytes, "inet_diag answer", "sock_diag refused the TCP socket dump",
      [&](std::string_view body, std::size_t offset) {
        answer.sockets.push_back(parse_inet_message(body, offset));
        answer.families.push_back(static_cast<unsigned char>(body[0]));  // idiag_family
      });
  return answer;
}

std::vector<TcpSocket> dump_tcp_sockets() {
  // inet_diag's first request form (TCPDIAG_GETSOCK, struct inet_diag_req) asks for both
  // families at once (the kernel reads it as AF_UNSPEC): one walk of the TCP hash tables, where
  // SOCK_DIAG_BY_FAMILY needs one per family. Each walk visits every bucket of the machine's
  // table, which is most of the cost when few sockets are open.
  struct {
    nlmsghdr header;
    inet_diag_req request;
  } message{};
  message.header.nlmsg_len = sizeof message;
  message.header.nlmsg_type = TCPDIAG_GETSOCK;
  message.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  message.header.nlmsg_seq = 1;
  message.request.idiag_family = AF_INET;
  // Every state a descriptor can hold: TIME_WAIT and requests (SYN_RECV, NEW_SYN_RECV) have no
  // inode.
  constexpr unsigned kNewSynRecv = 12;  // TCP_NEW_SYN_RECV, kernel-internal
  message.request.idiag_states =
      ~((1u << TCP_TIME_WAIT) | (1u << TCP_SYN_RECV) | (1u << kNewSynRecv));
  std::vector<TcpSocket> ipv4, ipv6;  // net/tcp's order: the IPv4 sockets, then tcp6's
  sock_diag_dump(&message, sizeof message, "TCP sockets", [&](std::string_view bytes) {
    auto answer = parse_inet_diag(bytes);
    for (std::size_t i = 0; i < answer.sockets.size(); ++i) {
      if (answer.sockets[i].inode == 0) continue;
      (answer.families[i] == AF_INET6 ? ipv6 : ipv4).push_back(std::move(answer.sockets[i]));
    }
    return answer.done;
  });
  ipv4.insert(ipv4.end(), std::make_move_iterator(ipv6.begin()),
              std::make_move_iterator(ipv6.end()));
  return ipv4;
}

NamespaceTables read_namespace_tables(const std::string& proc_pid_dir) {
  NamespaceTables t;
  t.interfaces = network_interfaces(proc_pid_dir);
  t.sockets = read_tcp_tables(proc_pid_dir, t.notes);
  return t;
}

NetworkFacts network_facts(const std::vector<NetworkInterface>& interfaces,
                           const std::vector<TcpSocket>& namespace_sockets,
                           const std::vector<std::string>& notes,
                           const std::set<std::uint64_t>& held) {
  NetworkFacts n;
  n.interfaces = interfaces;
  n.notes = notes;
  for (const auto& s : namespace_sockets) {
    if (s.inode != 0 && held.count(s.inode)) n.sockets.push_back(s);
  }
  return n;
}

NetworkFacts network_facts(const std::string& proc_pid_dir, const NamespaceTables& tables) {
  return network_facts(tables.interfaces, tables.sockets, tables.notes,
                       socket_inodes(proc_pid_dir));
}

NetworkFacts network_facts(const std::string& proc_pid_dir) {
  return network_facts(proc_pid_dir, read_namespace_tables(proc_pid_dir));
}

std::map<std::string, std::string> NetworkFacts::facts(
    const std::map<std::string, std::string>& env) const {
  std::map<std::string, std::string> out;
  std::vector<std::string> described;
  for (const auto& i : interfaces) {
    described.push_back(i.name +
                        (i.addresses.empty() ? "" : " " + join(i.addresses, " ", kMaxListed)));
  }
  if (!described.empty()) out[model::fact_keys::kNetInterfaces] = join(described, ", ", 64);
  std::vector<std::string> listening, peers, tcp;
  std::size_t established = 0, connecting = 0;
  std::set<std::string> peer_addresses;
  for (const auto& s : sockets) {
    const bool is_established = s.state == model::SocketState::kEstablished;
    if (s.state == model::SocketState::kListen) listening.push_back(s.local());
    if (!is_established && s.state != model::SocketState::kSynSent) continue;
    (is_established ? established : connecting) += 1;
    peer_addresses.insert(s.remote_ip);
    if (tcp.size() < kMaxRecordedConnections) {
      tcp.push_back(s.local() + (is_established ? ">" : "~") + s.remote());
    }
  }
  if (!listening.empty()) out[model::fact_keys::kNetListening] = join(listening, ", ", kMaxListed);
  out[model::fact_keys::kNetConnections] =
      std::to_string(established) + " established" +
      (connecting ? ", " + std::to_string(connecting) + " still connecting" : "") +
      (peer_addresses.empty()
           ? ""
           : " (peers " + join({peer_addresses.begin(), peer_addresses.end()}, ", ", kMaxListed) +
                 ")");
  out[model::fact_keys::kNetTcp] = join(tcp, " ", kMaxRecordedConnections);
  if (established + connecting > tcp.size()) {
    out[model::fact_keys::kNetTcpTruncated] = std::to_string(established + connecting - tcp.size());
  }
  const auto get = [&](const char* key) {
    const auto it = env.find(key);
    return it == env.end() ? std::string() : it->second;
  };
  for (const char* var : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME"}) {
    if (!get(var).empty() && !interfaces.empty()) {
      out[model::fact_keys::net_variable(var)] = check_ifname(get(var), *this);
    }
  }
  if (!get("VLLM_HOST_IP").empty() && !interfaces.empty()) {
    out[model::fact_keys::net_variable("VLLM_HOST_IP")] = check_host_ip(get("VLLM_HOST_IP"), *this);
  }
  if (is_ip_literal(get("MASTER_ADDR")) && !get("MASTER_PORT").empty()) {
    out[model::fact_keys::kNetStore] = check_store(get("MASTER_ADDR"), get("MASTER_PORT"), *this);
  }
  if (!notes.empty()) out[model::fact_keys::kNetNotes] = join(notes, "; ", kMaxListed);
  return out;
}

}  // namespace hangscope::facts
