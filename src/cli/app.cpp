// The hangscope command line: global options, the commands, and how every failure becomes one
// line on stderr and an exit code (design.md).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <map>

#include "hangscope/capture/process_capture.h"
#include "hangscope/cli/commands.h"
#include "hangscope/cli/options.h"
#include "hangscope/common/progress_meter.h"
#include "hangscope/common/text.h"
#include "hangscope/version.h"

namespace hangscope::cli {
namespace {

void setup_logging(int verbosity, const std::string& level) {
  // Registered once per process: run() may be called again (the cli_files fuzz target).
  auto logger = spdlog::get("hangscope");
  if (!logger) logger = spdlog::stderr_color_mt("hangscope");
  // On a terminal, a status line being shown is erased first (stderr_line_start()).
  logger->set_pattern(std::string(stderr_line_start()) + "%^hangscope: %l:%$ %v");
  if (!level.empty()) {
    logger->set_level(spdlog::level::from_str(level));
  } else {
    logger->set_level(verbosity >= 2   ? spdlog::level::debug
                      : verbosity == 1 ? spdlog::level::info
                                       : spdlog::level::warn);
  }
  spdlog::set_default_logger(logger);
}

// The word after the global options: what the user meant as the command ("frobnicate").
std::string first_word(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--log-level") {
      ++i;
      continue;
    }
    if (!arg.empty() && arg.front() != '-') return arg;
  }
  return "";
}

// CLI11's messages as one line naming the option, and the unknown command by name (CLI11
// said "A subcommand is required"). `word` is what the user typed as the command.
std::string failure_message(const CLI::Error& e, const std::string& word,
                            const std::vector<std::string>& commands) {
  const bool known = std::find(commands.begin(), commands.end(), word) != commands.end();
  if (!word.empty() && !known) {
    return "hangscope: error: unknown command '" + printable(word) +
           "' (commands: " + join(commands, ", ") + "; hangscope --help)\n";
  }
  return "hangscope: error: " + printable(e.what()) + " (hangscope " + (known ? word + " " : "") +
         "--help)\n";
}

// Runs a command: its exit code, or the one of the error that ended it.
int run_command(const CommandRunner& runner) {
  try {
    return runner();
  } catch (const UsageError& e) {
    print_error(e.what());
    return kExitUsage;
  } catch (const Error& e) {
    print_error(e.what());
    return kExitFailed;
  }
}

}  // namespace

// Both start with stderr_line_start(): on a terminal, a status line being shown is erased
// first, never left in front of the message.
void print_error(const std::string& message) {
  std::cerr << stderr_line_start() + std::string("hangscope: error: ") + printable(message) + "\n"
            << std::flush;
}

void print_warning(const std::string& message) {
  std::cerr << stderr_line_start() + std::string("hangscope: warning: ") + printable(message) + "\n"
            << std::flush;
}

std::vector<std::string> given_options(const std::vector<const CLI::Option*>& options) {
  std::vector<std::string> out;
  for (const auto* option : options) {
    if (option->count() > 0) out.push_back(option->get_name());
  }
  return out;
}

CLI::Validator pid_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const bool digits = !text.empty() && text.size() <= 10 &&
                            text.find_first_not_of("0123456789") == std::string::npos;
        const long long value = digits ? std::stoll(text) : 0;
        if (value < 1 || value > 4194304) {  // PID_MAX_LIMIT
          return "'" + printable(text) + "' is not a process id (1 to 4194304)";
        }
        return "";
      },
      "PID");
}

int run(int argc, char** argv, std::span<const Command> commands) {
  CLI::App app{
      "hangscope: find the rank that diverged in a hung multi-node PyTorch / vLLM job.\n"
      "Captures native and Python stacks of live processes without stopping them for longer "
      "than a copy of their registers and stack takes.",
      "hangscope"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hangscope ") + kVersion + " (git " +
                                        git_revision() + ")\nPython stacks: CPython " +
                                        capture::supported_python_versions() +
                                        " (3.13 and later through the interpreter's own "
                                        "_Py_DebugOffsets table)");
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
  for (const Command& command : commands) {
    auto* sub = app.add_subcommand(command.name, command.summary);
    runners[sub] = command.add(*sub);
  }
  // A command's own footer (its examples) replaces the main one: scripts read the exit codes
  // in every command's --help.
  for (auto& [command, runner] : runners) {
    const std::string examples = command->get_footer();
    command->footer(examples.empty() ? exit_codes : examples + "\n\n" + exit_codes);
  }

  std::vector<std::string> names;
  for (const auto* command : app.get_subcommands({})) names.push_back(command->get_name());
  const std::string word = first_word(argc, argv);
  app.failure_message(
      [&](const CLI::App*, const CLI::Error& e) { return failure_message(e, word, names); });
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
    if (command->parsed()) return run_command(runner);
  }
  return kExitUsage;
}

}  // namespace hangscope::cli
