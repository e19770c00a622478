// This machine's wall clock as nanoseconds since the Unix epoch: the clock samples are due by
// and stamped with (agents' clocks are compared by their offsets, docs/agent.md).
#pragma once

#include <chrono>
#include <cstdint>

namespace hangscope {

inline std::int64_t unix_now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace hangscope
