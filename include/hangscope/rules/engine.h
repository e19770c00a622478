// Evaluates signature rules on the analysis's jobs: each rule that fires on a job gives a
// "signature" verdict and marks the generic verdicts it explains.
#pragma once

#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/rules/rule.h"

namespace hangscope::rules {

// The verdict of one rule on one job, or nullopt when it does not fire. `others` are the
// non-rank processes a group with "processes": "others" matches (those of this job, or of none).
std::optional<analysis::Verdict> evaluate(const Rule& rule, const analysis::Job& job,
                                          const std::vector<analysis::OtherProcess>& others = {});

// The verdicts of every rule that fires on one of `jobs`; each generic verdict a firing rule
// explains is marked so (`explained_by`). Ordering is diagnosis::diagnose's.
std::vector<analysis::Verdict> signature_verdicts(const std::vector<Rule>& rules,
                                                  const std::vector<analysis::Job>& jobs,
                                                  const std::vector<analysis::OtherProcess>& others,
                                                  std::vector<analysis::Verdict>& generic);

}  // namespace hangscope::rules
