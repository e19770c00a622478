#include "hangscope/facts/shm.h"

#include <sys/statvfs.h>

#include <cstdio>

namespace hangscope::facts {
namespace {

std::string mib(std::uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return text;
}

}  // namespace

std::string ShmUsage::describe() const {
  const unsigned percent =
      size_bytes == 0 ? 0u
                      : static_cast<unsigned>((used_bytes * 100 + size_bytes / 2) / size_bytes);
  return mib(size_bytes) + ", " + mib(used_bytes) + " used (" + std::to_string(percent) + "%), " +
         mib(free_bytes) + " free";
}

std::optional<ShmUsage> shm_usage(const std::string& root) {
  struct statvfs fs {};
  if (::statvfs((root + "/dev/shm").c_str(), &fs) != 0) return std::nullopt;
  ShmUsage usage;
  const std::uint64_t unit = fs.f_frsize != 0 ? fs.f_frsize : fs.f_bsize;
  usage.size_bytes = static_cast<std::uint64_t>(fs.f_blocks) * unit;
  usage.free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * unit;
  usage.used_bytes = static_cast<std::uint64_t>(fs.f_blocks - fs.f_bfree) * unit;
  return usage;
}

}  // namespace hangscope::facts
