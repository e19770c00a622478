#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <iostream>
#include <map>

#include "hangscope/cli/commands.h"
#include "hangscope/version.h"

namespace hangscope::cli {
namespace {

void setup_logging(int verbosity, const std::string& level) {
  auto logger = spdlog::stderr_color_mt("hangscope");
  logger->set_pattern("%^hangscope: %l:%$ %v");
  if (!level.empty()) {
    logger->set_level(spdlog::level::from_str(level));
  } else {
    logger->set_level(verbosity >= 2   ? spdlog::level::debug
                      : verbosity == 1 ? spdlog::level::info
                                       : spdlog::level::warn);
  }
  spdlog::set_default_logger(logger);
}

}  // namespace

int run(int argc, char** argv) {
  CLI::App app{
      "hangscope: find the rank that diverged in a hung multi-node PyTorch / vLLM job.\n"
      "Captures native and Python stacks of live processes without stopping them for longer "
      "than a copy of their registers and stack takes.",
      "hangscope"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hangscope ") + kVersion + " (git " +
                                        git_revision() +
                                        ")\nPython stacks: CPython 3.10-3.13, 3.14 and later "
                                        "through their _Py_DebugOffsets table");
  const std::string exit_codes =
      "Exit codes: 0 success (diagnose/report: no hang found), 1 error, 2 bad usage, 3 a hang "
      "was found (diagnose/report named a rank, or a node that did not answer or refused). "
      "NO_COLOR turns colours off.\n"
      "More: hangscope COMMAND --help, man hangscope, docs/cli.md";
  app.footer(exit_codes);
  int verbosity = 0;
  app.add_flag("-v,--verbose", verbosity, "More log output on stderr (repeat for debug)");
  std::string log_level;
  app.add_option("--log-level", log_level, "Log level on stderr: error, warn, info, debug")
      ->check(CLI::IsMember({"error", "warn", "info", "debug"}));

  std::map<CLI::App*, CommandRunner> runners;
  auto* dump = app.add_subcommand("dump", "Print every thread's stack of one process");
  runners[dump] = register_dump_command(*dump);
  auto* collect = app.add_subcommand(
      "collect", "Serve this node's snapshots (agent), or capture it once into a file");
  runners[collect] = register_collect_command(*collect);
  auto* diagnose =
      app.add_subcommand("diagnose", "Gather every node's snapshot and write the report");
  runners[diagnose] = register_diagnose_command(*diagnose);
  auto* report = app.add_subcommand("report", "Re-run the analysis of a saved bundle");
  runners[report] = register_report_command(*report);
  auto* rules = app.add_subcommand("rules", "List the signature rules, or check a rule file");
  runners[rules] = register_rules_command(*rules);
  // A command's own footer (its examples) replaces the main one: scripts read the exit codes
  // in every command's --help.
  for (auto& [command, runner] : runners) {
    const std::string examples = command->get_footer();
    command->footer(examples.empty() ? exit_codes : examples + "\n\n" + exit_codes);
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    app.exit(e);
    return kExitUsage;
  }
  setup_logging(verbosity, log_level);
  for (auto& [command, runner] : runners) {
    if (command->parsed()) return runner();
  }
  return kExitUsage;
}

}  // namespace hangscope::cli
