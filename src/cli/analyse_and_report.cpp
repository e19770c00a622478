// The end both `diagnose` and `report` share (and `watch` will): a bundle analysed with the
// rules, its reports written into the bundle directory, the result printed, the exit code chosen.
#include <unistd.h>

#include <cstdlib>
#include <iostream>

#include "hangscope/cli/commands.h"
#include "hangscope/common/error.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/common/text.h"
#include "hangscope/diagnosis/diagnose.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/report/report.h"
#include "hangscope/rules/rule.h"

namespace hangscope::cli {
namespace {

// The processes of the newest samples that could not be captured: "pid 12: why", at most 3.
std::string capture_errors(const model::Bundle& bundle) {
  std::vector<std::string> errors;
  for (const auto& [name, node] : model::latest_samples(bundle)) {
    for (const auto& p : node->processes) {
      if (p.error.empty()) continue;
      const std::string pid = "pid " + std::to_string(p.pid);
      errors.push_back(p.error.find(pid) == std::string::npos ? pid + ": " + p.error : p.error);
    }
  }
  return join(errors, "; ", 3);
}

// The inputs that failed: nodes that did not answer, snapshot files that could not be read.
std::vector<std::string> failed_inputs(const model::Bundle& bundle) {
  std::vector<std::string> out;
  for (const auto& n : bundle.nodes) {
    if (n.status != model::NodeState::kOk) {
      out.push_back(n.name + " (" + std::string(model::to_string(n.status)) + ")");
    }
  }
  return out;
}

bool any_rank_captured(const analysis::Analysis& analysis) {
  for (const auto& job : analysis.jobs) {
    for (const auto& r : job.ranks) {
      if (!r.history.empty()) return true;
    }
  }
  return false;
}

}  // namespace

int analyse_and_report(const ReportRequest& request, const model::Bundle& bundle,
                       const Progress& progress) {
  PhaseTimer timer;
  const auto rule_set =
      rules::load_rules(rules::kSystemRulesDir, request.rules_dir, request.max_rule_bytes);
  // Shown in every output mode: a rule file left out changes which verdicts can be reached.
  for (const auto& e : rule_set.errors) print_warning("skipped rule: " + e);
  auto task = progress.start("analysing the snapshots");
  auto analysis = diagnosis::diagnose(bundle, rule_set);
  if (request.amend) request.amend(analysis);
  timer.lap("analysis and rules");
  task.stage("writing the reports");
  const auto notes = report::write_reports(request.dir, bundle, analysis);
  task.end();
  for (const auto& note : notes) progress.say(note);
  timer.lap("report files");
  progress.say("report written to " + request.dir + "/report.md");
  print_result(request.dir, bundle, analysis, request.output);
  const auto failed = failed_inputs(bundle);
  if (!any_rank_captured(analysis)) {
    const auto why = capture_errors(bundle);
    print_error("no rank process found " + request.where + (why.empty() ? "" : " (" + why + ")") +
                (failed.empty() ? "" : "; failed: " + join(failed, ", ", 5)));
    // A verdict (a node that did not answer while another did) is still a verdict: exit 3.
    return analysis.verdicts.empty() ? kExitFailed : kExitHangFound;
  }
  if (!analysis.verdicts.empty()) return kExitHangFound;
  if (!failed.empty()) {
    print_error("no hang among the ranks read, but not every input was: " + join(failed, ", ", 5) +
                " (see the report's nodes)");
    return kExitFailed;
  }
  return kExitOk;
}

void print_result(const std::string& dir, const model::Bundle& bundle,
                  const analysis::Analysis& analysis, Output output) {
  switch (output) {
    case Output::kJson:
      report::write_report_json(std::cout, bundle, analysis);
      std::cout << std::flush;
      break;
    case Output::kTicket: {
      std::cout << read_input_file(dir + "/report.md", "report", std::size_t{64} << 20,
                                   InputKind::kRegularFile, Links::kRefuse)
                << std::flush;
      break;
    }
    case Output::kSummary: {
      // https://no-color.org: any non-empty NO_COLOR turns colour off.
      const char* no_color = std::getenv("NO_COLOR");
      const bool colour = ::isatty(STDOUT_FILENO) == 1 && (no_color == nullptr || !*no_color);
      std::cout << report::terminal_summary(analysis, colour) << std::flush;
      break;
    }
  }
}

}  // namespace hangscope::cli
