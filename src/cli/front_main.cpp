// `hangscope`, the program users run: `dump` runs here, in a program that loads neither gRPC,
// protobuf, OpenSSL nor the metrics server (a one-shot dump is mostly start-up otherwise); every
// other command, --help and --version are the whole program's (main.cpp), exec'd in place.
// No exception leaves main.
#include <exception>
#include <string>

#include "hangscope/cli/commands.h"
#include "hangscope/cli/front.h"

int main(int argc, char** argv) {
  try {
    if (!hangscope::cli::runs_in_front(argc, argv)) return hangscope::cli::exec_whole_program(argv);
    return hangscope::cli::run(argc, argv, {&hangscope::cli::dump_command(), 1});
  } catch (const std::exception& e) {
    hangscope::cli::print_error(std::string("internal error: ") + e.what());
  } catch (...) {
    hangscope::cli::print_error("internal error: an unknown exception");
  }
  return hangscope::cli::kExitFailed;
}
