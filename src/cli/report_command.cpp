// `hangscope report BUNDLE_DIR`: re-runs the analysis of a saved bundle and re-renders it.
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <memory>

#include "hangscope/cli/commands.h"
#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/phase_timer.h"
#include "hangscope/report/bundle_files.h"
#include "hangscope/report/report.h"

namespace hangscope::cli {
namespace {

struct ReportArguments {
  std::string bundle;
  std::string rules_dir;
  bool json = false;
  bool ticket = false;
};

int run_report(const ReportArguments& args) {
  try {
    const auto bundle = report::read_bundle(args.bundle);
    for (const auto& node : bundle.nodes) {
      if (node.status == "error") std::cerr << "hangscope: " << node.error << "\n";
    }
    return analyse_and_report(
        args.bundle, bundle, args.rules_dir,
        args.ticket ? Output::kTicket
        : args.json ? Output::kJson
                    : Output::kSummary,
        [](const std::string& s) { std::cerr << "hangscope: " << s << "\n"; });
  } catch (const Error& e) {
    std::cerr << "hangscope: error: " << e.what() << "\n";
    return kExitFailed;
  }
}

}  // namespace

int analyse_and_report(const std::string& dir, const analysis::Bundle& bundle,
                       const std::string& rules_dir, Output output,
                       const std::function<void(const std::string&)>& say) {
  PhaseTimer timer;
  const auto analysis = analyze_with_rules(bundle, rules_dir, say);
  timer.lap("analysis and rules");
  for (const auto& note : report::write_reports(dir, bundle, analysis)) say(note);
  timer.lap("report files");
  say("report written to " + dir + "/report.md");
  print_result(dir, bundle, analysis, output);
  return analysis.verdicts.empty() ? kExitOk : kExitHangFound;
}

void print_result(const std::string& dir, const analysis::Bundle& bundle,
                  const analysis::Analysis& analysis, Output output) {
  switch (output) {
    case Output::kJson:
      report::write_report_json(std::cout, bundle, analysis);
      std::cout << std::flush;
      break;
    case Output::kTicket: {
      const auto text = read_file(dir + "/report.md", 64 << 20);
      if (!text.text) throw Error("cannot read " + dir + "/report.md for --ticket");
      std::cout << *text.text << std::flush;
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

CommandRunner register_report_command(CLI::App& app) {
  auto args = std::make_shared<ReportArguments>();
  app.add_option("bundle", args->bundle, "Bundle directory written by `hangscope diagnose`")
      ->required();
  auto* json = app.add_flag("--json", args->json, "Print report.json to stdout");
  app.add_flag("--ticket", args->ticket,
               "Print report.md to stdout: a GitHub issue body, ready to paste")
      ->excludes(json);
  app.add_option("--rules", args->rules_dir, "Directory of extra signature rule files (*.json)");
  app.footer(
      "Examples:\n"
      "  hangscope report hang                      # the verdict again, from the bundle\n"
      "  hangscope report hang --ticket > issue.md  # a GitHub issue body\n"
      "  hangscope report hang --rules /etc/hangscope/rules.d --json | jq '.verdicts[0]'");
  return [args] { return run_report(*args); };
}

}  // namespace hangscope::cli
