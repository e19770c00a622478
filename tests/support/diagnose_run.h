// Test helper: runs `hangscope diagnose ARGUMENTS --json -o BUNDLE` as a user runs it and parses
// the report.json it prints.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

namespace hangscope::testing {

struct Diagnosis {
  int exit_code = -1;
  nlohmann::json report;  // report.json as printed with --json; null when it printed none
  std::string out;        // stdout as printed
  std::string err;        // stderr
  std::string bundle;     // the bundle directory (gone when run_diagnose chose it)
  std::chrono::milliseconds took{0};
  // The status of the report's node `index` ("ok", "refused", "unreachable", ...), "" if none.
  std::string node_status(std::size_t index = 0) const;
  // The error of the report's node `index`, "" if none.
  std::string node_error(std::size_t index = 0) const;
};

// `hangscope diagnose ARGUMENTS --json -o BUNDLE`. With `bundle` empty the bundle goes to a fresh
// temporary directory that is removed after the run; otherwise it is written there and kept.
// A run that printed no JSON is a test failure (with what it printed); `report` stays null.
Diagnosis run_diagnose(const std::string& arguments, const std::string& bundle = "");

}  // namespace hangscope::testing
