// The processes a verdict names (node, pid, role, job, group and the rank in each), and the
// merge of the verdicts on groups outside the registry with those on torch jobs.
#include <algorithm>
#include <set>
#include <tuple>

#include "hangscope/analysis/analysis.h"

namespace hangscope::analysis {
namespace {

constexpr std::size_t kProcessesPerSide = 16;

VerdictProcess process_of(const Analysis& analysis, const Job& job, const RankEntry& e,
                          const std::string& side) {
  VerdictProcess out;
  out.node = e.node;
  out.pid = e.pid;
  out.side = side;
  const auto* p = e.latest();
  const auto serving = p != nullptr ? serving_role(analysis, *p) : std::nullopt;
  out.role = serving ? *serving : std::string(model::to_string(e.role));
  if (job.group) {
    out.job = e.world_job;
    out.rank = e.world_rank;
    out.group = job.key;
    out.group_rank = e.rank;
  } else {
    out.job = job.key;
    out.rank = e.rank;
    out.group = e.group;
    if (const auto* g = awaited_group(e)) out.group_rank = g->group_rank;
  }
  return out;
}

// A diverged worker that waits on its engine core's broadcast ring waits for that engine: the
// engine (its parent, no rank) is named diverged too, in the summary as well.
void add_idle_engines(const Analysis& analysis, const Job& job, Verdict& v) {
  std::vector<VerdictProcess> engines;
  for (const auto& p : v.processes) {
    if (p.side != "diverged" || !p.rank || job.group) continue;
    const auto* e = job.find(*p.rank);
    const auto* record = e != nullptr ? e->latest() : nullptr;
    if (record == nullptr || e->wait.kind != waits::WaitKind::kRing) continue;
    for (const auto& o : analysis.others) {
      if (o.node != e->node || o.process == nullptr || o.process->pid != record->ppid) continue;
      const auto role = serving_role(analysis, *o.process);
      if (role != "engine") continue;
      VerdictProcess engine;
      engine.node = o.node;
      engine.pid = o.process->pid;
      engine.role = *role;
      engine.side = "diverged";
      engines.push_back(engine);
      const std::string& title = o.process->identity.title;
      v.summary +=
          " Its engine core " + (title.empty() ? std::string() : title + " ") + "(" + o.node +
          " pid " + std::to_string(o.process->pid) + ") " +
          (o.wait.describe().empty() ? "sends it nothing" : "waits in " + o.wait.describe()) + ".";
    }
  }
  v.processes.insert(v.processes.end(), engines.begin(), engines.end());
}

}  // namespace

void name_processes(const Analysis& analysis, Verdict& v) {
  v.processes.clear();
  v.jobs.clear();
  // Keys of groups' jobs (node:port/…) and torch jobs (MASTER_ADDR:MASTER_PORT) differ; were
  // one shared, the group's job is taken.
  const Job* job = nullptr;
  for (const auto& j : analysis.jobs) {
    if (j.key == v.job) {
      job = &j;
      if (j.group) break;
    }
  }
  if (job == nullptr) return;
  for (const auto& [ranks, side] :
       {std::pair{&v.diverged_ranks, "diverged"}, std::pair{&v.waiting_ranks, "waiting"}}) {
    std::size_t named = 0;
    for (const auto* e : job->entries_in(*ranks)) {
      if (e->history.empty()) continue;  // a missing rank: no process to name
      if (named++ == kProcessesPerSide) break;
      v.processes.push_back(process_of(analysis, *job, *e, side));
    }
  }
  // A diverged rank of a torch job is named in the group its waiters wait in (the most specific
  // one, not the default group, when they wait in several), with its own rank there.
  if (!job->group) {
    std::set<std::string> awaited;
    for (const auto& p : v.processes) {
      if (p.side == "waiting" && !p.group.empty()) awaited.insert(p.group);
    }
    for (auto& p : v.processes) {
      if (p.side != "diverged" || !p.group.empty()) continue;
      const auto* e = job->find(p.rank.value_or(-1));
      const auto* record = e != nullptr ? e->latest() : nullptr;
      if (record == nullptr || !record->dump || !record->dump->distributed) continue;
      const auto& state = *record->dump->distributed;
      for (const auto& name : awaited) {
        const auto* g = state.find(name);
        if (g == nullptr) continue;
        const bool better = p.group.empty() || !g->is_default;
        if (better) {
          p.group = name;
          p.group_rank = g->group_rank;
        }
      }
    }
  }
  add_idle_engines(analysis, *job, v);
  std::set<std::string> jobs;
  for (const auto& p : v.processes) {
    if (!p.job.empty()) jobs.insert(p.job);
  }
  if (jobs.size() > 1) v.jobs.assign(jobs.begin(), jobs.end());
}

void merge_group_verdicts(const std::vector<Job>& jobs, std::vector<Verdict>& verdicts) {
  const auto is_group = [&](const Verdict& v) {
    return std::any_of(jobs.begin(), jobs.end(),
                       [&](const Job& j) { return j.group && j.key == v.job; });
  };
  const auto diverged = [](const Verdict& v) {
    std::set<std::pair<std::string, pid_t>> out;
    for (const auto& p : v.processes) {
      if (p.side == "diverged") out.emplace(p.node, p.pid);
    }
    return out;
  };
  std::vector<bool> drop(verdicts.size(), false);
  for (std::size_t i = 0; i < verdicts.size(); ++i) {
    auto& g = verdicts[i];
    if (!is_group(g)) continue;
    const auto mine = diverged(g);
    std::set<std::string> own_jobs;
    bool outside = false;  // a member with no torch job (an engine core)
    for (const auto& p : g.processes) {
      if (p.job.empty()) outside = true;
      own_jobs.insert(p.job);
    }
    for (std::size_t k = 0; k < verdicts.size(); ++k) {
      const auto& w = verdicts[k];
      if (k == i || is_group(w) || mine.empty()) continue;
      const auto theirs = diverged(w);
      if (!std::includes(theirs.begin(), theirs.end(), mine.begin(), mine.end())) continue;
      if (!outside && own_jobs.size() == 1 && *own_jobs.begin() == w.job) {
        drop[i] = true;  // the torch job's verdict says it all
        break;
      }
      // It links jobs: it leads the verdict on the same process within one job.
      g.confidence = std::max(g.confidence, std::min(1.0, w.confidence + 0.01));
      g.evidence.push_back("within its own job: " + w.summary);
    }
  }
  std::vector<Verdict> kept;
  for (std::size_t i = 0; i < verdicts.size(); ++i) {
    if (!drop[i]) kept.push_back(std::move(verdicts[i]));
  }
  verdicts = std::move(kept);
}

}  // namespace hangscope::analysis
