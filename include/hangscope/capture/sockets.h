// The sockets a live process holds open (/proc/PID/fd), each described from outside: unix
// sockets through the kernel's sock_diag (their name, type, state and the peer's inode, which
// /proc/net/unix does not give), TCP sockets through sock_diag's inet_diag (one walk of the
// kernel's TCP tables for IPv4 and IPv6), else the process's own net/tcp and tcp6. Within one
// capture each network namespace's tables are read once (SocketTables, src/capture).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/model/process_dump.h"

namespace hangscope::capture {

// The most sockets described per process; past it, a note says how many were left out.
inline constexpr std::size_t kMaxSockets = 4096;

// One answer of a unix_diag dump as received from the netlink socket: its sockets, and whether
// the answer ended (NLMSG_DONE).
struct UnixDiagAnswer {
  std::vector<model::Socket> sockets;  // family kUnix; fd not known here
  bool done = false;
};

// The netlink messages in `bytes` (one recv's worth). Throws Error naming the offset for a
// message cut short or malformed, or the errno of an NLMSG_ERROR.
UnixDiagAnswer parse_unix_diag(std::string_view bytes);

// A unix socket's bound name from unix_diag's UNIX_DIAG_NAME (sun_path's bytes): a path, or
// "@name" for an abstract one (NULs as '@').
std::string unix_socket_name(std::string_view sun_path);

// The socket tables of one capture (src/capture/socket_tables.h).
class SocketTables;

// The unix and TCP sockets of process `pid`, in fd order. Never throws: what could not be read
// is said in `notes`. `tables`: the tables of the capture it is part of (else read for it alone).
std::vector<model::Socket> read_sockets(pid_t pid, std::vector<std::string>& notes,
                                        std::size_t max = kMaxSockets,
                                        SocketTables* tables = nullptr);

}  // namespace hangscope::capture
