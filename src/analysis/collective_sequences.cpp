// Correlation of flight-recorder dumps across the ranks of a job: per process group, which
// collective number each rank has issued, started and completed. A rank that has not issued the
// collective its peers wait in is behind (even when its stack looks like theirs); ranks whose
// entries for the same sequence number differ in operation, sizes or dtypes mismatch. The
// waiting ranks' wait-for edges point at the ranks behind.
#include <algorithm>
#include <map>
#include <set>

#include "flight_groups.h"
#include "hangscope/analysis/analysis.h"
#include "hangscope/analysis/rank_set.h"
#include "hangscope/analysis/verdict_ids.h"

namespace hangscope::analysis {
namespace {

using model::FlightEntry;
using model::FlightGroup;
using model::FlightRecord;

// The usable dumps of a job's ranks, by process group; stale and broken ones are reported.
std::map<std::string, std::vector<RankInGroup>> groups_of(const Job& job,
                                                          std::vector<std::string>& notes) {
  std::map<std::string, std::vector<RankInGroup>> out;
  for (const auto& r : job.ranks) {
    const auto* p = r.latest();
    if (p == nullptr || !p->flight_record || !r.rank) continue;
    const FlightRecord& fr = *p->flight_record;
    if (!fr.error.empty()) {
      notes.push_back("rank " + std::to_string(*r.rank) +
                      ": flight-recorder dump not used: " + fr.error);
      continue;
    }
    if (!fr.fresh) {
      notes.push_back("rank " + std::to_string(*r.rank) + ": flight-recorder dump " + fr.path +
                      " is older than the capture by more than the limit: not used");
      continue;
    }
    for (const auto& [id, g] : fr.groups) out[id].push_back(rank_in_group(*r.rank, fr, g));
  }
  return out;
}

std::string signature_of(const FlightEntry& e) {
  return e.profiling_name + " " + e.input_sizes + " " + e.input_dtypes;
}

// Ranks at the front (the highest collective issued, not completed) and ranks behind it.
std::optional<Verdict> behind_verdict(const Job& job, const std::vector<RankInGroup>& ranks) {
  std::int64_t front = -1;
  for (const auto& rg : ranks) front = std::max(front, rg.enqueued);
  std::vector<int> behind, waiting;
  const FlightEntry* front_entry = nullptr;
  for (const auto& rg : ranks) {
    if (rg.enqueued < front) {
      behind.push_back(rg.rank);
    } else if (const auto* e = rg.last();
               e != nullptr && e->state != model::FlightState::kCompleted) {
      waiting.push_back(rg.rank);
      front_entry = front_entry ? front_entry : e;
    }
  }
  if (behind.empty() || waiting.empty()) return std::nullopt;
  const auto& g = *ranks.front().group;
  Verdict v;
  v.id = verdict_ids::kCollectiveBehind;
  v.title = "Some ranks have not issued the collective their peers wait in";
  v.job = job.key;
  v.confidence = 0.9;
  v.diverged_ranks = RankSet(behind);
  v.waiting_ranks = RankSet(waiting);
  const std::string op = front_entry ? front_entry->describe() : "#" + std::to_string(front);
  v.summary = std::string(behind.size() == 1 ? "Rank " : "Ranks ") + compress_ranks(behind) +
              (behind.size() == 1 ? " is" : " are") + " behind in " + group_name(g) + ": ranks " +
              compress_ranks(waiting) + " wait in collective " + op + ", which " +
              (behind.size() == 1 ? "it has" : "they have") + " not issued.";
  for (const auto& rg : ranks) {
    const auto* e = rg.last();
    v.evidence.push_back("flight recorder, rank " + std::to_string(rg.rank) + ": last collective " +
                         (e ? e->describe() : "#" + std::to_string(rg.enqueued)) +
                         (rg.group->last_completed
                              ? ", completed #" + std::to_string(*rg.group->last_completed)
                              : ""));
  }
  v.remedies = {
      "look at what the rank(s) behind do instead (their stacks above): a different "
      "code path, a skipped or extra collective, or a slow step before it"};
  return v;
}

// The ranks whose entry for a sequence number differs from the majority's.
std::optional<Verdict> mismatch_verdict(const Job& job, const std::vector<RankInGroup>& ranks) {
  std::set<std::int64_t> seqs;
  for (const auto& rg : ranks) {
    for (const auto& [seq, e] : rg.by_seq) seqs.insert(seq);
  }
  for (std::int64_t seq : seqs) {
    std::map<std::string, std::vector<int>> by_signature;
    std::map<std::string, const FlightEntry*> example;
    for (const auto& rg : ranks) {
      const auto it = rg.by_seq.find(seq);
      if (it == rg.by_seq.end()) continue;
      by_signature[signature_of(*it->second)].push_back(rg.rank);
      example[signature_of(*it->second)] = it->second;
    }
    if (by_signature.size() < 2) continue;
    const auto majority = std::max_element(
        by_signature.begin(), by_signature.end(),
        [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
    Verdict v;
    v.id = verdict_ids::kCollectiveMismatch;
    v.title = "Ranks disagree on a collective (operation, sizes or dtypes)";
    v.job = job.key;
    v.confidence = 0.9;
    v.waiting_ranks = RankSet(majority->second);
    for (const auto& [sig, members] : by_signature) {
      if (sig != majority->first) v.diverged_ranks.insert(RankSet(members));
      v.evidence.push_back("flight recorder, collective #" + std::to_string(seq) + " of " +
                           group_name(*ranks.front().group) + " on ranks " +
                           compress_ranks(members) + ": " + example[sig]->describe());
    }
    const auto minority = std::find_if(by_signature.begin(), by_signature.end(),
                                       [&](const auto& s) { return s.first != majority->first; });
    v.summary = "Collective #" + std::to_string(seq) + " of " + group_name(*ranks.front().group) +
                " differs on rank(s) " + compress_ranks(v.diverged_ranks) + " (" +
                example[minority->first]->describe() + ") from ranks " +
                compress_ranks(majority->second) + " (" + example[majority->first]->describe() +
                ").";
    v.remedies = {
        "make every rank issue the same collectives in the same order with the same "
        "shapes (a data-dependent branch or a rank-dependent shape is the usual cause)"};
    return v;
  }
  return std::nullopt;
}

// Ranks of the group (by its configuration) that left no usable dump.
std::vector<int> missing_dumps(const std::vector<RankInGroup>& ranks) {
  std::set<int> expected(ranks.front().group->ranks.begin(), ranks.front().group->ranks.end());
  for (const auto& rg : ranks) expected.erase(rg.rank);
  return {expected.begin(), expected.end()};
}

RankEntry& entry_of(Job& job, int rank) {
  return job.ranks[job.by_rank.at(rank)];
}

}  // namespace

std::vector<Verdict> correlate_flight_records(Job& job) {
  std::vector<std::string> notes;
  const auto groups = groups_of(job, notes);
  std::vector<Verdict> verdicts;
  for (const auto& [id, ranks] : groups) {
    for (const auto& rg : ranks) entry_of(job, rg.rank).collectives.push_back(group_line(rg));
    auto v = mismatch_verdict(job, ranks);
    if (!v) v = behind_verdict(job, ranks);
    if (!v) continue;
    const auto missing = missing_dumps(ranks);
    if (!missing.empty()) {
      v->evidence.push_back("no flight-recorder dump from ranks " + compress_ranks(missing) +
                            " of " + group_name(*ranks.front().group));
    }
    for (const auto& n : notes) v->evidence.push_back(n);
    // The waiting ranks wait for the diverged ones: the same graph the stacks give.
    for (int w : v->waiting_ranks.list()) {  // ranks with a dump: present
      auto& entry = entry_of(job, w);
      entry.waits_for = v->diverged_ranks;
      entry.waits_for_reason = "flight recorder: " + v->summary;
    }
    verdicts.push_back(std::move(*v));
  }
  return verdicts;
}

}  // namespace hangscope::analysis
