// /dev/shm as a process sees it (its mount namespace): size and use. vLLM's shared-memory
// broadcast and NCCL's transports need room there; a full or tiny /dev/shm splits ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace hangscope::facts {

struct ShmUsage {
  std::uint64_t size_bytes = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t free_bytes = 0;
  std::string describe() const;  // "64.0 MiB, 12.5 MiB used (19%), 51.5 MiB free"
};

// statvfs of ROOT/dev/shm (ROOT: the process's /proc/PID/root); nullopt when absent.
std::optional<ShmUsage> shm_usage(const std::string& root);

}  // namespace hangscope::facts
