// `hangscope report BUNDLE_DIR`: re-runs the analysis of a saved bundle and re-renders it.
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "hangscope/cli/commands.h"
#include "hangscope/common/error.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/report/report.h"

namespace hangscope::cli {
namespace {

struct ReportArguments {
  std::string bundle;
  std::string rules_dir;
  bool json = false;
};

int run_report(const ReportArguments& args) {
  try {
    const auto bundle = report::read_bundle(args.bundle);
    for (const auto& node : bundle.nodes) {
      if (node.status == "error") std::cerr << "hangscope: " << node.error << "\n";
    }
    return analyse_and_report(
        args.bundle, bundle, args.rules_dir, args.json,
        [](const std::string& s) { std::cerr << "hangscope: " << s << "\n"; });
  } catch (const Error& e) {
    std::cerr << "hangscope: error: " << e.what() << "\n";
    return kExitFailed;
  }
}

}  // namespace

int analyse_and_report(const std::string& dir, const analysis::Bundle& bundle,
                       const std::string& rules_dir, bool json,
                       const std::function<void(const std::string&)>& say) {
  auto phase = std::chrono::steady_clock::now();
  const auto took = [&phase](const char* what) {
    const auto now = std::chrono::steady_clock::now();
    spdlog::debug("{}: {} ms", what,
                  std::chrono::duration_cast<std::chrono::milliseconds>(now - phase).count());
    phase = now;
  };
  const auto analysis = analyze_with_rules(bundle, rules_dir, say);
  took("analysis and rules");
  for (const auto& note : report::write_reports(dir, bundle, analysis)) say(note);
  took("report files");
  say("report written to " + dir + "/report.md");
  print_result(bundle, analysis, json);
  return analysis.verdicts.empty() ? kExitOk : kExitHangFound;
}

void print_result(const analysis::Bundle& bundle, const analysis::Analysis& analysis, bool json) {
  if (json) {
    std::cout << report::report_json(bundle, analysis).dump(2) << std::endl;
  } else {
    std::cout << report::terminal_summary(analysis, ::isatty(STDOUT_FILENO) == 1) << std::flush;
  }
}

CommandRunner register_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArguments>();
  app.add_option("bundle", args->bundle, "Bundle directory written by `hangscope diagnose`")
      ->required();
  app.add_flag("--json", args->json, "Print report.json to stdout");
  app.add_option("--rules", args->rules_dir, "Directory of extra signature rule files (*.json)");
  return [args] { return run_report(*args); };
}

}  // namespace hangscope::cli
