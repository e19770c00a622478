// Who a process is in its job (role, rank, world, parallel coordinates, job key, where each
// came from) and the log lines kept for it: the records identity/ fills and analysis reads.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hangscope::model {

struct RankIdentity {
  std::string role = "unidentified";  // rank | engine | api | driver | coordinator | unidentified
  std::optional<int> rank, local_rank, world_size, tp, pp, dp;
  std::string source;                          // env | memory-env | title | log | "" (unidentified)
  std::map<std::string, std::string> sources;  // where each known field came from
  std::string job;                             // job key, "" when unknown
  std::string title;                           // the process title it was read from, if any
};

struct LogExcerpt {
  std::string path;
  std::vector<std::string> lines;  // oldest first, masked
};

// The identity source of a rank known from its dump alone (RankIdentity::source).
inline constexpr const char* kPostMortemSource = "flight-recorder";

// A dump written this long before the median write time of the set is stale (a leftover of an
// earlier run): named, not correlated.
inline constexpr std::chrono::minutes kStaleBeforeMedian{10};

}  // namespace hangscope::model
