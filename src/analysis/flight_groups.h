// Internal to analysis: one rank's view of one process group in its flight-recorder dump, shared
// by the live correlation (collective_sequences.cpp) and the post-mortem one
// (flight_consensus.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "hangscope/analysis/analysis.h"
#include "hangscope/model/flight_record.h"

namespace hangscope::analysis {

struct RankInGroup {
  int rank = 0;
  const model::FlightGroup* group = nullptr;
  std::int64_t enqueued = -1;                                // last collective issued
  std::map<std::int64_t, const model::FlightEntry*> by_seq;  // collectives, not p2p
  const model::FlightEntry* last_p2p = nullptr;              // the newest send or recv
  const model::FlightEntry* last() const {
    const auto it = by_seq.find(enqueued);
    return it == by_seq.end() ? nullptr : it->second;
  }
};

// The rank's entries of `group` and its last collective issued (pg_status, else its entries).
inline RankInGroup rank_in_group(int rank, const model::FlightRecord& record,
                                 const model::FlightGroup& group) {
  RankInGroup rg;
  rg.rank = rank;
  rg.group = &group;
  for (const auto& e : record.entries) {
    if (e.pg != group.id) continue;
    if (e.is_p2p) {
      rg.last_p2p = &e;
    } else {
      rg.by_seq[e.collective_seq_id] = &e;
    }
  }
  rg.enqueued = group.last_enqueued.value_or(rg.by_seq.empty() ? -1 : rg.by_seq.rbegin()->first);
  return rg;
}

inline std::string group_name(const model::FlightGroup& g) {
  return "process group " + g.id + (g.desc.empty() ? "" : " (" + g.desc + ")");
}

// "process group 0 (default_pg): issued #6, started #6, completed #5; last nccl:all_reduce …";
// a group of sends and recvs only: "process group 1 (pp_0): no collective; last point-to-point
// nccl:recv 2<-1 #7 … started".
inline std::string group_line(const RankInGroup& rg) {
  const auto& g = *rg.group;
  std::string line = group_name(g);
  if (rg.by_seq.empty() && rg.enqueued < 0) {
    line += ": no collective";
  } else {
    line += ": issued #" + std::to_string(rg.enqueued);
    if (g.last_started) line += ", started #" + std::to_string(*g.last_started);
    if (g.last_completed) line += ", completed #" + std::to_string(*g.last_completed);
  }
  if (const auto* e = rg.last()) line += "; last " + e->describe();
  if (rg.last_p2p != nullptr) line += "; last point-to-point " + rg.last_p2p->describe();
  return line;
}

// A verdict of the flight-recorder correlation (post-mortem collectives and p2p), before its
// ranks and evidence.
inline Verdict flight_verdict(const Job& job, const char* id, const char* title,
                              double confidence) {
  Verdict v;
  v.id = id;
  v.title = title;
  v.job = job.key;
  v.confidence = confidence;
  v.membership = "flight-recorder";
  return v;
}

}  // namespace hangscope::analysis
