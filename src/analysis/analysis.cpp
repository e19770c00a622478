#include "hangscope/analysis/analysis.h"

#include <algorithm>
#include <map>
#include <set>

#include "hangscope/analysis/rank_set.h"
#include "hangscope/model/fact_keys.h"

namespace hangscope::analysis {

std::vector<OtherProcess> other_processes(const model::Bundle& bundle) {
  std::vector<OtherProcess> out;
  for (const auto& [name, node] : model::latest_samples(bundle)) {
    for (const auto& p : node->processes) {
      if (p.identity.role == model::ProcessRole::kRank) continue;
      OtherProcess other{name, &p, {}};
      if (p.dump) other.wait = waits::process_wait_point(*p.dump);
      out.push_back(std::move(other));
    }
  }
  return out;
}

namespace {

// A diverged rank missing TCP connections that the rest of its job has is named in evidence.
void add_tcp_evidence(const std::vector<Job>& jobs, Verdict& v) {
  for (const auto& job : jobs) {
    if (job.key != v.job || !job.tcp_meshed) continue;
    for (const auto* r : job.entries_in(v.diverged_ranks)) {
      if (r->missing_tcp_peers.empty()) continue;
      v.evidence.push_back(
          "rank " + std::to_string(*r->rank) + " has no TCP connection to " +
          (r->missing_tcp_peers.size() == 1 ? "rank " : "ranks ") +
          compress_ranks(r->missing_tcp_peers) +
          ", while the job's other ranks are connected to each other (check its network "
          "interface, GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME and firewalls)");
    }
  }
}

// What NCCL's RAS service reported on the job's nodes goes into its verdicts' evidence: one
// signal among several (RAS is known to say OK during some hangs). Decided by the status fact
// alone: a snapshot without it (older agents) gives no RAS evidence.
void add_ras_evidence(const std::vector<Job>& jobs, Verdict& v) {
  using model::RasStatus;
  for (const auto& job : jobs) {
    if (job.key != v.job) continue;
    std::set<std::string> seen;
    for (const auto& r : job.ranks) {
      const auto* p = r.latest();
      if (p == nullptr) continue;
      const auto status = p->facts.find(model::fact_keys::kNcclRasStatus);
      if (status == p->facts.end() ||
          model::ras_status_from_string(status->second) != RasStatus::kProblems) {
        continue;
      }
      if (!seen.insert(r.node).second) continue;
      const auto text = p->facts.find(model::fact_keys::kNcclRas);
      v.evidence.push_back("NCCL RAS (" + r.node +
                           "): " + (text == p->facts.end() ? "problems reported" : text->second));
    }
  }
}

// State read outside the stacks, once per distinct value of a fact among the job's ranks:
// what the c10d store said about the keys ranks wait for (--query-store), and the state of
// vLLM's broadcast rings in /dev/shm.
void add_state_evidence(const std::vector<Job>& jobs, Verdict& v) {
  struct Source {
    const char* fact;
    const char* label;  // before "<ranks>: <value>"
  };
  static const Source sources[] = {
      {model::fact_keys::kStoreQuery,
       "c10d store, asked read-only for the keys these ranks wait for"},
      {model::fact_keys::kShmRing, "vLLM broadcast ring in /dev/shm, mapped by"},
  };
  for (const auto& job : jobs) {
    if (job.key != v.job) continue;
    for (const auto& source : sources) {
      std::map<std::string, std::vector<int>> values;  // the value → the ranks that have it
      for (const auto& r : job.ranks) {
        const auto* p = r.latest();
        if (p == nullptr || !r.rank) continue;
        const auto it = p->facts.find(source.fact);
        if (it != p->facts.end()) values[it->second].push_back(*r.rank);
      }
      for (const auto& [value, ranks] : values) {
        v.evidence.push_back(std::string(source.label) + " " +
                             (ranks.size() == 1 ? "rank " : "ranks ") + compress_ranks(ranks) +
                             ": " + value);
      }
    }
  }
}

}  // namespace

void add_evidence(const std::vector<Job>& jobs, Verdict& v) {
  add_tcp_evidence(jobs, v);
  add_ras_evidence(jobs, v);
  add_state_evidence(jobs, v);
}

// The processes an init hang's verdict took for absent ranks (no rank known yet: a spawn child
// still loading) stand in the rank table in their place, with their node, pid and wait point:
// present from that evidence, no longer missing.
void place_absent_ranks(Job& job, const std::map<int, const OtherProcess*>& found) {
  if (found.empty()) return;
  for (const auto& [rank, other] : found) {
    if (!job.missing.contains(rank)) continue;
    job.missing.erase(rank);
    auto& entry = job.ranks.emplace_back(job.absent_entry(rank));
    entry.node = other->node;
    entry.pid = other->process->pid;
    entry.history = {other->process};
    entry.wait = other->wait;
    entry.state = other->process->state == 'R' ? RankState::kRunning : RankState::kWaiting;
    entry.progress.detail =
        "taken for rank " + std::to_string(rank) + ": a process of the job that holds no rank yet";
  }
  // Back in rank order; each class's representative is still its first member.
  std::stable_sort(job.ranks.begin(), job.ranks.end(), [](const auto& a, const auto& b) {
    return std::make_pair(!a.rank, a.rank.value_or(0)) <
           std::make_pair(!b.rank, b.rank.value_or(0));
  });
  job.index();
  std::map<int, std::size_t> first;  // class id -> index of its first member
  for (std::size_t i = 0; i < job.ranks.size(); ++i) first.try_emplace(job.ranks[i].class_id, i);
  for (auto& c : job.classes) c.representative = first.at(c.id);
}

// Said plainly when no verdict names a rank.
std::string no_divergence(const std::vector<Job>& jobs, int samples) {
  std::size_t captured = 0;
  for (const auto& job : jobs) {
    for (const auto& r : job.ranks) captured += r.history.empty() ? 0 : 1;
  }
  if (captured == 0) return "No rank processes were found on the nodes that answered.";
  std::string out;
  for (const auto& job : jobs) {
    const std::string name = job.key.empty() ? "the ranks without a job" : "job " + job.key;
    std::size_t progressing = 0, ranks = 0, undecided_ranks = 0;
    for (const auto& r : job.ranks) {
      if (r.history.empty()) continue;
      ++ranks;
      if (r.progress.progressing.value_or(false)) ++progressing;
      if (!r.progress.undecided.empty()) ++undecided_ranks;
    }
    if (!out.empty()) out += " ";
    if (ranks > 0 && undecided_ranks == ranks) {
      out += "No verdict on " + name + ": no rank could be told waiting or progressing.";
    } else if (ranks > 0 && progressing + undecided_ranks == ranks) {
      out += "No divergence in " + name + ": " +
             (undecided_ranks == 0 ? "every rank (" + std::to_string(ranks) + ") is"
                                   : "the other ranks (" + std::to_string(progressing) + ") are") +
             " progressing (over " + std::to_string(samples) +
             " samples their stacks moved, probes found them outside their waits, sequence "
             "numbers advanced, or they worked on CPU).";
    } else if (job.classes.size() == 1) {
      out += "No divergence among the ranks of " + name + ": all " + std::to_string(ranks) +
             " wait at the same place (" + job.classes.front().description + ")" +
             (samples > 1 ? "" : " in a single sample") +
             "; if the job is hung, the cause is outside the ranks (a store key, a peer "
             "outside the job, the network).";
    } else {
      out += "No rank of " + name +
             " is waited on by the others: the ranks are at different places, none blocked on "
             "another.";
    }
    std::map<std::string, std::vector<int>> undecided;  // reason → their ranks
    for (const auto& r : job.ranks) {
      if (r.rank && !r.progress.undecided.empty())
        undecided[r.progress.undecided].push_back(*r.rank);
    }
    for (const auto& [why, held] : undecided) {
      out += std::string(held.size() == 1 ? " Rank " : " Ranks ") + compress_ranks(held) +
             (held.size() == 1 ? " is" : " are") + " undecided: " + why + "; no verdict rests on " +
             (held.size() == 1 ? "it." : "them.");
    }
  }
  return out;
}

std::string_view to_string(VerdictKind kind) {
  switch (kind) {
    case VerdictKind::kGeneric:
      return "generic";
    case VerdictKind::kSignature:
      return "signature";
  }
  return "generic";
}

void measure_samples(const model::Bundle& bundle, Analysis& analysis) {
  std::map<std::string, std::vector<std::int64_t>> times;
  for (const auto& s : bundle.snapshots) times[s.node_name].push_back(s.capture_unix_ns);
  for (auto& [node, t] : times) {
    analysis.samples = std::max(analysis.samples, static_cast<int>(t.size()));
    if (t.size() > 1) {
      std::sort(t.begin(), t.end());
      analysis.interval_seconds =
          static_cast<double>(t.back() - t.front()) / 1e9 / static_cast<double>(t.size() - 1);
    }
  }
}

}  // namespace hangscope::analysis
