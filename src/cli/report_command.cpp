// `hangscope report BUNDLE_DIR`: re-runs the analysis of a saved bundle and re-renders it.

#include <memory>

#include "hangscope/cli/commands.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/text.h"
#include "hangscope/sources/sources.h"
#include "hangscope/watch/findings.h"

namespace hangscope::cli {
namespace {

struct ReportArguments {
  std::string bundle;
  std::string rules_dir;
  bool json = false;
  bool ticket = false;
  std::size_t max_input_mib = kDefaultMaxInputBytes >> 20;
};

int run_report(const ReportArguments& args) {
  const std::size_t max_bytes = args.max_input_mib << 20;
  // --ticket and --json: stdout is the document, stderr only errors.
  const Progress progress(args.ticket || args.json);
  const auto bundle = sources::from_bundle_dir(args.bundle, max_bytes, progress.meter());
  for (const auto& node : bundle.nodes) {
    if (node.status == model::NodeState::kError) print_error(node.error);
  }
  ReportRequest request;
  // An incident of `hangscope watch`: what watch saw beyond the samples (a rank that exited while
  // its peers wait; the job that hung, whose verdicts lead) leads the report again.
  try {
    if (const auto finding = watch::read_finding(args.bundle)) {
      progress.say(printable(args.bundle) + " is an incident of hangscope watch (" +
                   std::string(watch::to_string(finding->kind)) + ", job " +
                   printable(finding->job) + "): its finding in watch.json leads the report");
      request.amend = [finding = *finding](analysis::Analysis& analysis) {
        watch::apply_finding(analysis, finding);
      };
    }
  } catch (const Error& e) {
    print_error(std::string(e.what()) + ": the report is made from the samples alone");
  }
  request.dir = args.bundle;
  request.where = "in the bundle " + args.bundle;
  request.rules_dir = args.rules_dir;
  request.output = args.ticket ? Output::kTicket : args.json ? Output::kJson : Output::kSummary;
  request.max_rule_bytes = max_bytes;
  return analyse_and_report(request, bundle, progress);
}

}  // namespace

CommandRunner register_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArguments>();
  app.add_option("bundle", args->bundle, "Bundle directory written by `hangscope diagnose`")
      ->required();
  auto* json = app.add_flag("--json", args->json, "Print report.json to stdout");
  app.add_flag("--ticket", args->ticket,
               "Print report.md to stdout: a GitHub issue body, ready to paste")
      ->excludes(json);
  app.add_option("--rules", args->rules_dir, "Directory of extra signature rule files (*.json)");
  app.add_option("--max-input-mib", args->max_input_mib,
                 "Largest snapshot or rule file read, in MiB; larger ones are refused")
      ->check(CLI::Range(std::size_t{1}, std::size_t{1} << 20))
      ->capture_default_str();
  app.footer(
      "Examples:\n"
      "  hangscope report hang                      # the verdict again, from the bundle\n"
      "  hangscope report hang --ticket > issue.md  # a GitHub issue body\n"
      "  hangscope report hang --rules /etc/hangscope/rules.d --json | jq '.verdicts[0]'");
  return [args] { return run_report(*args); };
}

}  // namespace hangscope::cli
