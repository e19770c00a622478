// Post-mortem correlation of flight-recorder dumps: per process group, what the group as a whole
// shows (the median of the collectives issued, the majority entry at each sequence number)
// decides, and each rank that deviates from it is named, rank 0 like any other.
#include <algorithm>
#include <map>
#include <set>

#include "flight_groups.h"
#include "hangscope/analysis/postmortem.h"
#include "hangscope/analysis/verdict_ids.h"
#include "p2p_matching.h"

namespace hangscope::analysis {
namespace {

using model::FlightEntry;
using model::FlightGroup;
using model::FlightRecord;

// The job's dumps: those the correlation uses, and why the others are not used.
struct JobDumps {
  std::map<int, const FlightRecord*> usable;
  std::map<int, std::string> unusable;
};

JobDumps dumps_of(const Job& job) {
  JobDumps out;
  for (const auto& r : job.ranks) {
    const auto* p = r.latest();
    if (p == nullptr || !p->flight_record || !r.rank) continue;
    const FlightRecord& fr = *p->flight_record;
    if (out.usable.count(*r.rank) || out.unusable.count(*r.rank)) continue;
    if (!fr.error.empty()) {
      out.unusable[*r.rank] = "its dump " + fr.path + " is unreadable: " + fr.error;
    } else if (!fr.fresh) {
      out.unusable[*r.rank] = "its dump " + fr.path + " is stale: written more than " +
                              std::to_string(model::kStaleBeforeMedian.count()) +
                              " minutes before most of the others (an earlier run's?)";
    } else {
      out.usable[*r.rank] = &fr;
    }
  }
  return out;
}

// One process group across the ranks: its members (by pg_config) and the ranks' views of it.
struct GroupView {
  const FlightGroup* config = nullptr;
  std::set<int> members;
  std::vector<RankInGroup> ranks;  // ranks with a usable dump that holds the group, by rank
};

std::map<std::string, GroupView> group_views(const JobDumps& dumps) {
  std::map<std::string, GroupView> out;
  for (const auto& [rank, fr] : dumps.usable) {
    for (const auto& [id, g] : fr->groups) {
      auto& view = out[id];
      if (view.config == nullptr || (view.config->desc.empty() && !g.desc.empty())) {
        view.config = &g;
      }
      view.members.insert(g.ranks.begin(), g.ranks.end());
      view.members.insert(rank);
      view.ranks.push_back(rank_in_group(rank, *fr, g));
    }
  }
  return out;
}

// The upper median of the collectives issued: with two equal halves, the ranks further on
// wait for the others.
std::int64_t consensus_issued(const std::vector<RankInGroup>& ranks) {
  std::vector<std::int64_t> issued;
  for (const auto& rg : ranks) issued.push_back(rg.enqueued);
  std::sort(issued.begin(), issued.end());
  return issued[issued.size() / 2];
}

std::string rank_word(std::size_t n) {
  return n == 1 ? "Rank " : "Ranks ";
}

std::string describe_at(const RankInGroup& rg, std::int64_t seq) {
  const auto it = rg.by_seq.find(seq);
  return it == rg.by_seq.end() ? "#" + std::to_string(seq) : it->second->describe();
}

void add_rank_evidence(Verdict& v, const GroupView& view) {
  for (const auto& rg : view.ranks) {
    v.evidence.push_back("flight recorder, rank " + std::to_string(rg.rank) + ": " +
                         group_line(rg));
  }
}

// Ranks whose last collective issued is below the group's consensus.
std::optional<Verdict> behind(const Job& job, const GroupView& view, std::int64_t consensus) {
  std::vector<int> late, waiting;
  const RankInGroup* front = nullptr;
  for (const auto& rg : view.ranks) {
    if (rg.enqueued < consensus) {
      late.push_back(rg.rank);
    } else {
      waiting.push_back(rg.rank);
      if (front == nullptr && rg.enqueued == consensus) front = &rg;
    }
  }
  if (late.empty() || front == nullptr) return std::nullopt;
  auto v = flight_verdict(job, verdict_ids::kCollectiveBehind,
                          "Some ranks have not issued the collective the rest of their group "
                          "reached",
                          0.9);
  v.diverged_ranks = RankSet(late);
  v.waiting_ranks = RankSet(waiting);
  v.summary = rank_word(late.size()) + compress_ranks(late) + (late.size() == 1 ? " is" : " are") +
              " behind in " + group_name(*view.config) + ": ranks " + compress_ranks(waiting) +
              " reached collective " + describe_at(*front, consensus) + ", which " +
              (late.size() == 1 ? "it has" : "they have") + " not issued.";
  add_rank_evidence(v, view);
  v.remedies = {
      "look at what the rank(s) behind did instead of the collective (their logs, the call "
      "sites in their dumps): a different code path, a skipped collective, or a slow or stuck "
      "step before it"};
  return v;
}

// Ranks that issued collectives beyond the group's consensus, which no other rank issued.
std::optional<Verdict> ahead(const Job& job, const GroupView& view, std::int64_t consensus) {
  std::vector<int> early, rest;
  const RankInGroup* first = nullptr;
  for (const auto& rg : view.ranks) {
    if (rg.enqueued > consensus) {
      early.push_back(rg.rank);
      if (first == nullptr) first = &rg;
    } else {
      rest.push_back(rg.rank);
    }
  }
  if (early.empty()) return std::nullopt;
  auto v = flight_verdict(job, verdict_ids::kCollectiveAhead,
                          "A rank issued a collective the rest of its group never issued", 0.85);
  v.diverged_ranks = RankSet(early);
  v.summary = rank_word(early.size()) + compress_ranks(early) + " issued collective " +
              describe_at(*first, first->enqueued) + " of " + group_name(*view.config) +
              ", which ranks " + compress_ranks(rest) + " never issued (they stop at #" +
              std::to_string(consensus) + ").";
  add_rank_evidence(v, view);
  v.remedies = {
      "find why the rank(s) ahead issued an extra collective: a rank-dependent branch, an "
      "extra step or a different loop count"};
  return v;
}

// Whether every rank passes the same sizes to the operation: not so for all_to_all (uneven
// splits), gather and scatter (the root's lists differ) and the uneven `_v` variants.
bool sizes_must_agree(const std::string& op) {
  const auto has = [&](const char* part) { return op.find(part) != std::string::npos; };
  if (has("all_to_all") || has("alltoall") || has("_v")) return false;
  if (has("gather") && !has("all_gather") && !has("allgather")) return false;
  if (has("scatter") && !has("reduce_scatter")) return false;
  return true;
}

// The key of what must agree at one sequence number, and how two keys differ.
std::string signature_of(const FlightEntry& e) {
  const bool sizes = sizes_must_agree(e.profiling_name);
  return e.profiling_name + "\n" + (sizes ? e.input_sizes : "") + "\n" + e.input_dtypes + "\n" +
         (sizes ? e.output_sizes : "");
}

std::string difference(const FlightEntry& a, const FlightEntry& b) {
  std::vector<std::string> fields;
  if (a.profiling_name != b.profiling_name) fields.push_back("operation");
  if (sizes_must_agree(a.profiling_name) &&
      (a.input_sizes != b.input_sizes || a.output_sizes != b.output_sizes)) {
    fields.push_back("sizes");
  }
  if (a.input_dtypes != b.input_dtypes) fields.push_back("dtypes");
  std::string out;
  for (const auto& f : fields) out += (out.empty() ? "" : ", ") + f;
  return out;
}

// Entries of one sequence number grouped by a key, the largest group first.
using Split = std::vector<std::pair<std::vector<int>, const FlightEntry*>>;

template <typename Key>
Split split_at(const GroupView& view, std::int64_t seq, Key key) {
  std::map<std::string, std::pair<std::vector<int>, const FlightEntry*>> by_key;
  for (const auto& rg : view.ranks) {
    const auto it = rg.by_seq.find(seq);
    if (it == rg.by_seq.end()) continue;
    auto& slot = by_key[key(*it->second)];
    slot.first.push_back(rg.rank);
    slot.second = it->second;
  }
  Split out;
  for (auto& [k, value] : by_key) out.push_back(std::move(value));
  std::stable_sort(out.begin(), out.end(),
                   [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return out;
}

std::set<std::int64_t> sequence_numbers(const GroupView& view) {
  std::set<std::int64_t> out;
  for (const auto& rg : view.ranks) {
    for (const auto& [seq, e] : rg.by_seq) out.insert(seq);
  }
  return out;
}

Verdict mismatch_verdict(const Job& job, const GroupView& view, std::int64_t seq,
                         const Split& split, const std::string& what) {
  auto v =
      flight_verdict(job, verdict_ids::kCollectiveMismatch,
                     "Ranks disagree on a collective (operation, sizes, dtypes or state)", 0.9);
  v.waiting_ranks = RankSet(split.front().first);
  for (std::size_t i = 1; i < split.size(); ++i) v.diverged_ranks.insert(RankSet(split[i].first));
  for (const auto& [ranks, e] : split) {
    v.evidence.push_back("flight recorder, collective #" + std::to_string(seq) + " of " +
                         group_name(*view.config) + " on ranks " + compress_ranks(ranks) + ": " +
                         e->describe());
  }
  v.summary = "Collective #" + std::to_string(seq) + " of " + group_name(*view.config) +
              " differs in " + what + " on rank(s) " + compress_ranks(v.diverged_ranks) + " (" +
              split[1].second->describe() + ") from ranks " + compress_ranks(split.front().first) +
              " (" + split.front().second->describe() + ")" +
              (split.front().first.size() == split[1].first.size() ? "; no majority" : "") + ".";
  return v;
}

// The first sequence number whose operation, sizes or dtypes differ between ranks.
std::optional<Verdict> kind_mismatch(const Job& job, const GroupView& view) {
  std::optional<Verdict> found;
  std::size_t more = 0;
  for (std::int64_t seq : sequence_numbers(view)) {
    const auto split = split_at(view, seq, signature_of);
    if (split.size() < 2) continue;
    if (found) {
      ++more;
      continue;
    }
    found = mismatch_verdict(job, view, seq, split,
                             difference(*split.front().second, *split[1].second));
    found->remedies = {
        "make every rank issue the same collectives in the same order with the same shapes "
        "and dtypes (a data-dependent branch or a rank-dependent shape is the usual cause)"};
  }
  if (found && more > 0) {
    found->evidence.push_back(std::to_string(more) + " later collective(s) of " +
                              group_name(*view.config) + " differ between ranks too");
  }
  return found;
}

// A collective some ranks started (or completed) while others never started it.
std::optional<Verdict> state_mismatch(const Job& job, const GroupView& view) {
  const auto started = [](const FlightEntry& e) {
    return e.state == model::FlightState::kScheduled ? std::string("not started")
                                                     : std::string("started");
  };
  for (std::int64_t seq : sequence_numbers(view)) {
    auto split = split_at(view, seq, started);
    if (split.size() < 2) continue;
    // The ranks that did not start it are the ones to look at, whatever their number.
    if (split.front().second->state == model::FlightState::kScheduled) {
      std::swap(split[0], split[1]);
    }
    auto v = mismatch_verdict(job, view, seq, split, "state");
    v.remedies = {
        "the rank(s) that never started the collective were held up before it on their own "
        "device or stream (a previous kernel, a copy, a host-side wait): look at them first"};
    return v;
  }
  return std::nullopt;
}

// Every member in the same collective, which none completed: no rank differs.
std::optional<Verdict> transport(const Job& job, const GroupView& view) {
  if (view.ranks.size() < 2 || view.ranks.size() != view.members.size()) return std::nullopt;
  const std::int64_t seq = view.ranks.front().enqueued;
  std::set<model::FlightState> states;
  for (const auto& rg : view.ranks) {
    const auto* e = rg.last();
    if (rg.enqueued != seq || e == nullptr || e->state == model::FlightState::kCompleted) {
      return std::nullopt;
    }
    states.insert(e->state);
  }
  auto v = flight_verdict(job, verdict_ids::kCollectiveTransport,
                          "Every rank is in the same collective and none completed it: the "
                          "transport, not a rank",
                          0.6);
  std::vector<int> all;
  for (const auto& rg : view.ranks) all.push_back(rg.rank);
  v.waiting_ranks = RankSet(all);
  v.summary = "Every rank of " + group_name(*view.config) + " (ranks " + compress_ranks(all) +
              ") issued collective " + view.ranks.front().last()->describe() +
              (states.count(model::FlightState::kStarted) != 0U ? "" : " (none started it)") +
              " and none completed it; no rank is behind, ahead or different: the transport "
              "(network, NCCL, a GPU or link) is the suspect.";
  add_rank_evidence(v, view);
  v.remedies = {
      "check the network and the GPUs of the job's nodes at the time of the timeout (NCCL "
      "logs with NCCL_DEBUG=INFO, NCCL RAS, link errors, Xid messages in the kernel log)"};
  return v;
}

// Group members without a usable dump: none written (a rank blocked in teardown, or killed
// before the watchdog dumped), unreadable or stale.
std::optional<Verdict> missing(const Job& job, const JobDumps& dumps,
                               const std::map<std::string, GroupView>& views) {
  std::set<int> absent;
  std::set<int> waiting;
  std::vector<std::string> where;
  for (const auto& [id, view] : views) {
    std::vector<int> here;
    for (int m : view.members) {
      if (!dumps.usable.count(m)) here.push_back(m);
    }
    if (here.empty()) continue;
    absent.insert(here.begin(), here.end());
    where.push_back(group_name(*view.config) + " lists rank(s) " + compress_ranks(here));
    for (const auto& rg : view.ranks) {
      if (const auto* e = rg.last(); e != nullptr && e->state != model::FlightState::kCompleted)
        waiting.insert(rg.rank);
    }
  }
  for (const auto& [rank, why] : dumps.unusable) absent.insert(rank);
  if (absent.empty()) return std::nullopt;
  auto v = flight_verdict(job, verdict_ids::kFlightRecordMissing,
                          "Ranks of the job left no usable flight-recorder dump", 0.0);
  v.confidence = waiting.empty() ? 0.5 : 0.8;
  const std::vector<int> list(absent.begin(), absent.end());
  v.diverged_ranks = RankSet(list);
  v.waiting_ranks = RankSet(std::vector<int>(waiting.begin(), waiting.end()));
  v.summary =
      rank_word(list.size()) + compress_ranks(list) +
      " left no usable flight-recorder dump while " +
      (waiting.empty() ? std::string("the others' last collectives completed")
                       : "ranks " + compress_ranks(v.waiting_ranks) + " wait in a collective") +
      ": a rank blocked before the dump (in teardown, or killed first) writes none.";
  for (const auto& w : where) v.evidence.push_back(w + " without a usable dump");
  for (int r : list) {
    const auto it = dumps.unusable.find(r);
    v.evidence.push_back(
        "rank " + std::to_string(r) + ": " +
        (it == dumps.unusable.end() ? std::string("no dump among the files") : it->second));
  }
  v.remedies = {
      "look at the logs (and core files) of the rank(s) without a dump: what they did when the "
      "others timed out"};
  return v;
}

RankEntry* entry_of(Job& job, int rank) {
  const auto it = job.by_rank.find(rank);
  return it == job.by_rank.end() ? nullptr : &job.ranks[it->second];
}

// The waiting ranks wait for the diverged ones: the same graph the stacks give.
void link_waits(Job& job, const Verdict& v) {
  if (v.diverged_ranks.empty()) return;
  for (int w : v.waiting_ranks.list()) {
    if (auto* entry = entry_of(job, w); entry != nullptr && entry->waits_for.empty()) {
      entry->waits_for = v.diverged_ranks;
      entry->waits_for_reason = "flight recorder: " + v.summary;
      entry->membership = "flight-recorder";
    }
  }
}

std::vector<Verdict> group_verdicts(const Job& job, const GroupView& view) {
  std::vector<Verdict> out;
  const std::int64_t consensus = consensus_issued(view.ranks);
  for (auto v : {kind_mismatch(job, view), state_mismatch(job, view), behind(job, view, consensus),
                 ahead(job, view, consensus)}) {
    if (v) out.push_back(std::move(*v));
  }
  if (out.empty()) {
    if (auto v = transport(job, view)) out.push_back(std::move(*v));
  }
  return out;
}

}  // namespace

bool flight_records_only(const Job& job) {
  bool any = false;
  for (const auto& r : job.ranks) {
    for (const auto* p : r.history) {
      const bool stacks = p->dump && !p->dump->threads.empty();
      if (stacks || !p->flight_record ||
          p->identity.source != model::IdentitySource::kFlightRecorder)
        return false;
      any = true;
    }
  }
  return any;
}

std::vector<Verdict> postmortem_flight_verdicts(Job& job) {
  const JobDumps dumps = dumps_of(job);
  const auto views = group_views(dumps);
  std::vector<Verdict> out;
  for (const auto& [id, view] : views) {
    for (const auto& rg : view.ranks) {
      if (auto* entry = entry_of(job, rg.rank)) entry->collectives.push_back(group_line(rg));
    }
    for (auto& v : group_verdicts(job, view)) out.push_back(std::move(v));
  }
  auto p2p = p2p_verdicts(job, dumps.usable);
  out.insert(out.end(), p2p.begin(), p2p.end());
  if (auto v = missing(job, dumps, views)) out.push_back(std::move(*v));
  // A stalled exchange points at the transport only when no rank explains it.
  if (out.size() > 1) {
    std::erase_if(out, [](const Verdict& v) { return v.id == verdict_ids::kP2pTransport; });
  }
  for (const auto& v : out) link_waits(job, v);
  return out;
}

std::string postmortem_no_divergence(const std::vector<Job>& jobs) {
  std::size_t dumps = 0, recorded = 0;
  for (const auto& job : jobs) {
    for (const auto& r : job.ranks) {
      const auto* p = r.latest();
      ++dumps;
      if (p != nullptr && p->flight_record && !p->flight_record->entries.empty()) ++recorded;
    }
  }
  if (recorded == 0) {
    return "The flight-recorder dumps (" + std::to_string(dumps) +
           " rank(s)) record no collective: nothing to correlate (was flight recording on, "
           "TORCH_FR_BUFFER_SIZE / TORCH_NCCL_TRACE_BUFFER_SIZE > 0?).";
  }
  return "No hang in the flight-recorder dumps (" + std::to_string(dumps) +
         " rank(s)): in every process group each rank completed the same last collective, and "
         "no member is without a dump.";
}

}  // namespace hangscope::analysis
