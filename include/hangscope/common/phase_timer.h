// Times the phases of a long command and logs each at debug level (-vv): "what: N ms".
#pragma once

#include <chrono>
#include <string>

namespace hangscope {

class PhaseTimer {
 public:
  explicit PhaseTimer(std::string scope = "") : scope_(std::move(scope)) {}

  // Logs the time since the previous lap (or since construction) under `what`.
  void lap(const char* what);

 private:
  std::string scope_;  // a prefix: "analysis, "
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

}  // namespace hangscope
