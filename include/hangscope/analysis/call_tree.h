// The merged call tree of a job (as LLNL STAT draws it): every rank's stack, outermost frame
// first, merged into a prefix tree whose branches carry the set of ranks that pass through
// them. Python frames by default, with the native frames under the innermost Python frame
// summarized into one leaf; ranks without Python show their native stack.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "hangscope/analysis/analysis.h"

namespace hangscope::analysis {

struct CallTreeNode {
  std::string label;
  std::string kind;  // python | native | state (missing, unknown, dead, no stack)
  std::set<int> ranks;
  std::set<int> classes;
  std::vector<CallTreeNode> children;
};

CallTreeNode build_call_tree(const Job& job);

// One frame for people: "qualname (short/file.py:42)" or the native symbol (or module+offset).
std::string frame_label(const model::Frame& frame);

// The stack of the thread a rank's wait point was read from, innermost first (latest sample).
const model::FrameList* rank_stack(const RankEntry& rank);

}  // namespace hangscope::analysis
