// Applies signature rules to an analysis: each rule that fires on a job adds a "signature"
// verdict, ordered before the generic verdicts it explains (which are marked as explained).
#pragma once

#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/rules/rule.h"

namespace hangscope::rules {

// The verdict of one rule on one job, or nullopt when it does not fire. `others` are the
// non-rank processes a group with "processes": "others" matches (those of this job, or of none).
std::optional<analysis::Verdict> evaluate(const Rule& rule, const analysis::Job& job,
                                          const std::vector<analysis::OtherProcess>& others = {});

// Adds every firing rule's verdict to `analysis` and re-orders the verdicts and conclusion.
void apply_rules(const std::vector<Rule>& rules, analysis::Analysis& analysis);

}  // namespace hangscope::rules
