// Private to analysis: a StatelessProcessGroup's counters read as program order (which object
// a waiting member waits for, and how far its peer got), for a group verdict's evidence.
#pragma once

#include <string>
#include <vector>

#include "hangscope/analysis/analysis.h"

namespace hangscope::analysis {

// One line per awaited object of the members in `waiting`: "group rank 2 has broadcast 8
// objects (its broadcast_send_counter): it has not reached broadcast_from/2/8, which group
// ranks 0,1 wait for". Empty unless `job` is a StatelessProcessGroup's.
std::vector<std::string> stateless_order_evidence(const Job& job, const RankSet& waiting);

}  // namespace hangscope::analysis
