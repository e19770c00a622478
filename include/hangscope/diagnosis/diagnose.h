// The one pipeline from a bundle of snapshots to the report's model: every verdict is made here.
#pragma once

#include "hangscope/analysis/analysis.h"
#include "hangscope/rules/rule.h"

namespace hangscope::diagnosis {

// Diagnoses `bundle` with `rules` (rules::load_rules; none by default): the rank table of every
// job, its wait-for graph, then every verdict in order (unreachable nodes, flight records, init
// hangs, the wait-for graph, the serving chain, signature rules), their evidence, their order and
// the conclusion. Used by `diagnose`, `report` and any other source of bundles. The result points
// into `bundle`: keep it alive while using the analysis.
analysis::Analysis diagnose(const model::Bundle& bundle, const rules::RuleSet& rules = {});

// Signature verdicts first, then by confidence (stable).
void order_verdicts(std::vector<analysis::Verdict>& verdicts);

}  // namespace hangscope::diagnosis
