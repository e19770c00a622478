// Test helper: kills `hangscope dump` with SIGKILL at random points of a capture, many times.
#pragma once

#include <sys/types.h>

#include <string>

namespace hangscope::testing {

struct SigkillLoopResult {
  int iterations = 0;
  int killed_mid_capture = 0;  // runs that had not finished when SIGKILL arrived
  int left_stopped = 0;        // iterations after which some target thread stayed in T/t
  int stalled = 0;  // iterations after which the target's counter did not advance within 1 s
};

// Runs `hangscope dump --pid target --stop-mode MODE` `iterations` times, each killed after a
// random delay up to max_delay_us; after each, waits up to 1 s for every target thread to run
// and, with `counter_file` (native_target --counter), for the target's counter to advance.
SigkillLoopResult sigkill_loop(pid_t target, int iterations, int max_delay_us,
                               const std::string& stop_mode, unsigned seed,
                               const std::string& counter_file = "");

}  // namespace hangscope::testing
