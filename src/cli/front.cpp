// The front program's choice between running `dump` and exec'ing the whole program.
#include "hangscope/cli/front.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "hangscope/cli/commands.h"
#include "hangscope/common/error.h"

#ifndef HANGSCOPE_WHOLE_PROGRAM_DIR
#error \
    "HANGSCOPE_WHOLE_PROGRAM_DIR (the whole program's directory, relative to the front's) is set by src/CMakeLists.txt"
#endif

namespace hangscope::cli {
namespace {

// -v, -vv, ...: the global verbosity flag, repeated in one word or not.
bool verbosity_flags(std::string_view arg) {
  return arg.size() >= 2 && arg[0] == '-' && arg.find_first_not_of('v', 1) == std::string::npos;
}

}  // namespace

bool runs_in_front(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--log-level") {
      ++i;  // its value
      continue;
    }
    if (arg.starts_with("--log-level=") || arg == "--verbose" || verbosity_flags(arg)) continue;
    return arg == "dump";
  }
  return false;
}

std::string whole_program_path(const std::string& relative_dir) {
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  if (error) {
    throw Error("cannot find hangscope's own executable (/proc/self/exe: " + error.message() +
                "), which the program for every command but dump is found beside");
  }
  return (self.parent_path() / relative_dir / "hangscope").lexically_normal().string();
}

int exec_whole_program(char** argv) {
  try {
    const std::string path = whole_program_path(HANGSCOPE_WHOLE_PROGRAM_DIR);
    ::execv(path.c_str(), argv);
    throw Error("cannot run " + path + ", the program of every command but dump: " +
                errno_message("exec", errno) + " (reinstall hangscope)");
  } catch (const Error& e) {
    print_error(e.what());
  }
  return kExitFailed;
}

}  // namespace hangscope::cli
