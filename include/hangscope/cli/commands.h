// The hangscope command line: each command registers its options and runs itself.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <span>

#include "hangscope/analysis/analysis.h"
#include "hangscope/cli/progress.h"

namespace hangscope::cli {

// Exit codes shared by all commands (design.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitHangFound = 3;

// A registered command: after parsing, the callback runs and returns the exit code. It may
// throw UsageError (exit 2) or hangscope::Error (exit 1): one line on stderr says why.
using CommandRunner = std::function<int()>;

// "hangscope: error: MESSAGE" on stderr, as one line with raw bytes escaped.
void print_error(const std::string& message);
// "hangscope: warning: MESSAGE" on stderr, whatever the output mode (--json and --ticket too):
// something was left out or changed that the user must know of.
void print_warning(const std::string& message);

// A process id option (--pid): a whole number from 1 to the kernel's pid_max, with a message
// that says so (CLI11's PositiveNumber printed a 300-digit range).
CLI::Validator pid_validator();

// The names of the options the command line gave ("--pid"), in the order listed.
std::vector<std::string> given_options(const std::vector<const CLI::Option*>& options);

// One command of the command line: the word that names it, its line in --help, and how it
// registers its options (returning what runs it).
struct Command {
  const char* name;
  const char* summary;
  CommandRunner (*add)(CLI::App& app);
};

// `dump`, the command the front program runs itself (cli/front.h).
const Command& dump_command();
// Every command, in the order --help lists them.
std::span<const Command> every_command();

CommandRunner register_dump_command(CLI::App& app);
CommandRunner register_collect_command(CLI::App& app);
CommandRunner register_diagnose_command(CLI::App& app);
CommandRunner register_report_command(CLI::App& app);
CommandRunner register_rules_command(CLI::App& app);
CommandRunner register_watch_command(CLI::App& app);

// What diagnose and report print on stdout.
enum class Output {
  kSummary,  // conclusion, verdicts, rank table: coloured on a terminal unless NO_COLOR is set
  kJson,     // report.json (--json)
  kTicket,   // report.md, ready to paste as an issue body (--ticket)
};

// How diagnose and report analyse a bundle.
struct ReportRequest {
  std::string dir;        // where the reports are written
  std::string where;      // what was looked at: "on this node", "in the snapshot files"
  std::string rules_dir;  // --rules
  Output output = Output::kSummary;
  std::size_t max_rule_bytes = 0;
  // What the analysis learns from outside the samples, applied before the reports are written
  // (a watch incident's finding); none when empty.
  std::function<void(analysis::Analysis&)> amend;
};

// Analyses a bundle (with the rules), writes its reports into `dir`, prints the result and
// returns the exit code (design.md): 3 when a verdict was reached; 1 when no rank was found
// anywhere, or when an input failed and the rest shows no hang (the report still comes out);
// 0 only when ranks were looked at and nothing was found. Errors go to stderr as such.
// The analysis and the report files are phases of `progress`.
int analyse_and_report(const ReportRequest& request, const model::Bundle& bundle,
                       const Progress& progress);

// The result of an analysis on stdout, as `output` says (`dir` holds the written reports).
void print_result(const std::string& dir, const model::Bundle& bundle,
                  const analysis::Analysis& analysis, Output output);

// Parses argv and runs the chosen one of `commands`; returns the process exit code.
int run(int argc, char** argv, std::span<const Command> commands);
// Parses argv and runs the chosen one of every command (the whole program).
int run(int argc, char** argv);

}  // namespace hangscope::cli
