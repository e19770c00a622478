// Runs a helper program (Graphviz dot, nvidia-smi) bounded in time and output, without a shell:
// a program that hangs (nvidia-smi on a wedged GPU) is killed and never stalls the caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace hangscope {

struct ProgramResult {
  bool started = false;    // false: not found or not executable (see `error`)
  bool timed_out = false;  // killed at the deadline
  int exit_code = -1;      // -1 when it did not exit normally
  std::string output;      // its standard output, at most max_output bytes
  std::string error;       // why it did not run or did not succeed, for people ("" on success)
  bool ok() const { return started && !timed_out && exit_code == 0; }
};

// Runs argv[0] (searched in PATH) with argv, stdin from /dev/null, stderr discarded. A child
// still alive at the deadline gets SIGKILL; one that cannot die at once (state D in a driver)
// is left to the kernel after a short grace period rather than waited for.
ProgramResult run_program(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          std::size_t max_output = 1u << 20);

}  // namespace hangscope
