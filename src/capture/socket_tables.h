// Private to capture: the socket tables of one capture, each read once. A node's processes in
// one network namespace, and the network facts of each, share one read of the namespace's unix
// and TCP sockets, and each process's descriptors are listed once.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hangscope/capture/sockets.h"
#include "hangscope/facts/network.h"

namespace hangscope::capture {

// What a network namespace holds, read through one of its processes.
struct NamespaceSockets {
  std::map<std::uint64_t, model::Socket> unix_sockets;  // by inode
  bool unix_read = false;
  std::vector<facts::TcpSocket> tcp;  // those with an inode
  bool tcp_read = false;
  // "sock_diag", or the /proc file read when sock_diag could not be used (a namespace hangscope
  // may not enter, a kernel without inet_diag).
  std::string tcp_source;
  std::vector<std::string> unix_notes;  // why the unix sockets could not be described
  std::vector<std::string> tcp_notes;   // what could not be read of the TCP tables
};

// The socket descriptors of a process, (fd, inode) in fd order, one per inode, as
// facts::socket_descriptors lists them; nullopt when /proc/PID/fd cannot be listed.
using HeldSockets = std::optional<std::vector<std::pair<int, std::uint64_t>>>;

// Thread-safe: a node's processes are captured in parallel.
class SocketTables {
 public:
  // The namespace of `pid` (by its inode; a namespace whose link cannot be read is read for each
  // process), its unix sockets read, and its TCP sockets too when `tcp`.
  std::shared_ptr<const NamespaceSockets> of(pid_t pid, bool tcp);
  // The descriptors of `pid`'s sockets.
  std::shared_ptr<const HeldSockets> held_by(pid_t pid);

  // What was read: namespaces entered and read, descriptor lists, for the debug log.
  std::size_t namespace_reads() const;
  std::size_t descriptor_reads() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const NamespaceSockets>> namespaces_;  // "net:[N]"
  std::map<pid_t, std::shared_ptr<const HeldSockets>> held_;
  std::size_t namespace_reads_ = 0;
  std::size_t descriptor_reads_ = 0;
};

}  // namespace hangscope::capture
