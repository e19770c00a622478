// Which ranks of a job hold TCP connections to each other, from each rank's own TCP connections
// (model::tcp_connections: its captured sockets, else its net.tcp fact): connections are matched
// end to end (my local = your remote). Connections to the c10d store's port are left out, since
// every rank has one to the store's host. In a job that uses gloo, a pair of ranks without a
// connection is evidence.
#include <algorithm>
#include <map>
#include <set>

#include "hangscope/analysis/analysis.h"
#include "hangscope/common/address.h"
#include "hangscope/model/connections.h"
#include "hangscope/waits/frameworks.h"

namespace hangscope::analysis {
namespace {

// An endpoint made unique across nodes: loopback endpoints are only meaningful on their node.
std::string endpoint_key(const std::string& node, const std::string& endpoint) {
  return is_loopback_endpoint(endpoint) ? node + "|" + endpoint : endpoint;
}

bool on_port(const std::string& endpoint, const std::string& port) {
  return !port.empty() && endpoint.size() > port.size() &&
         endpoint.compare(endpoint.size() - port.size() - 1, std::string::npos, ":" + port) == 0;
}

struct RankConnections {
  std::size_t index;  // into Job::ranks
  std::vector<model::TcpConnection> connections;
};

// The captured ranks whose connections are known, their store connections left out.
std::vector<RankConnections> known_connections(const Job& job) {
  std::vector<RankConnections> out;
  for (std::size_t i = 0; i < job.ranks.size(); ++i) {
    const auto* p = job.ranks[i].latest();
    if (p == nullptr || !job.ranks[i].rank) continue;
    auto connections = model::tcp_connections(*p);
    if (!connections) continue;
    const auto port_it = p->environment.find("MASTER_PORT");
    const std::string store_port = port_it == p->environment.end() ? "" : port_it->second;
    RankConnections rc{i, {}};
    for (auto& c : *connections) {
      if (c.state == model::SocketState::kEstablished && !on_port(c.local, store_port) &&
          !on_port(c.remote, store_port)) {
        rc.connections.push_back(std::move(c));
      }
    }
    out.push_back(std::move(rc));
  }
  return out;
}

// Whether the rank runs gloo: a frame of gloo's transport or of ProcessGroupGloo in some thread.
bool uses_gloo(const RankEntry& rank) {
  const auto* p = rank.latest();
  if (p == nullptr || !p->dump) return false;
  return model::any_native_frame(*p->dump,
                                 waits::frames_meaning(waits::FrameMeaning::kGlooTransport));
}

}  // namespace

void link_tcp_peers(Job& job) {
  if (job.group) return;  // a group's ranks are no torch job's: the pairs are its jobs'
  const auto known = known_connections(job);
  // Local endpoint → the rank that owns it; an endpoint claimed twice is ambiguous (NAT).
  std::map<std::string, int> owner;
  for (const auto& rc : known) {
    const auto& r = job.ranks[rc.index];
    for (const auto& c : rc.connections) {
      auto [it, inserted] = owner.emplace(endpoint_key(r.node, c.local), *r.rank);
      if (!inserted && it->second != *r.rank) it->second = -1;
    }
  }
  std::map<int, std::set<int>> peers;
  for (const auto& rc : known) {
    const auto& r = job.ranks[rc.index];
    for (const auto& c : rc.connections) {
      const auto it = owner.find(endpoint_key(r.node, c.remote));
      if (it == owner.end() || it->second < 0 || it->second == *r.rank) continue;
      peers[*r.rank].insert(it->second);
      peers[it->second].insert(*r.rank);
    }
  }
  // Gloo connects every pair of a process group's ranks when the group is made (vLLM makes a
  // gloo CPU group over the whole world), so in a job that uses gloo every rank is an expected
  // peer of every other; NCCL's bootstrap is a ring, where a missing pair says nothing.
  // The mesh must also be seen: most ranks connected to most others. Otherwise the tables are
  // cut short (4,096 connections are kept per rank) or the job's groups are small, and a
  // missing pair says nothing.
  std::vector<std::size_t> degrees;
  for (const auto& rc : known) degrees.push_back(peers[*job.ranks[rc.index].rank].size());
  std::nth_element(degrees.begin(), degrees.begin() + degrees.size() / 2, degrees.end());
  const bool mesh_seen = !degrees.empty() && 2 * degrees[degrees.size() / 2] >= known.size() - 1;
  job.tcp_meshed = known.size() >= 2 && mesh_seen &&
                   std::any_of(known.begin(), known.end(),
                               [&](const auto& rc) { return uses_gloo(job.ranks[rc.index]); });
  for (const auto& rc : known) {
    auto& r = job.ranks[rc.index];
    r.tcp_known = true;
    const auto& mine = peers[*r.rank];
    r.tcp_peers.assign(mine.begin(), mine.end());
    r.missing_tcp_peers.clear();
    if (!job.tcp_meshed) continue;
    for (const auto& other : known) {
      const int o = *job.ranks[other.index].rank;
      if (o != *r.rank && !mine.count(o)) r.missing_tcp_peers.push_back(o);
    }
  }
}

}  // namespace hangscope::analysis
