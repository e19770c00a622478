// Test helper: runs a shell command and captures its exit code, stdout and stderr.
#pragma once

#include <string>

namespace hangscope::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when it did not exit normally
  std::string out;
  std::string err;
};

CommandResult run_command(const std::string& shell_command);

// True when strace can be run (tools/install-deps.sh installs it).
bool have_strace();

// `command` under `strace -f -qq -e trace=SYSCALLS -o TRACE_FILE`, as a shell command. The traced
// program runs with LeakSanitizer off: under ptrace it cannot run and would fail the program at
// exit (the ASan build); every other sanitizer option is kept.
std::string strace_command(const std::string& syscalls, const std::string& trace_file,
                           const std::string& command);

// Runs `shell_command` with stdin, stdout and stderr on a pseudo-terminal of `columns` columns
// (TERM=xterm): out holds every byte the terminal received, err is empty. The command is killed
// (its process group) when it has not ended within `timeout_seconds` (exit_code -1).
CommandResult run_on_terminal(const std::string& shell_command, int timeout_seconds = 120,
                              unsigned short columns = 200);

}  // namespace hangscope::testing
