// Hangs at init: ranks inside init_process_group or new_group (their rendezvous, the TCPStore
// waiting for workers, the store-based barrier) wait for ranks that never arrived. The absent
// ranks are named, each with the process and node where one exists (still loading, stuck
// before init) or "no process on any answering node".
#include <algorithm>
#include <map>
#include <set>

#include "hangscope/analysis/analysis.h"
#include "hangscope/analysis/rank_set.h"
#include "hangscope/analysis/verdict_ids.h"
#include "hangscope/common/numbers.h"
#include "hangscope/waits/frameworks.h"

namespace hangscope::analysis {
namespace {

// The torch.distributed call a thread of the process is inside, "" when none: the ranks that
// arrived at the same rendezvous.
std::string init_call(const model::ProcessRecord& process) {
  if (!process.dump) return "";
  for (const auto& thread : process.dump->threads) {
    if (const auto* f = waits::find_meaning(thread.python_frames, waits::FrameMeaning::kInitCall)) {
      return f->function;
    }
  }
  return "";
}

std::string place(const waits::WaitPoint& wait) {
  if (wait.caller) return wait.caller->text();
  if (wait.python) return wait.python->text();
  return wait.primitive.empty() ? "an unknown place" : wait.primitive;
}

// multiprocessing's own helpers (its resource tracker, its fork server) are no ranks.
bool multiprocessing_helper(const OtherProcess& other) {
  if (!other.wait.python) return false;
  model::Frame frame;
  frame.kind = model::Frame::Kind::kPython;
  frame.function = other.wait.python->function;
  frame.file = other.wait.python->file;
  return waits::means(frame, waits::FrameMeaning::kMultiprocessingHelper);
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
    if (id.role == model::ProcessRole::kLauncher || id.role == model::ProcessRole::kHelper ||
        id.role == model::ProcessRole::kEngine || id.role == model::ProcessRole::kApi ||
        id.role == model::ProcessRole::kCoordinator || !other.process->dump ||
        multiprocessing_helper(other)) {
      continue;
    }
    const bool same_job = !job.key.empty() && id.job == job.key;
    const bool sibling = parents.count({other.node, other.process->ppid}) > 0;
    if (same_job || sibling) out.push_back(&other);
  }
  return out;
}

// The candidates that are absent ranks without an entry (`unplaced`): the one whose waiting
// frames hold a local `rank` (or `global_rank`) of that value (the first in the pool), or the
// only candidate when one rank is absent. At the cost of the pool, whatever the ranges hold.
std::map<int, const OtherProcess*> absent_processes(const RankSet& unplaced, std::uint64_t absent,
                                                    const std::vector<const OtherProcess*>& pool) {
  std::map<int, const OtherProcess*> out;
  for (const auto* other : pool) {
    for (const char* name : {"rank", "global_rank"}) {
      const auto text = other->wait.local(name);
      const auto rank = text ? to_int(*text) : std::nullopt;
      if (rank && std::to_string(*rank) == *text && unplaced.contains(*rank)) {
        out.try_emplace(*rank, other);
      }
    }
  }
  if (absent == 1 && unplaced.size() == 1 && pool.size() == 1 && out.empty()) {
    out.emplace(unplaced.front(), pool.front());
  }
  return out;
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
  // Ranges: the world may claim 2^31 - 1 ranks.
  const RankSet absent = RankSet::range(0, *job.world_size - 1) - RankSet(arrived);
  if (absent.empty()) return std::nullopt;
  // The absent ranks that run (an entry each), and those that do not.
  const auto running = job.entries_in(absent);
  // Ranks outside init that run their own collectives have arrived long ago: not this case.
  for (const auto* e : running) {
    if (e->latest() && e->latest()->dump && e->latest()->dump->distributed &&
        e->latest()->dump->distributed->initialized()) {
      return std::nullopt;
    }
  }
  Verdict v;
  v.id = verdict_ids::kRankNotArrived;
  v.title = "Ranks wait in " + call + " for ranks that never arrived";
  v.job = job.key;
  v.confidence = 0.9;
  v.membership = "memory";
  v.diverged_ranks = absent;
  v.waiting_ranks = RankSet(arrived);
  const auto pool = candidates(job, others);
  // Where each absent rank is, in rank order: its process, the process taken for it, or none
  // (one line per range of those).
  std::map<int, std::string> lines;
  std::vector<int> placed;
  for (const auto* e : running) {
    if (!e->latest()) continue;
    placed.push_back(*e->rank);
    lines[*e->rank] = "rank " + std::to_string(*e->rank) + " runs as pid " +
                      std::to_string(e->pid) + " on " + e->node + ", " +
                      std::string(to_string(e->state)) + " in " + place(e->wait) +
                      ": it has not called " + call;
  }
  const RankSet running_ranks(placed);
  placed.clear();
  for (const auto& [r, match] : absent_processes(absent - running_ranks, absent.size(), pool)) {
    const auto& other = *match;
    if (found != nullptr) (*found)[r] = match;
    placed.push_back(r);
    lines[r] = "rank " + std::to_string(r) + " is most likely pid " +
               std::to_string(other.process->pid) + " on " + other.node +
               " (of the job, no rank known yet) in " + place(other.wait) + ": it has not called " +
               call;
  }
  const RankSet unplaced = absent - running_ranks - RankSet(placed);
  for (const auto& i : unplaced.intervals()) {
    lines[i.first] =
        ranks_text(RankSet::range(i.first, i.last)) + ": no process on any answering node";
  }
  std::string whereabouts;
  for (const auto& [r, line] : lines) {
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
