// Every built-in verdict id, in one list: the generic verdicts of the analysis (the wait-for
// graph's roots, the flight records, init hangs, unreachable nodes, the serving chain). A rule's
// `explains` names ids of this list (`rules check` refuses others); a rule's own id is user data
// and not here. report.json writes these ids as they are: renaming one changes the report.
#pragma once

#include <algorithm>
#include <array>
#include <string_view>

namespace hangscope::analysis::verdict_ids {

// The wait-for graph's root, by what the rank it names is doing (analysis/verdicts.cpp).
inline constexpr char kRankDead[] = "rank-dead";
inline constexpr char kRankStopped[] = "rank-stopped";
inline constexpr char kRankUninterruptible[] = "rank-uninterruptible";
inline constexpr char kRankStraggler[] = "rank-straggler";
inline constexpr char kRankDiverged[] = "rank-diverged";
// Ranks of a group in different collectives or behind/ahead in its sequence (live stacks or
// flight records), and a collective whose transport stalls.
inline constexpr char kCollectiveMismatch[] = "collective-mismatch";
inline constexpr char kCollectiveBehind[] = "collective-behind";
inline constexpr char kCollectiveAhead[] = "collective-ahead";
inline constexpr char kCollectiveTransport[] = "collective-transport";
// Point-to-point operations of the flight records (analysis/p2p_matching.cpp).
inline constexpr char kP2pUnmatched[] = "p2p-unmatched";
inline constexpr char kP2pMismatch[] = "p2p-mismatch";
inline constexpr char kP2pTransport[] = "p2p-transport";
// A post-mortem rank whose dump is missing.
inline constexpr char kFlightRecordMissing[] = "flight-record-missing";
// A rank that never reached the process group's rendezvous (analysis/init_hang.cpp).
inline constexpr char kRankNotArrived[] = "rank-not-arrived";
// Nodes that did not answer.
inline constexpr char kNodeUnreachable[] = "node-unreachable";
inline constexpr char kNodeRefused[] = "node-refused";
inline constexpr char kNodeBusy[] = "node-busy";
// The front-end verdict of a serving chain (analysis/serving_chain.cpp).
inline constexpr char kServingStalled[] = "serving-stalled";

inline constexpr std::array<std::string_view, 18> kAll = {kRankDead,
                                                          kRankStopped,
                                                          kRankUninterruptible,
                                                          kRankStraggler,
                                                          kRankDiverged,
                                                          kCollectiveMismatch,
                                                          kCollectiveBehind,
                                                          kCollectiveAhead,
                                                          kCollectiveTransport,
                                                          kP2pUnmatched,
                                                          kP2pMismatch,
                                                          kP2pTransport,
                                                          kFlightRecordMissing,
                                                          kRankNotArrived,
                                                          kNodeUnreachable,
                                                          kNodeRefused,
                                                          kNodeBusy,
                                                          kServingStalled};

// Whether `id` is a built-in verdict's id.
inline bool is_builtin(std::string_view id) {
  return std::find(kAll.begin(), kAll.end(), id) != kAll.end();
}

}  // namespace hangscope::analysis::verdict_ids
