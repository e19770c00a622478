// A process's TCP connections, typed: from its captured sockets, else from its "net.tcp" fact.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hangscope/model/node_snapshot.h"
#include "hangscope/model/socket_state.h"

namespace hangscope::model {

// One TCP connection (or listener) of a process: its two ends and its state, typed.
struct TcpConnection {
  std::string local, remote;  // "10.0.0.1:5555", "[::1]:80" ("0.0.0.0:0": a listener's remote)
  SocketState state = SocketState::kUnknown;
  bool operator==(const TcpConnection&) const = default;
};

// The TCP connections of process `p`, the one reading of them the analysis makes: its typed
// sockets when they were captured (ProcessDump::sockets, schema 2.3: every TCP socket it holds,
// listeners included, in the dump's order), else its fact_keys::kNetTcp (established and
// connecting ones only: older files, captures without sockets). nullopt (not known, unlike an
// empty list: none held) when neither is there, or when the fact is all there is and
// fact_keys::kNetTcpTruncated says it kept fewer than the process held.
std::optional<std::vector<TcpConnection>> tcp_connections(const ProcessRecord& p);

// The connections a "net.tcp" fact records: "L>R" established (kEstablished), "L~R" still
// connecting (kSynSent), separated by spaces.
std::vector<TcpConnection> parse_recorded_connections(const std::string& net_tcp);

}  // namespace hangscope::model
