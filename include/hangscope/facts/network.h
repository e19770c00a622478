// A rank's network as it sees it (its network namespace, through /proc/PID): interfaces and
// their addresses, its own TCP sockets (inodes from /proc/PID/fd matched with net/tcp and tcp6),
// and whether GLOO_SOCKET_IFNAME, NCCL_SOCKET_IFNAME, VLLM_HOST_IP and MASTER_ADDR agree with
// what it actually bound and connected to.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hangscope/model/socket_state.h"

namespace hangscope::facts {

struct TcpSocket {
  std::string local_ip, remote_ip;  // dotted IPv4, or IPv6 text; IPv4-mapped IPv6 as IPv4
  int local_port = 0, remote_port = 0;
  model::SocketState state = model::SocketState::kUnknown;  // its name: model::tcp_state_name
  std::uint64_t inode = 0;
  std::uint32_t tx_queue = 0;     // bytes sent and not yet acknowledged (or not yet sent)
  std::uint32_t rx_queue = 0;     // bytes received and not yet read
  std::uint32_t retransmits = 0;  // unrecovered retransmission timeouts
  std::string local() const;      // "198.51.100.2:41234", "[::1]:80"
  std::string remote() const;
};

// The rows of /proc/net/tcp or /proc/net/tcp6. Throws Error naming the line when a row is not
// in the kernel's format.
std::vector<TcpSocket> parse_proc_net_tcp(const std::string& text);

struct NetworkInterface {
  std::string name;
  std::vector<std::string> addresses;  // IPv4 first; IPv6 link-local left out
};

// IPv4 addresses marked "/32 host LOCAL" in /proc/net/fib_trie.
std::vector<std::string> local_ipv4_addresses(const std::string& fib_trie);

// Which interface carries each address: the most specific matching row of /proc/net/route
// (127.0.0.0/8 is lo's).
std::map<std::string, std::string> interfaces_of_addresses(const std::vector<std::string>& ipv4,
                                                           const std::string& route_table);

// Interfaces and addresses from PROC_PID/net/{dev,fib_trie,route,if_inet6}.
std::vector<NetworkInterface> network_interfaces(const std::string& proc_pid_dir);

// Socket inodes of the process's open files ("socket:[123]" links under PROC_PID/fd).
std::set<std::uint64_t> socket_inodes(const std::string& proc_pid_dir);

// The (fd, inode) of every socket under PROC_PID/fd, in fd order, one per inode (its first
// descriptor), at most `max`; `left_out` counts the sockets past it. False when the directory
// cannot be read.
bool socket_descriptors(const std::string& proc_pid_dir, std::size_t max,
                        std::vector<std::pair<int, std::uint64_t>>& out, std::size_t& left_out);

// Every row of PROC_PID/net/tcp and tcp6 (the process's network namespace); what could not be
// read or parsed is said in `notes`.
std::vector<TcpSocket> read_tcp_tables(const std::string& proc_pid_dir,
                                       std::vector<std::string>& notes);

// One answer of an inet_diag dump (sock_diag's TCP sockets, one recv): its sockets (IPv4 and
// IPv6, addresses as parse_proc_net_tcp gives them; a listener's tx_queue 0, as /proc shows it;
// retransmits while the retransmission timer runs, else 0) and whether the dump ended. Throws
// Error naming the offset of a message cut short or malformed, SystemError for a refusal.
struct InetDiagAnswer {
  std::vector<TcpSocket> sockets;
  std::vector<int> families;  // each socket's own: AF_INET or AF_INET6
  bool done = false;
};
InetDiagAnswer parse_inet_diag(std::string_view bytes);

// Every TCP socket of the calling thread's network namespace that a descriptor can hold (the
// kernel leaves out TIME_WAIT and pending connection requests, which have no inode), from one
// sock_diag dump of both families: one walk of the kernel's TCP tables, where net/tcp and tcp6
// take two each (their last, empty read walks them again). In the order of those files: the
// IPv4 sockets, then the IPv6 ones. Throws Error (SystemError for a refusal: a kernel or
// container without inet_diag) when sock_diag cannot give them.
std::vector<TcpSocket> dump_tcp_sockets();

// Whether an interface name matches an NCCL/Gloo *_SOCKET_IFNAME value: comma-separated
// prefixes, "=name" for exact names, a leading "^" to exclude.
bool interface_selected(const std::string& name, const std::string& ifname_setting);

struct NetworkFacts {
  std::vector<NetworkInterface> interfaces;
  std::vector<TcpSocket> sockets;  // the process's own, established / listening / connecting
  std::vector<std::string> notes;

  // "net.interfaces", "net.listening", "net.connections", "net.tcp" (machine-readable:
  // "L>R" per established connection, "L~R" per connection attempt), and the checks
  // "net.GLOO_SOCKET_IFNAME", "net.NCCL_SOCKET_IFNAME", "net.VLLM_HOST_IP", "net.store", whose
  // values start with "ok: " or "mismatch: ".
  std::map<std::string, std::string> facts(const std::map<std::string, std::string>& env) const;
};

// What a network namespace holds, read through one of its processes: its interfaces and every
// TCP socket of net/tcp and tcp6 (the processes of a namespace share these tables).
struct NamespaceTables {
  std::vector<NetworkInterface> interfaces;
  std::vector<TcpSocket> sockets;
  std::vector<std::string> notes;
};
NamespaceTables read_namespace_tables(const std::string& proc_pid_dir);

// The network facts of a process (PROC_PID = "/proc/PID"): its namespace's tables, kept to the
// sockets the process holds. The second form reuses tables already read for its namespace.
NetworkFacts network_facts(const std::string& proc_pid_dir);
NetworkFacts network_facts(const std::string& proc_pid_dir, const NamespaceTables& tables);
// The same from what the caller read already: the namespace's interfaces, its TCP sockets and
// what could not be read of them, and the inodes of the sockets the process holds.
NetworkFacts network_facts(const std::vector<NetworkInterface>& interfaces,
                           const std::vector<TcpSocket>& namespace_sockets,
                           const std::vector<std::string>& notes,
                           const std::set<std::uint64_t>& held);

}  // namespace hangscope::facts
