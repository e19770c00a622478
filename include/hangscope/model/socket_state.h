// A socket's state as the kernel numbers it: the one enum of TCP states and unix socket states
// that the facts, capture, the agent and the analysis branch on.
#pragma once

#include <cstdint>
#include <string_view>

namespace hangscope::model {

// The kernel's numbers (include/net/tcp_states.h): the `st` column of /proc/net/tcp and tcp6,
// and unix_diag's state of a unix socket, which uses three of them (ESTABLISHED: connected,
// LISTEN, CLOSE: unconnected). Its names are TCP's or unix's (`tcp_state_name`,
// `unix_state_name`), what dumps, reports, snapshots' text and older files say.
enum class SocketState : std::uint8_t {
  kUnknown = 0,      // a number the kernel does not give these tables, or no state read
  kEstablished = 1,  // unix: "connected"
  kSynSent = 2,
  kSynRecv = 3,
  kFinWait1 = 4,
  kFinWait2 = 5,
  kTimeWait = 6,
  kClose = 7,  // unix: "unconnected"
  kCloseWait = 8,
  kLastAck = 9,
  kListen = 10,
  kClosing = 11,
};

// The state the kernel's number stands for; kUnknown for a number past kClosing.
SocketState socket_state_from_kernel(unsigned number);
// TCP's names: "established", "syn-sent", "syn-recv", "fin-wait1", "fin-wait2", "time-wait",
// "close", "close-wait", "last-ack", "listen", "closing"; "unknown" for kUnknown.
std::string_view tcp_state_name(SocketState state);
// A unix socket's: "connected", "listen", "unconnected"; TCP's name for any other.
std::string_view unix_state_name(SocketState state);
// The state a TCP name (or a unix one) says; kUnknown for a name neither has.
SocketState parse_tcp_state(std::string_view name);
SocketState parse_unix_state(std::string_view name);

}  // namespace hangscope::model
