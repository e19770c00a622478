// The front program, `hangscope`: it runs `dump` itself and hands every other command to the
// whole program, so that a one-shot dump loads neither gRPC, protobuf, OpenSSL nor the metrics
// server (docs/architecture.md, "Two programs").
#pragma once

#include <string>

namespace hangscope::cli {

// Whether the command line asks for `dump` (after global options only: -v, --verbose,
// --log-level), which the front runs; anything else (other commands, --help, --version, an
// unknown word) is the whole program's.
bool runs_in_front(int argc, char** argv);

// Where the whole program is: `relative_dir`/hangscope beside the directory of the running
// executable (bin/../libexec/hangscope, the same in the build tree and installed).
std::string whole_program_path(const std::string& relative_dir);

// Replaces this process with the whole program, same pid, same arguments and environment;
// returns only when that failed, after printing why (exit code 1).
int exec_whole_program(char** argv);

}  // namespace hangscope::cli
