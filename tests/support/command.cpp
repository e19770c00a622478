#include "command.h"

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>

#include "target_process.h"

namespace hangscope::testing {

CommandResult run_command(const std::string& shell_command) {
  const std::string err_path = temp_path("stderr");
  CommandResult result;
  FILE* pipe = ::popen((shell_command + " 2>" + err_path).c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  std::size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (FILE* err = std::fopen(err_path.c_str(), "r")) {
    while ((n = std::fread(buffer.data(), 1, buffer.size(), err)) > 0)
      result.err.append(buffer.data(), n);
    std::fclose(err);
  }
  ::unlink(err_path.c_str());
  return result;
}

}  // namespace hangscope::testing
