#include "hangscope/common/phase_timer.h"

#include <spdlog/spdlog.h>

namespace hangscope {

void PhaseTimer::lap(const char* what) {
  const auto now = std::chrono::steady_clock::now();
  spdlog::debug("{}{}: {:.1f} ms", scope_, what,
                std::chrono::duration<double, std::milli>(now - last_).count());
  last_ = now;
}

}  // namespace hangscope
