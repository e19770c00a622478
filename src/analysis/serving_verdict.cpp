// The serving chain, part 3, verdict: the chain's lines for people (front first), the note a
// conclusion ends with, and the front-end verdict `serving-stalled`: requests stuck behind a
// worker rank, or pending while the engine core idles.
#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/numbers.h"
#include "hangscope/common/text.h"
#include "hangscope/model/fact_keys.h"
#include "hangscope/model/frame_pattern.h"
#include "hangscope/waits/frameworks.h"
#include "serving_parts.h"

namespace hangscope::analysis {
namespace serving {
namespace {

std::string label(const ServingProcess& s) {
  const std::string name = s.role == model::ProcessRole::kApi      ? "API server"
                           : s.role == model::ProcessRole::kEngine ? "engine core"
                                                                   : "DP coordinator";
  return name + " (" + who(s.node, *s.process) + (s.title.empty() ? "" : ", " + s.title) + ")";
}

// What an API server's request tasks and output handlers wait on (the framework table's
// serving front: vLLM's engine core, SGLang's schedulers and detokenizer).
std::string api_link(const ServingProcess& a, const ServingChain& chain) {
  const auto& front = chain_serving_front(chain);
  std::string out = label(a) + ": ";
  if (a.tasks == 0) {
    return out + "its asyncio tasks were not read (no request count); its event loop waits in " +
           (a.process->dump ? waits::process_wait_point(*a.process->dump).describe() : "?") +
           (a.link.empty() ? "" : "; " + a.link);
  }
  out += std::to_string(a.tasks) + " asyncio tasks, " + std::to_string(a.pending_requests) +
         " request task" + (a.pending_requests == 1 ? "" : "s") + " awaiting " +
         std::string(front.requests_await);
  if (a.pending_requests > 0) {
    out += " (" + std::to_string(a.stuck_requests) + " pending in every sample) in " +
           a.requests_wait_in;
  }
  out += "; " + std::to_string(a.output_handlers) + " output handler task" +
         (a.output_handlers == 1 ? "" : "s") + " pulling " +
         std::string(front.output_handlers_pull);
  if (!a.link.empty()) out += "; " + a.link;
  return out;
}

std::string engine_link(const ServingProcess& e, const ServingChain& chain) {
  std::string out = label(e) + ": " + e.activity;
  if (e.activity == "blocked") {
    out += ", a step in flight: waits in " + e.waits_in;
    if (!chain.awaited.empty()) {
      out += " for worker " + ranks_text(chain.awaited) + " (" + chain.awaited_reason + ")";
    }
  } else if (e.activity == "idle") {
    out += ": waits for input in " + e.waits_in;
  } else {
    out += ": " + e.waits_in;
  }
  if (!e.progress.empty()) out += "; " + e.progress;
  return out;
}

std::string root_what(const RankEntry& r) {
  switch (r.state) {
    case RankState::kRunning:
      return "is still working in " + r.wait.describe() + " (" + r.progress.detail + ")";
    case RankState::kWaiting:
      return "is stuck in " + r.wait.describe() +
             (r.progress.detail.empty() ? "" : " (" + r.progress.detail + ")");
    case RankState::kStopped:
      return "is stopped (state T: SIGSTOP, a debugger or job control)";
    case RankState::kUninterruptible:
      return "is in uninterruptible sleep (state D) in " + r.wait.describe();
    case RankState::kDead:
      return "is dead (exited or a zombie)";
    case RankState::kMissing:
      return "is missing: no node that answered runs it";
    case RankState::kUnknown:
      break;
  }
  return "is in an unknown state (not captured)";
}

// What the chain's ranks are called (the framework table's serving front): SGLang's are its
// schedulers, one per TP rank; vLLM's are the engine core's workers.
std::string rank_noun(const ServingChain& chain) {
  return std::string(chain_serving_front(chain).rank_noun);
}

std::string capitalized(std::string text) {
  if (!text.empty()) text[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[0])));
  return text;
}

// The workers' part of the chain: each rank on the way from the awaited workers to the roots,
// grouped by what it waits for and where.
void worker_links(const Job& job, ServingChain& chain) {
  std::map<std::pair<std::string, RankSet>, std::set<int>> edges;
  walk_wait_for(job, chain.awaited, [&](int r, const RankEntry* e) {
    if (e == nullptr || chain.roots.contains(r)) return false;
    edges[{e->wait.describe(), e->waits_for}].insert(r);
    return true;
  });
  for (const auto& [edge, ranks] : edges) {
    chain.links.push_back(rank_noun(chain) + " " + ranks_text(RankSet(ranks)) + " (job " + job.key +
                          ") " + (ranks.size() == 1 ? "waits" : "wait") + " for " +
                          ranks_text(edge.second) + " in " + edge.first);
  }
  for (const auto* e : job.entries_in(chain.roots)) {
    chain.links.push_back(rank_noun(chain) + " rank " + std::to_string(*e->rank) + " (" + e->node +
                          " pid " + std::to_string(e->pid) +
                          "): " + std::string(to_string(e->state)) + ", " + root_what(*e) +
                          " — where the chain ends");
  }
  if (const auto absent = chain.roots - job.present; !absent.empty()) {
    chain.links.push_back(rank_noun(chain) + " " + ranks_text(absent) + ": " +
                          std::string(to_string(job.missing_state)) + " — where the chain ends");
  }
}

}  // namespace

void describe(const std::vector<Job>& jobs, ServingChain& chain) {
  for (const auto& a : chain.api_servers) chain.links.push_back(api_link(a, chain));
  for (const auto& c : chain.coordinators) {
    chain.links.push_back(label(c) + ": waits in " + c.wait.describe());
  }
  for (const auto& e : chain.engines) chain.links.push_back(engine_link(e, chain));
  if (const auto* job = find_job(jobs, chain.job); job != nullptr && !chain.job.empty()) {
    if (chain.engines.empty()) {
      chain.links.push_back("the API server awaits the ranks of job " + job->key + " (" +
                            chain.job_link + ")");
    }
    worker_links(*job, chain);
  }
}

}  // namespace serving

using serving::find_job;
using serving::who;

std::optional<std::string> serving_role(const Analysis& analysis,
                                        const model::ProcessRecord& process) {
  for (const auto& chain : analysis.serving) {
    for (const auto* list : {&chain.api_servers, &chain.engines, &chain.coordinators}) {
      for (const auto& s : *list) {
        if (s.process == &process) return std::string(model::to_string(s.role));
      }
    }
  }
  return std::nullopt;
}

std::string serving_note(const std::vector<ServingChain>& chains) {
  std::string out;
  for (const auto& chain : chains) {
    std::vector<std::string> parts;
    for (const auto& a : chain.api_servers) {
      if (a.tasks == 0) continue;
      parts.push_back("the API server (" + who(a.node, *a.process) + ") has " +
                      (a.pending_requests == 0 ? std::string("no request")
                                               : std::to_string(a.pending_requests) + " request" +
                                                     (a.pending_requests == 1 ? "" : "s")) +
                      " in flight");
    }
    for (const auto& e : chain.engines) {
      std::string text = "the engine core (" + who(e.node, *e.process) + ") is " + e.activity;
      if (e.progressing.value_or(false)) text += " and progresses (" + e.progress + ")";
      parts.push_back(text);
    }
    if (parts.empty()) continue;
    out += " Serving chain: ";
    for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "; " : "") + parts[i];
    out += ".";
  }
  return out;
}

bool ServingChain::tasks_read() const {
  return std::any_of(api_servers.begin(), api_servers.end(),
                     [](const ServingProcess& a) { return a.tasks > 0; });
}

namespace {

using serving::capitalized;
using serving::rank_noun;
using serving::root_what;

bool stuck(const RankEntry& r) {
  switch (r.state) {
    case RankState::kStopped:
    case RankState::kDead:
    case RankState::kMissing:
    case RankState::kUninterruptible:
      return true;
    default:
      return r.progress.progressing.has_value() && !*r.progress.progressing;
  }
}

// The front of the summary: what the API servers' requests do.
std::string front_text(const ServingChain& chain, const std::string& awaited) {
  std::size_t stuck_requests = 0;
  for (const auto& a : chain.api_servers) stuck_requests += a.stuck_requests;
  if (stuck_requests == 0) return "";
  const auto& a = chain.api_servers.front();
  return (chain.api_servers.size() == 1 ? "the API server (" + who(a.node, *a.process) + ") has "
                                        : std::string("the API servers have ")) +
         std::to_string(stuck_requests) + " request task" + (stuck_requests == 1 ? "" : "s") +
         " awaiting " + awaited;
}

// The best verdict so far about the job's ranks among `roots`.
const Verdict* root_verdict(const std::vector<Verdict>& found, const std::string& job,
                            const RankSet& roots) {
  const Verdict* best = nullptr;
  for (const auto& v : found) {
    if (v.job != job || v.kind != VerdictKind::kGeneric || !v.diverged_ranks.intersects(roots)) {
      continue;
    }
    if (best == nullptr || v.confidence > best->confidence) best = &v;
  }
  return best;
}

std::string engine_wait_text(const ServingProcess& e) {
  if (e.wait.kind == waits::WaitKind::kRing && e.wait.python) {
    return "the shm broadcast ring (" + e.wait.python->text() + ")";
  }
  return e.waits_in;
}

Verdict base_verdict(const ServingChain& chain) {
  Verdict v;
  v.id = verdict_ids::kServingStalled;
  v.job = chain.job;
  v.evidence.push_back("serving chain (" + chain.framework + "), front first:");
  for (const auto& l : chain.links) v.evidence.push_back("  " + l);
  return v;
}

// Requests stuck behind a worker rank: the engine core (or, without one, the API server) waits
// on the workers, and their graph ends at a rank that does not move.
std::optional<Verdict> worker_verdict(const ServingChain& chain, const Job& job,
                                      const std::vector<Verdict>& found) {
  const ServingProcess* engine = nullptr;
  for (const auto& e : chain.engines) {
    if (e.activity == "blocked" && !e.progressing.value_or(false)) engine = &e;
  }
  std::size_t stuck_requests = 0;
  for (const auto& a : chain.api_servers) stuck_requests += a.stuck_requests;
  // The front-end symptom: requests pending (when tasks were read), or a step in flight in a
  // blocked engine core (an engine steps only with requests scheduled).
  if (chain.tasks_read() && stuck_requests == 0) return std::nullopt;
  if (engine == nullptr && (chain.engines.size() > 0 || stuck_requests == 0)) return std::nullopt;
  const Verdict* generic = root_verdict(found, job.key, chain.roots);
  RankSet roots;
  for (const auto* r : job.entries_in(chain.roots)) {
    if (stuck(*r) || (generic && generic->diverged_ranks.contains(*r->rank)))
      roots.insert(*r->rank);
  }
  roots.insert(chain.roots - job.present);
  if (roots.empty()) return std::nullopt;  // the workers move: a slow server, not a stuck one
  Verdict v = base_verdict(chain);
  v.title = "Requests are stuck behind a " + rank_noun(chain) + " rank of the serving deployment";
  v.confidence = generic ? generic->confidence : 0.75;
  v.diverged_ranks = roots;
  v.waiting_ranks = (generic ? generic->waiting_ranks : RankSet()) | (chain.awaited - roots);
  const auto roots_entries = job.entries_in(roots);
  std::string head;
  if (roots.size() == 1 && !roots_entries.empty()) {
    const auto& r = *roots_entries.front();
    head = capitalized(rank_noun(chain)) + " rank " + std::to_string(*r.rank) + " (" + r.node +
           " pid " + std::to_string(r.pid) + ") " + root_what(r);
  } else {
    head = capitalized(rank_noun(chain)) + " " + ranks_text(roots) + " " +
           (roots_entries.empty() ? std::string("are ") + std::string(to_string(job.missing_state))
                                  : "are stuck in " + roots_entries.front()->wait.describe());
  }
  std::string rest;
  if (engine != nullptr) {
    const std::string front = front_text(chain, "the engine core's output");
    rest = (front.empty() ? "" : front + ", and ") + "the engine core (" +
           who(engine->node, *engine->process) + ") waits in " + engine_wait_text(*engine) +
           " for " +
           (chain.awaited == job.present ? "its workers (job " + job.key + ")"
                                         : "worker " + ranks_text(chain.awaited));
  } else {
    rest = front_text(chain, "the ranks of job " + job.key);
  }
  // The rank the engine waits for, when it is not the root: what it waits in.
  const RankSet between = chain.awaited - roots;
  if (engine != nullptr && chain.awaited != job.present && !between.empty()) {
    const auto* w = job.find(between.front());
    if (w != nullptr && !w->waits_for.empty()) {
      rest += ", which " + std::string(between.size() == 1 ? "waits" : "wait") + " for " +
              ranks_text(w->waits_for) + " in " + w->wait.describe();
    }
  } else if (engine == nullptr && generic != nullptr && !generic->waiting_ranks.empty()) {
    const auto waiting = job.entries_in(generic->waiting_ranks);
    if (!waiting.empty()) {
      rest += ", and " + ranks_text(generic->waiting_ranks) +
              (generic->waiting_ranks.size() == 1 ? " waits" : " wait") + " for it in " +
              waiting.front()->wait.describe();
    }
  }
  v.summary = head + ": " + rest + ".";
  if (generic != nullptr) {
    v.evidence.push_back("the workers' verdict `" + generic->id + "`: " + generic->summary);
  }
  v.remedies.push_back(std::string(chain.engines.empty() ? "the API server only waits"
                                                         : "the API server and the engine core "
                                                           "only wait") +
                       ": look at " + rank_noun(chain) + " " + ranks_text(roots) +
                       " (its stack below); restarting the API server alone does not free the "
                       "requests");
  if (generic != nullptr) v.membership = generic->membership;
  return v;
}

// Requests pending while the engine core idles, waiting for input: they never reached it, or
// its outputs never came back.
std::optional<Verdict> idle_verdict(const ServingChain& chain) {
  std::size_t stuck_requests = 0;
  for (const auto& a : chain.api_servers) stuck_requests += a.stuck_requests;
  if (stuck_requests == 0 || chain.engines.empty()) return std::nullopt;
  for (const auto& e : chain.engines) {
    if (e.activity != "idle" || e.progressing.value_or(false)) return std::nullopt;
  }
  const auto& e = chain.engines.front();
  Verdict v = base_verdict(chain);
  v.title = "Requests are pending at the API server while the engine core is idle";
  v.confidence = 0.6;
  std::string front = front_text(chain, "the engine core's output");
  front[0] = 'T';  // "The API server's …"
  v.summary = front + ", but the engine core (" + who(e.node, *e.process) +
              ") is idle, waiting for input in " + e.waits_in +
              ": the requests never reached it, or its outputs never came back.";
  v.remedies.push_back(
      "check the sockets between the API server and the engine core (ZMQ ipc:// or tcp:// "
      "endpoints, VLLM_ENGINE_READY_TIMEOUT_S, the engine core's log) and the API server's "
      "output handler task");
  return v;
}

}  // namespace

std::vector<Verdict> serving_verdicts(const std::vector<ServingChain>& chains,
                                      const std::vector<Job>& jobs,
                                      const std::vector<Verdict>& found) {
  std::vector<Verdict> out;
  for (const auto& chain : chains) {
    const Job* job = find_job(jobs, chain.job);
    if (job != nullptr && !chain.job.empty()) {
      if (auto v = worker_verdict(chain, *job, found)) {
        out.push_back(std::move(*v));
        continue;
      }
    }
    if (auto v = idle_verdict(chain)) out.push_back(std::move(*v));
  }
  return out;
}

}  // namespace hangscope::analysis
