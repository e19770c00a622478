// Internal to analysis: the post-mortem matching of point-to-point flight-recorder entries (send
// and recv) between the two peers of each pair, per process group (flight_consensus.cpp).
#pragma once

#include <map>
#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/model/flight_record.h"

namespace hangscope::analysis {

// Per process group and direction (sender → receiver), the sender's sends matched with the
// receiver's recvs from it, in order (NCCL delivers one pair's messages in order): completed ones
// from the newest back, pending ones from the oldest on. A recv without a send names the sender
// ("never sent"), a send without a recv the receiver ("never posted the recv"); a rank that waits
// for a peer which itself waits for another is explained by that peer, so the verdict
// (p2p-unmatched) names the rank at the end of the chain, or the ranks of a cycle. A matched pair
// whose sizes or dtypes differ names both ranks (p2p-mismatch). Without either, pairs posted on
// both sides and never completed name no rank (p2p-transport). `dumps`: the usable dumps by rank.
std::vector<Verdict> p2p_verdicts(const Job& job,
                                  const std::map<int, const model::FlightRecord*>& dumps);

}  // namespace hangscope::analysis
