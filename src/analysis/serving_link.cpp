// The serving chain, part 2, link: which processes talk to which (sockets first: unix peers,
// TCP connections; else parent pids, the broadcast ring, the only job), which workers an engine
// core waits for, and where the workers' wait-for graph from them ends.
#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "hangscope/common/address.h"
#include "hangscope/common/numbers.h"
#include "hangscope/common/text.h"
#include "hangscope/model/connections.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/model/frame_pattern.h"
#include "hangscope/waits/frameworks.h"
#include "serving_parts.h"

namespace hangscope::analysis::serving {
namespace {

std::optional<int> rank_in_repr(const std::string& text) {
  if (text.size() > 4096) return std::nullopt;
  static const std::regex rank(R"((?:^|[\s(,])rank=(\d+))");
  std::smatch m;
  if (!std::regex_search(text, m, rank)) return std::nullopt;
  return to_int(m[1].str());
}

// The job of the ranks whose parent is `parent` on its node (most of them), "" when none.
std::string job_of_children(const std::vector<Job>& jobs, const std::string& node, pid_t parent) {
  std::map<std::string, int> count;
  for (const auto& j : jobs) {
    if (j.group) continue;  // a group's job is no workers' job
    for (const auto& r : j.ranks) {
      const auto* p = r.latest();
      if (p != nullptr && r.node == node && p->ppid == parent) ++count[j.key];
    }
  }
  std::string best;
  int most = 0;
  for (const auto& [key, n] : count) {
    if (n > most) best = key, most = n;
  }
  return best;
}

// The port of an endpoint, "5555" of "10.0.0.1:5555".
std::string port_of(const std::string& endpoint) {
  return endpoint.substr(endpoint.rfind(':') + 1);
}

// The sockets of one process, indexed to find the other ends of another process's sockets: its
// unix sockets, and its TCP connections as model::tcp_connections gives them (its sockets, else
// its net.tcp fact).
struct SocketIndex {
  std::string node;
  std::map<std::uint64_t, const model::Socket*> unix_by_inode;
  std::vector<model::TcpConnection> tcp;
  std::set<std::pair<std::string, std::string>> tcp_by_ends;  // established: (local, remote)
  std::set<std::string> listening_ports;
  // Whether its listeners are known: its sockets were captured (the net.tcp fact has none).
  bool listeners_known = false;

  SocketIndex(std::string node_name, const model::ProcessRecord& p) : node(std::move(node_name)) {
    listeners_known = p.dump && !p.dump->sockets.empty();
    if (p.dump) {
      for (const auto& s : p.dump->sockets) {
        if (s.family == model::Socket::Family::kUnix) unix_by_inode[s.inode] = &s;
      }
    }
    tcp = model::tcp_connections(p).value_or(std::vector<model::TcpConnection>{});
    for (const auto& c : tcp) {
      if (c.state == model::SocketState::kEstablished) {
        tcp_by_ends.insert({c.local, c.remote});
      } else if (c.state == model::SocketState::kListen) {
        listening_ports.insert(port_of(c.local));
      }
    }
  }
  bool empty() const { return unix_by_inode.empty() && tcp_by_ends.empty(); }
};

// How unix socket `s` of a process on `node` talks to the indexed process: "over
// ipc:///tmp/…" (the bound name of either end), "over unix socket @name", or a pair's inodes;
// "" when its peer is none of the index's.
std::string unix_connection(const std::string& node, const model::Socket& s,
                            const SocketIndex& other) {
  const auto peer = other.unix_by_inode.find(s.peer_inode);
  if (node != other.node || s.peer_inode == 0 || peer == other.unix_by_inode.end()) return "";
  const std::string& name = s.path.empty() ? peer->second->path : s.path;
  if (name.empty()) {
    return "over a unix socket pair (inodes " + std::to_string(s.inode) + " and " +
           std::to_string(s.peer_inode) + ")";
  }
  return name.front() == '@' ? "over unix socket " + name : "over ipc://" + name;
}

// How process `p` on `node` talks to the indexed process: a unix socket whose peer is one of
// the index's, else a TCP connection whose two ends they hold ("over tcp ADDRESS:PORT", the
// listening end's address; loopback only on one node); "" when no socket of `p` is the other
// end of one of the index's.
std::string connection(const std::string& node, const model::ProcessRecord& p,
                       const SocketIndex& other) {
  if (other.empty()) return "";
  if (p.dump) {
    for (const auto& s : p.dump->sockets) {
      if (s.family != model::Socket::Family::kUnix) continue;
      if (auto how = unix_connection(node, s, other); !how.empty()) return how;
    }
  }
  const SocketIndex own(node, p);
  for (const auto& c : own.tcp) {
    if (c.state != model::SocketState::kEstablished ||
        !other.tcp_by_ends.count({c.remote, c.local}))
      continue;
    if (node != other.node && (is_loopback_endpoint(c.local) || is_loopback_endpoint(c.remote)))
      continue;
    // Its own end listens when it holds the listener, or, its listeners unknown, when the
    // other's are known and none is on the other end's port.
    const bool own_listens = own.listening_ports.count(port_of(c.local)) > 0 ||
                             (!own.listeners_known && other.listeners_known &&
                              other.listening_ports.count(port_of(c.remote)) == 0);
    return "over tcp " + (own_listens ? c.local : c.remote);
  }
  return "";
}

// The job whose ranks (most of them) are connected to the process through a socket pair, and
// how; "" when none is.
std::pair<std::string, std::string> job_of_sockets(const std::vector<Job>& jobs,
                                                   const std::string& node,
                                                   const model::ProcessRecord& p) {
  const SocketIndex index(node, p);
  if (index.empty()) return {};
  std::map<std::string, std::pair<int, std::string>> count;  // job → (ranks, one connection)
  for (const auto& j : jobs) {
    if (j.group) continue;
    for (const auto& r : j.ranks) {
      const auto* q = r.latest();
      if (q == nullptr) continue;
      if (auto how = connection(r.node, *q, index); !how.empty()) {
        auto& [n, first] = count[j.key];
        if (n++ == 0) first = std::move(how);
      }
    }
  }
  std::pair<std::string, std::string> best;
  int most = 0;
  for (const auto& [key, found] : count) {
    if (found.first > most) best = {key, found.second}, most = found.first;
  }
  return best;
}

// The job whose ranks map the same broadcast ring as the process (the same ring fact).
std::string job_of_ring(const std::vector<Job>& jobs, const std::string& node,
                        const model::ProcessRecord& p) {
  const auto ring = p.facts.find(model::fact_keys::kShmRing);
  if (model::shm_ring_status(p.facts) != model::ShmRingStatus::kOk) return "";
  for (const auto& j : jobs) {
    if (j.group) continue;
    for (const auto& r : j.ranks) {
      const auto* q = r.latest();
      if (q == nullptr || r.node != node) continue;
      const auto it = q->facts.find(model::fact_keys::kShmRing);
      if (it != q->facts.end() && it->second == ring->second) return j.key;
    }
  }
  return "";
}

std::string only_job(const std::vector<Job>& jobs) {
  std::string key;
  int with_ranks = 0;
  for (const auto& j : jobs) {
    if (j.ranks.empty() || j.group) continue;
    ++with_ranks;
    key = j.key;
  }
  return with_ranks == 1 ? key : "";
}

// The worker rank a busy-loop frame's local names, when a framework table says the local names
// one (waits::AwaitedWorkerLocal); `how` is set to the table's description of it.
std::optional<int> awaited_rank_in_local(const model::Frame& frame, const std::string& name,
                                         const std::string& value, std::string& how) {
  for (const auto* framework : waits::frameworks()) {
    if (!framework->serving) continue;
    for (const auto& local : framework->serving->awaited_worker_locals) {
      if (frame.function != local.function || name != local.local) continue;
      how = std::string(local.described);
      return local.holds == waits::AwaitedWorkerLocal::Holds::kRankInRepr ? rank_in_repr(value)
                                                                          : to_int(value);
    }
  }
  return std::nullopt;
}

}  // namespace

// The workers the engine core waits for directly: the busy loop's locals that name a worker
// (the framework tables' awaited_worker_locals: vLLM's worker handle `w` of get_response,
// collective_rpc's `unique_reply_rank`), the ranks behind on the broadcast ring it writes; else
// every worker.
void awaited_workers(const ServingProcess& engine, const Job& job, ServingChain& chain) {
  const auto* thread = busy_loop_thread(*engine.process);
  if (thread != nullptr && engine.activity == "blocked") {
    for (const auto& f : thread->python_frames) {
      for (const auto& [name, value] : f.locals) {
        std::string how;
        const auto rank = awaited_rank_in_local(f, name, value, how);
        if (rank && job.find(*rank) != nullptr) {
          chain.awaited.insert(*rank);
          chain.awaited_reason = how;
          return;
        }
      }
    }
    if (engine.wait.kind == waits::WaitKind::kRing && engine.wait.primitive == "acquire_write") {
      const auto it = engine.process->facts.find(model::fact_keys::kShmRingLaggingRanks);
      if (it != engine.process->facts.end()) {
        const auto lagging = nlohmann::json::parse(it->second, nullptr, false);
        if (lagging.is_array()) {
          for (const auto& r : lagging) {
            if (r.is_number_integer()) chain.awaited.insert(r.get<int>());
          }
        }
        if (!chain.awaited.empty()) {
          chain.awaited_reason = "the broadcast ring's readers that are behind";
          return;
        }
      }
    }
  }
  chain.awaited = job.present;
  chain.awaited_reason = "every worker of the job (the engine core's locals do not say which)";
}

void walk_wait_for(const Job& job, const RankSet& from,
                   const std::function<bool(int, const RankEntry*)>& visit) {
  RankSet seen;
  std::vector<int> frontier = from.list();
  while (!frontier.empty()) {
    const int r = frontier.back();
    frontier.pop_back();
    if (seen.contains(r)) continue;
    seen.insert(r);
    const auto* e = job.find(r);
    if (!visit(r, e)) continue;
    for (const auto* next : job.entries_in(e->waits_for)) frontier.push_back(*next->rank);
  }
}

// Where the workers' wait-for graph ends, from the ranks in `from`.
RankSet follow_to_roots(const Job& job, const RankSet& from) {
  RankSet roots;
  walk_wait_for(job, from, [&](int r, const RankEntry* e) {
    if (e == nullptr || e->state != RankState::kWaiting || e->waits_for.empty()) {
      roots.insert(r);
      return false;
    }
    roots.insert(e->waits_for - job.present);  // missing ranks end the chain
    return true;
  });
  return roots;
}

const Job* find_job(const std::vector<Job>& jobs, const std::string& key) {
  for (const auto& j : jobs) {
    if (j.key == key && !j.ranks.empty() && !j.group) return &j;
  }
  return nullptr;
}

namespace {

// The job of an engine core's workers, and how it was found: connected to it by a socket, its
// children, ranks that map its broadcast ring, else the only job.
std::pair<std::string, std::string> workers_of_engine(const std::vector<Job>& jobs,
                                                      const ServingProcess& e) {
  auto [job, how] = job_of_sockets(jobs, e.node, *e.process);
  if (!job.empty()) {
    how = "ranks connected to the engine core " + how;
  } else if (!(job = job_of_children(jobs, e.node, e.process->pid)).empty()) {
    how = "the engine core's child processes";
  } else if (!(job = job_of_ring(jobs, e.node, *e.process)).empty()) {
    how = "ranks that map the engine core's broadcast ring in /dev/shm";
  } else if (!(job = only_job(jobs)).empty()) {
    how = "the only job captured (assumed)";
  }
  return {job, how};
}

// The job of the ranks an API server without an engine core awaits (SGLang's schedulers): the
// ranks it talks to or started, else the only job.
std::pair<std::string, std::string> workers_of_api(const std::vector<Job>& jobs,
                                                   const ServingProcess& a) {
  auto [job, how] = job_of_sockets(jobs, a.node, *a.process);
  if (!job.empty()) {
    how = "ranks connected to the API server " + how;
  } else if (!(job = job_of_children(jobs, a.node, a.process->pid)).empty()) {
    how = "the API server's child processes";
  } else if (!(job = only_job(jobs)).empty()) {
    how = "the only job captured (assumed)";
  }
  return {job, how};
}

// The chains whose engine cores an API server serves, and how: those it is connected to
// through a socket pair (vLLM's ZMQ ipc:// or tcp:// sockets to each engine core), which parent
// pids cannot tell apart with several API servers and engine cores; else its children, or
// siblings (API servers and engine cores started by one `vllm serve`).
std::vector<std::pair<ServingChain*, std::string>> engines_of_api(
    std::map<std::string, ServingChain>& by_job, const ServingProcess& a) {
  const SocketIndex api_sockets(a.node, *a.process);
  std::vector<std::pair<ServingChain*, std::string>> linked;  // chain, how
  for (auto& [job, chain] : by_job) {
    std::vector<std::string> over;
    for (const auto& e : chain.engines) {
      if (auto how = connection(e.node, *e.process, api_sockets); !how.empty()) {
        over.push_back("engine core " + who(e.node, *e.process) + " " + how);
      }
    }
    if (!over.empty()) linked.emplace_back(&chain, "connected to " + join(over, ", ", 8));
  }
  if (!linked.empty()) return linked;
  for (auto& [job, chain] : by_job) {
    for (const auto& e : chain.engines) {
      const bool child = e.process->ppid == a.process->pid;
      if (e.node == a.node && (child || e.process->ppid == a.process->ppid)) {
        linked.emplace_back(&chain, std::string(child ? "parent" : "sibling") + " of engine core " +
                                        who(e.node, *e.process) +
                                        " (no socket between them captured)");
        break;
      }
    }
  }
  return linked;
}

}  // namespace

std::map<std::string, ServingChain> link(const std::vector<Job>& jobs,
                                         std::vector<ServingProcess> engines,
                                         const std::vector<ServingProcess>& apis) {
  std::map<std::string, ServingChain> by_job;
  const auto chain_for = [&](const std::string& job, const std::string& how) -> ServingChain& {
    auto& chain = by_job[job];
    chain.job = job;
    if (chain.job_link.empty()) chain.job_link = how;
    return chain;
  };
  for (auto& e : engines) {
    const auto [job, how] = workers_of_engine(jobs, e);
    chain_for(job, how).engines.push_back(std::move(e));
  }
  for (const auto& a : apis) {
    const auto linked = engines_of_api(by_job, a);
    for (const auto& [chain, how] : linked) {
      ServingProcess linked_api = a;
      linked_api.link = how;
      chain->api_servers.push_back(std::move(linked_api));
    }
    if (!linked.empty()) continue;
    if (!by_job.empty()) {
      // Linked to none: it serves every chain (engine cores elsewhere).
      for (auto& [job, chain] : by_job) chain.api_servers.push_back(a);
      continue;
    }
    const auto [job, how] = workers_of_api(jobs, a);
    chain_for(job, how).api_servers.push_back(a);
  }
  return by_job;
}

}  // namespace hangscope::analysis::serving
