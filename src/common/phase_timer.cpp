#include "hangscope/common/phase_timer.h"

#include <spdlog/spdlog.h>

namespace hangscope {

void PhaseTimer::lap(const char* what) {
  const auto now = std::chrono::steady_clock::now();
  spdlog::debug("{}{}: {} ms", scope_, what,
                std::chrono::duration_cast<std::chrono::milliseconds>(now - last_).count());
  last_ = now;
}

}  // namespace hangscope
