// What one node's capture holds: its processes (identity, environment, stacks, logs, facts,
// flight record) at one instant. Made by capture, carried by snapshot/, read by analysis.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "hangscope/model/flight_record.h"
#include "hangscope/model/process_dump.h"
#include "hangscope/model/rank_identity.h"
#include "hangscope/model/shared.h"

namespace hangscope::model {

struct ProcessRecord {
  pid_t pid = 0;
  pid_t ppid = 0;
  std::string comm;
  std::string cmdline;  // secrets masked
  std::string exe;
  char state = '?';
  std::uint64_t utime_ticks = 0;
  std::uint64_t stime_ticks = 0;
  std::uint64_t start_time_ticks = 0;
  RankIdentity identity;
  pid_t helper_of = 0;  // a helper (child sharing a rank's environment) names its rank
  std::map<std::string, std::string> environment;  // allowlisted, masked
  std::string environment_source;
  std::optional<ProcessDump> dump;
  std::vector<LogExcerpt> logs;  // its stdout/stderr files, masked
  // "version.torch" → "1.13.0", … (facts/); a decoder shares one map between the processes
  // that have the same facts.
  Shared<std::map<std::string, std::string>> facts;
  std::optional<FlightRecord> flight_record;  // its newest flight-recorder dump
  std::string error;                          // why it could not be captured
};

struct NodeSnapshot {
  std::string node_name;
  std::string hostname;
  std::int64_t capture_unix_ns = 0;
  int sample_index = 0;
  std::vector<ProcessRecord> processes;  // ascending pid
  std::vector<std::string> notes;
  std::chrono::nanoseconds capture_time{0};
};

}  // namespace hangscope::model
