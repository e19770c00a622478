// The hangscope command line: each command registers its options and runs itself.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "hangscope/analysis/analysis.h"

namespace hangscope::cli {

// Exit codes shared by all commands (design.md).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitHangFound = 3;

// A registered command: after parsing, the callback runs and returns the exit code.
using CommandRunner = std::function<int()>;

CommandRunner register_dump_command(CLI::App& app);
CommandRunner register_collect_command(CLI::App& app);
CommandRunner register_diagnose_command(CLI::App& app);
CommandRunner register_report_command(CLI::App& app);
CommandRunner register_rules_command(CLI::App& app);

// The analysis of a bundle with the signature rules in effect (built-in, /etc/hangscope/rules.d,
// `rules_dir`); skipped rule files are told to `say`.
analysis::Analysis analyze_with_rules(const analysis::Bundle& bundle, const std::string& rules_dir,
                                      const std::function<void(const std::string&)>& say);

// What diagnose and report print on stdout.
enum class Output {
  kSummary,  // conclusion, verdicts, rank table: coloured on a terminal unless NO_COLOR is set
  kJson,     // report.json (--json)
  kTicket,   // report.md, ready to paste as an issue body (--ticket)
};

// Analyses a bundle (with the rules), writes its reports into `dir`, prints the result and
// returns diagnose's exit code (3 when a verdict was reached).
int analyse_and_report(const std::string& dir, const analysis::Bundle& bundle,
                       const std::string& rules_dir, Output output,
                       const std::function<void(const std::string&)>& say);

// The result of an analysis on stdout, as `output` says (`dir` holds the written reports).
void print_result(const std::string& dir, const analysis::Bundle& bundle,
                  const analysis::Analysis& analysis, Output output);

// Parses argv and runs the chosen command; returns the process exit code.
int run(int argc, char** argv);

}  // namespace hangscope::cli
