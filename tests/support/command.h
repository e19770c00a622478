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

}  // namespace hangscope::testing
