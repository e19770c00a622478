// Who a process is in its job (role, rank, world, parallel coordinates, job key, where each
// came from) and the log lines kept for it: the records identity/ fills and analysis reads.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hangscope/model/shared.h"

namespace hangscope::model {

// What a process is, decided once when it is captured (identity, then the node's launchers and
// helpers); code branches on it. Its name (`to_string`) is what reports show and what the wire's
// `role` string carries, from which older snapshots' roles are read (`parse_role`).
enum class ProcessRole {
  kUnidentified,
  kRank,         // a rank of a torch.distributed job
  kEngine,       // a serving engine core (vLLM's EngineCore)
  kApi,          // a serving front (an API server)
  kDriver,       // a Ray driver
  kCoordinator,  // vLLM's DP coordinator
  kLauncher,     // a parent of ranks holding no group (torchrun's agent, a spawn parent)
  kHelper,       // a child that inherited a rank's identity (a worker pool's process)
};

// "unidentified", "rank", "engine", "api", "driver", "coordinator", "launcher", "helper".
std::string_view to_string(ProcessRole role);
// The role a name says; kUnidentified for "" and names no version wrote.
ProcessRole parse_role(std::string_view name);
// Where a process's identity (its rank, above all) came from. Code branches on this; its name
// (to_string) is what report.json's `identity_source`, the per-field `sources` and the wire's
// RankIdentity.source (kept for old readers and old files) say.
enum class IdentitySource {
  kNone,                 // "": unidentified
  kEnv,                  // "env": /proc/PID/environ
  kMemoryEnv,            // "memory-env": libc's environ in memory (what the process sees now)
  kTitle,                // "title": the process title (vLLM, Ray, SGLang)
  kLog,                  // "log": its own log lines ("world_size= rank=")
  kMemoryProcessGroup,   // "memory:process-group": torch.distributed's default group in memory
  kMemoryInitArguments,  // "memory:init-arguments": init_process_group's arguments on its stack
  kFlightRecorder,       // "flight-recorder": known from its dump alone (post-mortem)
  kOther,                // a name this version does not know (a newer writer's): "other"
};
std::string_view to_string(IdentitySource source);
// The source a name stands for: kNone for "", kOther for a name no source has.
IdentitySource parse_identity_source(std::string_view name);

struct RankIdentity {
  ProcessRole role = ProcessRole::kUnidentified;
  std::optional<int> rank, local_rank, world_size, tp, pp, dp;
  IdentitySource source = IdentitySource::kNone;
  std::map<std::string, std::string> sources;  // where each known field came from (to_string)
  std::string job;                             // job key, "" when unknown
  std::string title;                           // the process title it was read from, if any
};

struct LogExcerpt {
  std::string path;
  Shared<std::vector<std::string>> lines;  // oldest first, masked; shared by equal excerpts
};

// A dump written this long before the median write time of the set is stale (a leftover of an
// earlier run): named, not correlated.
inline constexpr std::chrono::minutes kStaleBeforeMedian{10};

}  // namespace hangscope::model
