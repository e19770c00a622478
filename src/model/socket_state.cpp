#include "hangscope/model/socket_state.h"

#include "name_table.h"

namespace hangscope::model {
namespace {

constexpr names::Table<SocketState, 12> kTcpStateNames = {{
    {SocketState::kUnknown, "unknown"},
    {SocketState::kEstablished, "established"},
    {SocketState::kSynSent, "syn-sent"},
    {SocketState::kSynRecv, "syn-recv"},
    {SocketState::kFinWait1, "fin-wait1"},
    {SocketState::kFinWait2, "fin-wait2"},
    {SocketState::kTimeWait, "time-wait"},
    {SocketState::kClose, "close"},
    {SocketState::kCloseWait, "close-wait"},
    {SocketState::kLastAck, "last-ack"},
    {SocketState::kListen, "listen"},
    {SocketState::kClosing, "closing"},
}};

constexpr names::Table<SocketState, 3> kUnixStateNames = {{
    {SocketState::kEstablished, "connected"},
    {SocketState::kListen, "listen"},
    {SocketState::kClose, "unconnected"},
}};

}  // namespace

SocketState socket_state_from_kernel(unsigned number) {
  return number <= static_cast<unsigned>(SocketState::kClosing) ? static_cast<SocketState>(number)
                                                                : SocketState::kUnknown;
}

std::string_view tcp_state_name(SocketState state) {
  return names::name_in(kTcpStateNames, state, "unknown");
}

std::string_view unix_state_name(SocketState state) {
  return names::name_in(kUnixStateNames, state, tcp_state_name(state));
}

SocketState parse_tcp_state(std::string_view name) {
  return names::value_in(kTcpStateNames, name,
                         names::value_in(kUnixStateNames, name, SocketState::kUnknown));
}

SocketState parse_unix_state(std::string_view name) {
  return names::value_in(kUnixStateNames, name,
                         names::value_in(kTcpStateNames, name, SocketState::kUnknown));
}

}  // namespace hangscope::model
