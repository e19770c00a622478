// Shared parts of the libFuzzer targets: the input as a string, and what `hangscope diagnose
// FILE` does with the snapshots it read (analysis, signature rules, every rendering).
//
// The oracle of every target: a parser may refuse its input only with hangscope::Error (or by
// the documented error field of its result). Any other exception escapes the harness and
// aborts (std::terminate), as do sanitizer reports, leaks, timeouts and out-of-memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "hangscope/analysis/analysis.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/model/node_snapshot.h"
#include "hangscope/report/report.h"
#include "hangscope/rules/engine.h"
#include "hangscope/rules/rule.h"

namespace hangscope::fuzz {

inline std::string input(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// The built-in rules, parsed once.
inline const std::vector<rules::Rule>& builtin_rules() {
  static const std::vector<rules::Rule> rules = rules::load_rules("", "").rules;
  return rules;
}

// diagnose's steps after reading snapshot files (cli/diagnose_command.cpp from_files, then
// analyse_and_report): one bundle of every snapshot, analysed, rules applied, rendered.
//
// Every input is diagnosed, whatever world size its ranks claim: the analysis and the reports
// hold the ranks no process has as ranges (analysis::Job::missing), so a claim of 2^31 - 1
// ranks costs what the ranks present cost.
inline void diagnose(std::vector<model::NodeSnapshot> nodes) {
  model::Bundle bundle;
  for (auto& node : nodes) {
    bool known = false;
    for (const auto& n : bundle.nodes) known = known || n.name == node.node_name;
    if (!known) bundle.nodes.push_back({node.node_name, std::nullopt, model::NodeState::kOk, "", 0});
    bundle.snapshots.push_back(std::move(node));
  }
  rules::RuleSet rule_set;
  rule_set.rules = builtin_rules();
  const auto result = diagnosis::diagnose(bundle, rule_set);
  std::ostringstream json;
  report::write_report_json(json, bundle, result);
  (void)report::report_markdown(bundle, result);
  (void)report::tree_dot(result);
  (void)report::stacks_folded(result);
  (void)report::terminal_summary(result, true);
}

}  // namespace hangscope::fuzz
