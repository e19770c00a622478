// Hangs at init: ranks inside init_process_group or new_group (their rendezvous, the TCPStore
// waiting for workers, the store-based barrier) wait for ranks that never arrived. The absent
// ranks are named, each with the process and node where one exists (still loading, stuck
// before init) or "no process on any answering node".
#include <algorithm>
#include <set>

#include "hangscope/analysis/analysis.h"
#include "hangscope/analysis/rank_set.h"

namespace hangscope::analysis {
namespace {

// The torch.distributed call a thread of the process is inside, "" when none: the ranks that
// arrived at the same rendezvous.
std::string init_call(const capture::ProcessRecord& process) {
  if (!process.dump) return "";
  for (const auto& thread : process.dump->threads) {
    for (const auto& frame : thread.python_frames) {
      if (frame.file.find("torch/distributed/distributed_c10d.py") == std::string::npos) continue;
      if (frame.function == "init_process_group" || frame.function == "new_group") {
        return frame.function;
      }
    }
  }
  return "";
}

std::string place(const WaitPoint& wait) {
  if (wait.caller) return wait.caller->text();
  if (wait.python) return wait.python->text();
  return wait.primitive.empty() ? "an unknown place" : wait.primitive;
}

// multiprocessing's own helpers (its resource tracker, its fork server) are no ranks.
bool multiprocessing_helper(const OtherProcess& other) {
  return other.wait.python &&
         other.wait.python->file.find("/multiprocessing/") != std::string::npos &&
         (other.wait.python->function == "main" ||
          other.wait.python->file.find("forkserver") != std::string::npos);
}

// Processes on the answering nodes that may be an absent rank: not ranks, launchers or
// multiprocessing's helpers, and of this job (its key in their environment) or children of the
// same parent as its ranks.
std::vector<const OtherProcess*> candidates(const Job& job,
                                            const std::vector<OtherProcess>& others) {
  std::set<std::pair<std::string, pid_t>> parents;
  for (const auto& r : job.ranks) {
    if (const auto* p = r.latest()) parents.emplace(r.node, p->ppid);
  }
  std::vector<const OtherProcess*> out;
  for (const auto& other : others) {
    const auto& id = other.process->identity;
    if (id.role == "launcher" || id.role == "helper" || !other.process->dump ||
        multiprocessing_helper(other)) {
      continue;
    }
    const bool same_job = !job.key.empty() && id.job == job.key;
    const bool sibling = parents.count({other.node, other.process->ppid}) > 0;
    if (same_job || sibling) out.push_back(&other);
  }
  return out;
}

// The candidate that is rank `rank`: the only one, or the one whose waiting frames hold a local
// `rank` (or `global_rank`) of that value.
const OtherProcess* absent_process(int rank, std::size_t absent_count,
                                   const std::vector<const OtherProcess*>& pool) {
  for (const auto* other : pool) {
    for (const char* name : {"rank", "global_rank"}) {
      if (other->wait.local(name) == std::to_string(rank)) return other;
    }
  }
  return absent_count == 1 && pool.size() == 1 ? pool.front() : nullptr;
}

}  // namespace

std::optional<Verdict> init_verdict(const Job& job, const std::vector<OtherProcess>& others,
                                    std::map<int, const OtherProcess*>* found) {
  if (!job.world_size) return std::nullopt;
  std::set<int> arrived;
  std::string call;
  for (const auto& r : job.ranks) {
    const auto* p = r.latest();
    if (p == nullptr || !r.rank ||
        (r.state != RankState::kWaiting && r.state != RankState::kRunning)) {
      continue;
    }
    const auto c = init_call(*p);
    if (c.empty()) continue;
    if (call.empty() || c == "init_process_group") call = c;
    arrived.insert(*r.rank);
  }
  if (arrived.empty()) return std::nullopt;
  std::set<int> absent;
  for (int r = 0; r < *job.world_size; ++r) {
    if (!arrived.count(r)) absent.insert(r);
  }
  if (absent.empty()) return std::nullopt;
  // Ranks outside init that run their own collectives have arrived long ago: not this case.
  for (int r : absent) {
    const auto* e = job.find(r);
    if (e && e->latest() && e->latest()->dump && e->latest()->dump->distributed &&
        e->latest()->dump->distributed->initialized()) {
      return std::nullopt;
    }
  }
  Verdict v;
  v.id = "rank-not-arrived";
  v.title = "Ranks wait in " + call + " for ranks that never arrived";
  v.job = job.key;
  v.confidence = 0.9;
  v.membership = "memory";
  v.diverged_ranks.assign(absent.begin(), absent.end());
  v.waiting_ranks.assign(arrived.begin(), arrived.end());
  const auto pool = candidates(job, others);
  std::string whereabouts;
  for (int r : absent) {
    std::string line;
    if (const auto* e = job.find(r); e && e->latest()) {
      line = "rank " + std::to_string(r) + " runs as pid " + std::to_string(e->pid) + " on " +
             e->node + ", " + std::string(to_string(e->state)) + " in " + place(e->wait) +
             ": it has not called " + call;
    } else if (const auto* match = absent_process(r, absent.size(), pool)) {
      const auto& other = *match;
      if (found != nullptr) (*found)[r] = match;
      line = "rank " + std::to_string(r) + " is most likely pid " +
             std::to_string(other.process->pid) + " on " + other.node +
             " (of the job, no rank known yet) in " + place(other.wait) + ": it has not called " +
             call;
    } else {
      line = "rank " + std::to_string(r) + ": no process on any answering node";
    }
    v.evidence.push_back(line);
    whereabouts += (whereabouts.empty() ? "" : "; ") + line;
  }
  if (absent.size() > 1 && !pool.empty()) {
    std::string pids;
    for (const auto* other : pool) {
      pids += (pids.empty() ? "" : ", ") + std::string("pid ") +
              std::to_string(other->process->pid) + " on " + other->node + " in " +
              place(other->wait);
    }
    v.evidence.push_back("processes of the job that hold no rank yet: " + pids);
  }
  v.evidence.push_back(compress_ranks(arrived) + " of world size " +
                       std::to_string(*job.world_size) + " are inside " + call +
                       " (their rank and world size from memory: the init call's arguments or "
                       "their process groups)");
  v.summary = (absent.size() == 1 ? "Rank " : "Ranks ") + compress_ranks(absent) +
              (absent.size() == 1 ? " never arrived" : " never arrived") + " in " + call +
              " while " + (arrived.size() == 1 ? "rank " : "ranks ") + compress_ranks(arrived) +
              (arrived.size() == 1 ? " waits" : " wait") + " there for " +
              (absent.size() == 1 ? "it" : "them") + ": " + whereabouts + ".";
  v.remedies.push_back(
      "look at why the absent rank did not start or is slow before init_process_group (model "
      "or checkpoint loading, a wrong MASTER_ADDR/MASTER_PORT or init_method on its node, a "
      "launcher that never started it)");
  v.remedies.push_back(
      "`hangscope diagnose --query-store` (agents: `collect --query-store`) asks the store which "
      "ranks registered");
  return v;
}

}  // namespace hangscope::analysis
