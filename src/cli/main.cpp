// The whole program (libexec/hangscope/hangscope): every command, run by the front program
// (front_main.cpp) for everything but dump. No exception leaves main.
#include <cstdio>
#include <exception>

#include "hangscope/cli/commands.h"

int main(int argc, char** argv) {
  try {
    return hangscope::cli::run(argc, argv);
  } catch (const std::exception& e) {
    hangscope::cli::print_error(std::string("internal error: ") + e.what());
  } catch (...) {
    hangscope::cli::print_error("internal error: an unknown exception");
  }
  return hangscope::cli::kExitFailed;
}
