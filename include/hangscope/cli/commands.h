// The hangscope command line: each command registers its options and runs itself.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

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

// Parses argv and runs the chosen command; returns the process exit code.
int run(int argc, char** argv);

}  // namespace hangscope::cli
