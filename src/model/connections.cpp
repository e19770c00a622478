#include "hangscope/model/connections.h"

#include <sstream>

#include "hangscope/model/fact_keys.h"

namespace hangscope::model {
namespace {

// The TCP sockets of a dump as connections, in its order; none when it holds no TCP socket.
std::vector<TcpConnection> connections_of_sockets(const std::vector<Socket>& sockets) {
  std::vector<TcpConnection> out;
  for (const auto& s : sockets) {
    if (s.family == Socket::Family::kTcp) out.push_back({s.local, s.remote, s.state});
  }
  return out;
}

}  // namespace

std::optional<std::vector<TcpConnection>> tcp_connections(const ProcessRecord& p) {
  if (p.dump && !p.dump->sockets.empty()) return connections_of_sockets(p.dump->sockets);
  const auto recorded = p.facts.find(fact_keys::kNetTcp);
  if (recorded == p.facts.end() || p.facts.count(fact_keys::kNetTcpTruncated)) return std::nullopt;
  return parse_recorded_connections(recorded->second);
}

std::vector<TcpConnection> parse_recorded_connections(const std::string& net_tcp) {
  std::vector<TcpConnection> out;
  std::istringstream in(net_tcp);
  for (std::string item; in >> item;) {
    const auto at = item.find_first_of(">~");
    if (at == std::string::npos) continue;
    out.push_back({item.substr(0, at), item.substr(at + 1),
                   item[at] == '>' ? SocketState::kEstablished : SocketState::kSynSent});
  }
  return out;
}

}  // namespace hangscope::model
