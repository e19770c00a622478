// The whole program's command set: every command, and the protobuf log handler its snapshot
// readers need. The front program (cli/front.h) links only `dump`, never this file.
#include <google/protobuf/stubs/logging.h>

#include <iostream>

#include "hangscope/cli/commands.h"

namespace hangscope::cli {
namespace {

// Protobuf logs parse problems (a string that is not UTF-8) on stderr, quoting field names;
// the caller reports the failed parse itself, with the file's name.
void quiet_protobuf(google::protobuf::LogLevel level, const char* file, int line,
                    const std::string& message) {
  if (level >= google::protobuf::LOGLEVEL_FATAL) {
    std::cerr << "hangscope: protobuf: " << file << ":" << line << ": " << message << "\n";
  }
}

}  // namespace

std::span<const Command> every_command() {
  static const Command commands[] = {
      dump_command(),
      {"collect", "Serve this node's snapshots (agent), or capture it once into a file",
       register_collect_command},
      {"diagnose", "Gather every node's snapshot and write the report", register_diagnose_command},
      {"report", "Re-run the analysis of a saved bundle", register_report_command},
      {"rules", "List the signature rules, or check a rule file", register_rules_command},
      {"watch", "Watch every job without stopping it; keep a bundle when one hangs",
       register_watch_command},
  };
  return commands;
}

int run(int argc, char** argv) {
  google::protobuf::SetLogHandler(quiet_protobuf);
  return run(argc, argv, every_command());
}

}  // namespace hangscope::cli
