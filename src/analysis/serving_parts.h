// The parts of the serving chain (docs/analysis.md, "The serving chain"), private to analysis:
// classify (serving_classify.cpp: what each process is and does), link (serving_link.cpp: which
// processes talk to which, the workers an engine waits for), and verdict
// (serving_verdict.cpp: what the chain says, the front-end verdict). serving_chain.cpp runs
// them in that order.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/waits/frameworks.h"

namespace hangscope::analysis::serving {

// "node0 pid 900".
std::string who(const std::string& node, const model::ProcessRecord& p);

// classify: the API servers, engine cores and DP coordinators among the processes that are no
// rank, with what each does (requests, busy loop, progress).
struct Classified {
  std::vector<ServingProcess> apis, engines, coordinators;
};
Classified classify(const model::Bundle& bundle, const std::vector<OtherProcess>& others);
// The framework of a chain with these API servers: the first framework table whose serving
// front's command word an API server's command line holds, else the default (vLLM).
std::string serving_framework(const std::vector<ServingProcess>& apis);
// The serving front of the chain's framework (the default's when no table is named so).
const waits::ServingFront& chain_serving_front(const ServingChain& chain);
// The thread of the engine core's busy loop, nullptr when none.
const model::ThreadDump* busy_loop_thread(const model::ProcessRecord& p);

// link: the chains by the workers' job: each engine core to its workers (sockets, children,
// broadcast ring, the only job), each API server to its engine cores (sockets, parent or
// sibling, every one) or, without one, to the ranks it talks to.
std::map<std::string, ServingChain> link(const std::vector<Job>& jobs,
                                         std::vector<ServingProcess> engines,
                                         const std::vector<ServingProcess>& apis);
const Job* find_job(const std::vector<Job>& jobs, const std::string& key);
// The workers the engine core waits for directly, and where the wait-for graph from them ends.
void awaited_workers(const ServingProcess& engine, const Job& job, ServingChain& chain);
RankSet follow_to_roots(const Job& job, const RankSet& from);

// Visits every rank reachable from `from` along the wait-for edges, each once; `visit` (the rank
// and its entry, nullptr when not captured) says whether to follow that rank's edges.
void walk_wait_for(const Job& job, const RankSet& from,
                   const std::function<bool(int, const RankEntry*)>& visit);

// verdict: the chain's lines for people, front first.
void describe(const std::vector<Job>& jobs, ServingChain& chain);

}  // namespace hangscope::analysis::serving
